"""Every `ASSISTANT_*` variable documented in docs/configuration.md still works, and lands in its section."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from assistant.core.settings import ENV_FIELDS, Settings, describe_invalid_settings, env_name

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
DOCUMENTED = sorted(set(re.findall(r"\b(?:ASSISTANT|PROMETHEUS)_[A-Z0-9_]*[A-Z0-9]", DOC.read_text(encoding="utf-8"))))
BY_ENV_NAME = {env_name(flat): flat for flat in ENV_FIELDS}

# Values that a type alone does not give (URLs, cron, modules vLLM loads, a long enough secret).
VALUES = {
    "ASSISTANT_DATABASE_URL": "postgresql+psycopg://assistant@db:5432/assistant",
    "ASSISTANT_QDRANT_URL": "http://qdrant:6333",
    "ASSISTANT_OPENAI_BASE_URL": "http://vllm:8000/v1",
    "ASSISTANT_RERANKER_URL": "http://reranker:8000/rerank",
    "ASSISTANT_OIDC_ISSUER_URL": "https://sso.example.com/realms/x",
    "ASSISTANT_OIDC_REDIRECT_URL": "https://assistant.example.com/api/auth/oidc/callback",
    "ASSISTANT_ANSWER_CACHE_REDIS_URL": "redis://cache:6379/1",
    "ASSISTANT_RATE_LIMIT_REDIS_URL": "redis://cache:6379/2",
    "ASSISTANT_BROKER_URL": "amqp://guest:guest@mq:5672//",
    "ASSISTANT_RESULT_BACKEND": "redis://cache:6379/3",
    "ASSISTANT_FINETUNE_SCHEDULE_CRON": "0 4 2 * *",
    "ASSISTANT_FINETUNE_TARGET_MODULES": '["q_proj", "v_proj"]',
    "ASSISTANT_WEBHOOK_ALLOWED_HOSTS": '["hooks.example.com"]',
    "ASSISTANT_SOURCE_ROOTS": '["/srv/docs"]',
    "ASSISTANT_OIDC_GROUP_MAP": '{"staff": "employees"}',
}
# Variables that are valid only together with others (the combination rules of Settings).
COMPANIONS = {
    "ASSISTANT_VECTOR_STORE": {"ASSISTANT_QDRANT_URL": "http://qdrant:6333"},
    "ASSISTANT_JOBS_BACKEND": {"ASSISTANT_VECTOR_STORE": "qdrant", "ASSISTANT_QDRANT_URL": "http://qdrant:6333",
                               "ASSISTANT_DATABASE_URL": "postgresql+psycopg://assistant@db:5432/assistant"},
    "ASSISTANT_ENVIRONMENT": {"ASSISTANT_SECRET_KEY": "a-random-secret-of-32-characters"},
    "ASSISTANT_OIDC_ISSUER_URL": {"ASSISTANT_OIDC_CLIENT_ID": "assistant", "ASSISTANT_OIDC_CLIENT_SECRET": "s3cr3t"},
}


def _other_value(flat: str) -> str:
    """A valid value of the setting `flat` other than its default, as its environment variable would hold it."""
    if env_name(flat) in VALUES:
        return VALUES[env_name(flat)]
    info = Settings.flat_fields()[flat]
    default = info.default
    kind = info.annotation
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # `X | None`
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    bounds = {name: getattr(m, name) for m in info.metadata for name in ("le", "lt") if getattr(m, name, None) is not None}
    if typing.get_origin(kind) is typing.Literal:
        return next(choice for choice in typing.get_args(kind) if choice != default)
    if kind is bool:
        return "false" if default else "true"
    if kind is int:
        value = 2 if default is None else default + 1
        return str(value - 2 if value > bounds.get("le", value) else value)
    if kind is float:
        return str(0.5 if not default else default / 2)
    if kind is SecretStr:
        return "a-random-secret-of-32-characters"
    if kind is Path:
        return "/tmp/assistant-settings-test"
    return "a-value"


def test_the_documentation_names_every_setting_and_nothing_else():
    documented = set(DOCUMENTED)
    assert {env_name(flat) for flat in ENV_FIELDS} - documented == set(), "settings missing from docs/configuration.md"
    assert documented - set(BY_ENV_NAME) == set(), "docs/configuration.md names variables that Settings does not read"


def test_every_section_field_has_one_flat_name():
    placed = set(ENV_FIELDS.values())
    for section, info in Settings.model_fields.items():
        for field in info.annotation.model_fields:
            assert (section, field) in placed, f"settings.{section}.{field} has no ASSISTANT_* name in ENV_FIELDS"
    assert len(placed) == len(ENV_FIELDS)


@pytest.mark.parametrize("variable", DOCUMENTED)
def test_each_documented_variable_lands_in_its_section(monkeypatch, tmp_path, variable):
    for name in [*BY_ENV_NAME.values()]:
        monkeypatch.delenv(env_name(name), raising=False)
    flat = BY_ENV_NAME[variable]
    section, field = ENV_FIELDS[flat]
    for name, value in {**COMPANIONS.get(variable, {}), variable: _other_value(flat)}.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)
    part = getattr(settings, section)
    assert field in part.model_fields_set
    assert getattr(part, field) != type(part).model_fields[field].get_default(call_default_factory=True)


def test_a_dotenv_file_and_keyword_arguments_use_the_flat_names(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("ASSISTANT_LLM_MAX_TOKENS=77\nASSISTANT_FINETUNE_LORA_RANK=4\n", encoding="utf-8")
    settings = Settings(_env_file=env_file, top_k=3, data_dir=tmp_path)
    assert (settings.llm.max_tokens, settings.finetune.lora_rank) == (77, 4)
    assert (settings.retrieval.top_k, settings.storage.data_dir) == (3, tmp_path)


def test_model_copy_takes_flat_names_and_never_shares_a_section(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    copy = settings.model_copy(update={"top_k": 9, "llm_max_tokens": 11})
    copy.embedding.model = "another"
    assert (copy.retrieval.top_k, copy.llm.max_tokens) == (9, 11)
    assert (settings.retrieval.top_k, settings.llm.max_tokens) == (5, 320)
    assert settings.embedding.model != "another"


def test_problems_name_the_environment_variable(tmp_path):
    with pytest.raises(ValidationError) as caught:
        Settings(_env_file=None, data_dir=tmp_path, top_k=0, finetune_lora_rank=99)
    message = describe_invalid_settings(caught.value)
    assert "ASSISTANT_TOP_K:" in message and "ASSISTANT_FINETUNE_LORA_RANK:" in message
