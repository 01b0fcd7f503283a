"""Configuration refuses impossible combinations and placeholder secrets, naming the field."""

import pytest
from pydantic import ValidationError

from assistant.auth.signing import signing_key
from assistant.core.errors import ConfigError
from assistant.core.settings import Settings, describe_invalid_settings


def test_defaults_are_the_embedded_deployment(tmp_path):
    s = Settings(_env_file=None, data_dir=tmp_path)
    assert (s.storage.vector_store, s.jobs.backend, s.llm.backend) == ("edge", "inprocess", "llama_cpp")
    assert s.resolved_database_url == f"sqlite:///{(tmp_path / 'assistant.db').resolve()}"


def test_environment_prefix(monkeypatch, tmp_path):
    monkeypatch.setenv("ASSISTANT_TOP_K", "7")
    assert Settings(_env_file=None, data_dir=tmp_path).retrieval.top_k == 7


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
    key = signing_key(settings)
    assert len(key) >= 40
    assert (tmp_path / "secret-key").stat().st_mode & 0o077 == 0
    assert signing_key(Settings(_env_file=None, data_dir=tmp_path)) == key  # stable across restarts
    assert signing_key(Settings(_env_file=None, data_dir=tmp_path / "other")) != key
    assert signing_key(Settings(_env_file=None, data_dir=tmp_path, secret_key="x" * 32)) == "x" * 32


@pytest.mark.parametrize(
    "overrides, shown",
    [
        ({"secret_key": "changeme"}, "ASSISTANT_SECRET_KEY='changeme'"),
        ({"secret_key": ""}, "ASSISTANT_SECRET_KEY=''"),
        ({"secret_key": "r4nd0m-long-secret", "llm_backend": "openai"}, "ASSISTANT_OPENAI_API_KEY='EMPTY'"),
        ({"secret_key": "r4nd0m-long-secret", "llm_backend": "openai", "openai_api_key": "changeme"},
         "ASSISTANT_OPENAI_API_KEY='changeme'"),
    ],
)
def test_placeholder_secrets_are_refused_in_production(tmp_path, overrides, shown):
    with pytest.raises((ConfigError, ValueError)) as info:
        Settings(_env_file=None, data_dir=tmp_path, environment="production", **overrides)
    assert shown in str(info.value) and "placeholder" in str(info.value)


def test_placeholders_pass_in_development_and_unused_keys_in_production(tmp_path):
    assert Settings(_env_file=None, data_dir=tmp_path, llm_backend="openai").llm.openai_api_key.get_secret_value() == "EMPTY"
    # The in-process model sends no key anywhere: the default placeholder is not in the way.
    production = Settings(_env_file=None, data_dir=tmp_path, environment="production", secret_key="r4nd0m-long-secret")
    assert production.llm.backend == "llama_cpp"


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"vector_store": "qdrant", "qdrant_url": "localhost:6333"}, "ASSISTANT_QDRANT_URL"),
        ({"openai_base_url": "127.0.0.1:8001/v1"}, "ASSISTANT_OPENAI_BASE_URL"),
        ({"database_url": "mysql://u:p@db/assistant"}, "ASSISTANT_DATABASE_URL"),
        ({"database_url": "not a url"}, "ASSISTANT_DATABASE_URL"),
        ({"answer_cache_redis_url": "http://cache:6379"}, "ASSISTANT_ANSWER_CACHE_REDIS_URL"),
        ({"broker_url": "kafka://broker:9092"}, "ASSISTANT_BROKER_URL"),
    ],
)
def test_urls_are_checked_naming_the_variable_but_not_the_value(tmp_path, overrides, field):
    with pytest.raises(ValidationError) as info:
        Settings(_env_file=None, data_dir=tmp_path, **overrides)
    message = describe_invalid_settings(info.value)  # what `get_settings` reports
    assert message.startswith(f"{field} is not ") and "u:p@" not in message, message


def test_urls_are_kept_as_given(tmp_path):
    s = Settings(
        _env_file=None, data_dir=tmp_path, vector_store="qdrant", qdrant_url="http://qdrant:6333",
        database_url="postgresql+psycopg://assistant:pw@db:5432/assistant", broker_url="amqp://guest:guest@mq:5672//",
        answer_cache_redis_url="redis://cache:6379/1", openai_base_url="http://vllm:8000/v1",
    )
    assert (s.storage.qdrant_url, s.jobs.broker_url, s.llm.openai_base_url) == ("http://qdrant:6333", "amqp://guest:guest@mq:5672//", "http://vllm:8000/v1")
    assert s.resolved_database_url == "postgresql+psycopg://assistant:pw@db:5432/assistant"
    assert Settings(_env_file=None, data_dir=tmp_path, database_url="sqlite:////tmp/x.db").storage.database_url == "sqlite:////tmp/x.db"
