"""One model cache per installation (issue 41): a second data folder finds multilingual-e5-small already
converted in the installation's `var/models` instead of converting it into a `models/` of its own."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from assistant.core.embedding import e5_onnx
from assistant.core.resources import Resources
from assistant.core.settings import INSTALLATION_MODEL_CACHE
from tests.conftest import make_settings


def test_a_second_data_folder_does_not_convert_the_model_again(tmp_path, caplog):
    # model_cache_dir=None: the default, whatever ASSISTANT_MODEL_CACHE_DIR the session set.
    first, second = (make_settings(tmp_path / name / "var", model_cache_dir=None) for name in ("a", "b"))
    assert first.model_cache_path == second.model_cache_path == INSTALLATION_MODEL_CACHE
    assert first.onnx_cache_dir == second.onnx_cache_dir == INSTALLATION_MODEL_CACHE / "onnx"

    res = Resources.open(first)
    try:
        folder = res.embedder.path  # converted here only if this installation never did (make install does)
    finally:
        res.close()
    assert folder == e5_onnx.cache_folder(INSTALLATION_MODEL_CACHE)
    converted_at = (folder / e5_onnx.MODEL_FILE).stat().st_mtime_ns

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="assistant.core.embedding.e5"):
        res = Resources.open(second)
        try:
            assert res.embedder.path == folder
            assert res.embedder.embed_query("where is the model cache?").shape == (res.embedder.dim,)
        finally:
            res.close()
    assert not [r.message for r in caplog.records if "converting" in r.getMessage()]
    assert (folder / e5_onnx.MODEL_FILE).stat().st_mtime_ns == converted_at
    for settings in (first, second):
        assert not (settings.storage.data_dir / "models").exists()
        assert settings.storage.data_dir not in INSTALLATION_MODEL_CACHE.parents


def test_two_processes_converting_into_one_fresh_cache_convert_once(tmp_path):
    # Two data folders' processes started together on a fresh installation: one converts (about a
    # minute, 1.5 GB), the other waits on the lock file beside the entry and then uses that model.
    cache = tmp_path / "models"
    env = {**os.environ, "ASSISTANT_MODEL_CACHE_DIR": str(cache)}
    procs = [
        subprocess.Popen([sys.executable, "-m", "assistant.core.embedding.e5"], text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**env, "ASSISTANT_DATA_DIR": str(tmp_path / name)})
        for name in ("a", "b")
    ]
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    folder = e5_onnx.cache_folder(cache)
    assert {out.strip() for out, _ in results} == {str(folder)}
    assert sum("converting multilingual-e5-small" in err for _, err in results) == 1, results
    assert not list(cache.glob("*.partial-*"))
    assert sorted(p.name for p in folder.iterdir()) == sorted([e5_onnx.MODEL_FILE, e5_onnx.TOKENIZER_FILE, "tokenizer_config.json"])
