"""Configuration refuses impossible combinations and placeholder secrets, naming the field."""

import pytest

from assistant.core.errors import ConfigError
from assistant.core.settings import Settings


def test_defaults_are_the_embedded_deployment(tmp_path):
    s = Settings(_env_file=None, data_dir=tmp_path)
    assert (s.vector_store, s.jobs_backend, s.llm_backend) == ("edge", "inprocess", "llama_cpp")
    assert s.resolved_database_url == f"sqlite:///{(tmp_path / 'assistant.db').resolve()}"


def test_environment_prefix(monkeypatch, tmp_path):
    monkeypatch.setenv("ASSISTANT_TOP_K", "7")
    assert Settings(_env_file=None, data_dir=tmp_path).top_k == 7


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"jobs_backend": "celery"}, "ASSISTANT_JOBS_BACKEND"),
        ({"jobs_backend": "celery", "vector_store": "qdrant", "qdrant_url": "http://q:6333"}, "ASSISTANT_DATABASE_URL"),
        ({"secret_key": "short"}, "ASSISTANT_SECRET_KEY"),
        ({"vector_store": "qdrant"}, "ASSISTANT_QDRANT_URL"),
        ({"environment": "production"}, "ASSISTANT_SECRET_KEY"),
    ],
)
def test_impossible_combinations_are_refused(tmp_path, overrides, field):
    with pytest.raises((ConfigError, ValueError)) as info:
        Settings(_env_file=None, data_dir=tmp_path, **overrides)
    assert field in str(info.value)


def test_the_cookie_signing_key_is_generated_once_and_kept_private(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    key = settings.signing_key()
    assert len(key) >= 40
    assert (tmp_path / "secret-key").stat().st_mode & 0o077 == 0
    assert Settings(_env_file=None, data_dir=tmp_path).signing_key() == key  # stable across restarts
    assert Settings(_env_file=None, data_dir=tmp_path / "other").signing_key() != key
    assert Settings(_env_file=None, data_dir=tmp_path, secret_key="x" * 32).signing_key() == "x" * 32
