"""Sections of the features: ingestion, OCR, sign-in, single sign-on, the helpdesk, rate limits,
webhooks, retention, uploads and the monthly model refresh (variables named as in `env_names`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from assistant.core.settings.env_names import Section
from assistant.core.urls import HttpUrlText, RedisUrlText

# Modules vLLM can load a LoRA for (its supported_lora_modules for Llama-family models, less the
# embeddings): an adapter touching anything else is refused by the server.
VLLM_LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
VLLM_MAX_LORA_RANK = 16  # deploy/vllm/*.yaml: max-lora-rank


class IngestSettings(Section):
    """Chunking, per-file parsing limits and ingestion throughput (a file over a limit fails alone with a reason naming the setting)."""
    chunk_size_tokens: int = Field(default=0, ge=0, description="0 = the embedding model's own limit minus special tokens")
    chunk_overlap_tokens: int = Field(default=32, ge=0)
    max_file_size_bytes: int = Field(default=100 * 1024 * 1024, ge=1, description="largest file parsed")
    max_pages: int = Field(default=5000, ge=1, description="most PDF pages or slides per document")
    max_decompressed_bytes: int = Field(
        default=1024 * 1024 * 1024, ge=1, description="most bytes a zip-based file (DOCX, XLSX, EPUB...) unpacks to"
    )
    max_sheet_cells: int = Field(default=2_000_000, ge=1, description="most spreadsheet/CSV cells per file")
    max_sheet_rows: int = Field(
        default=1_000_000, ge=1,
        description="most spreadsheet/CSV rows indexed per file; the rows beyond are left out and the status says so",
    )
    table_min_rows: int = Field(
        default=200, ge=0,
        description="a sheet or CSV file with at least this many rows becomes a queryable table (one table card "
        "embedded instead of its rows); 0 = never",
    )
    parse_timeout_s: float = Field(
        default=120.0, gt=0, description="wall-clock seconds one file's parse may take before its process is killed"
    )
    parse_memory_limit_bytes: int = Field(
        default=2 * 1024**3, ge=64 * 1024**2,
        description="address space (RLIMIT_AS) a parse may use beyond the parser process's start-up size",
    )
    parse_part_chunks: int = Field(
        default=256, ge=1,
        description="chunks the parser process hands over at a time: a big file (a 200,000-row workbook) is embedded "
        "and written a part at a time, so memory stays bounded whatever its length",
    )
    embedding_batch_chunks: int = Field(default=512, ge=1, description="chunks gathered across files before one embedding call")
    embedding_slice_chunks: int = Field(
        default=64, ge=1, description="passages per embedding call within a batch, each slice written as soon as embedded",
    )
    progress_interval_s: float = Field(
        default=30.0, gt=0, validation_alias="ingest_progress_interval_s",
        description="`assistant ingest` with output not a terminal (a log, systemd, CI): seconds between two progress lines",
    )
    optimize_min_points: int = Field(
        default=1000, ge=1,
        description="a sync that writes at least this many points optimises the Qdrant Edge collection after it",
    )
    embedding_cache_max_vectors: int = Field(
        default=1_000_000, ge=0,
        description="most vectors the ingestion embedding cache keeps (oldest dropped first; 1M x 384-d is about 1.6 GB)",
    )
    via_server: bool = Field(
        default=True, validation_alias="ingest_via_server",
        description="`assistant ingest` hands its work to a running `assistant serve` that holds the embedded store",
    )
    source_roots: list[Path] = Field(
        default_factory=list,
        description="folders on the server under which admins may start syncs through the API (JSON list); "
        "empty: the API starts none (the CLI is not limited)",
    )


class OcrSettings(Section, flat_prefix="ocr_"):
    """OCR of scanned pages and images."""
    engine: Literal["rapidocr", "tesseract", "none"] = Field(
        default="rapidocr",
        description="OCR of scanned pages and images: rapidocr (PP-OCR models inside its package, Chinese and "
        "English), tesseract (if installed; languages from ocr_languages) or none",
    )
    languages: str = Field(default="eng", description="tesseract languages, e.g. 'eng+chi_sim'")
    page_timeout_s: float = Field(default=120.0, ge=0, description="seconds OCR may spend on one page; 0 = no limit")
    threads: int = Field(default=0, ge=0, description="ONNX Runtime threads of the OCR models; 0 = all cores")


class AuthSettings(Section):
    """Sign-in: the signing key, browser sessions, throttling of failed sign-ins, the first admin."""
    secret_key: SecretStr | None = Field(
        default=None,
        description="signs session cookies; default: a random key generated once into data_dir/secret-key "
        "(required in production, where several processes must share it)",
    )
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
    login_backoff_base_s: float = Field(
        default=2.0, gt=0,
        description="seconds one account name waits from one client address after login_max_failures failures "
        "from there; doubled on each further failure, at most login_failure_window_s",
    )
    bootstrap_admin_name: str = Field(default="admin", min_length=1, max_length=255)
    bootstrap_admin_password: SecretStr | None = Field(
        default=None,
        description="password of the first admin `assistant serve` creates on an empty database; default: generated and printed once",
    )


class OidcSettings(Section, flat_prefix="oidc_"):
    """Single sign-on through OpenID Connect."""
    issuer_url: HttpUrlText | None = Field(default=None, description="OpenID Connect issuer, e.g. https://sso.example.com/realms/x")
    client_id: str | None = None
    client_secret: SecretStr | None = None
    scopes: str = "openid email profile"
    redirect_url: HttpUrlText | None = Field(
        default=None, description="public URL of /api/auth/oidc/callback; default: derived from the request"
    )
    username_claim: str = Field(default="preferred_username", description="claim naming the local user")
    groups_claim: str = Field(default="groups", description="claim listing the user's IdP groups")
    group_map: dict[str, str] = Field(
        default_factory=dict, description="IdP group -> local group (JSON in the environment); unmapped IdP groups are ignored",
    )

    @property
    def enabled(self) -> bool:
        """True when single sign-on through OpenID Connect is configured."""
        return bool(self.issuer_url)


class HelpdeskSettings(Section, flat_prefix="helpdesk_"):
    """The helpdesk: automatic replies, resolutions, the hand-over from the web app."""
    auto_reply_threshold: float = Field(
        default=0.5, ge=0.0, le=1.0, description="a ticket is auto-replied when its confidence reaches this (docs/helpdesk.md)"
    )
    resolutions_dir: Path | None = Field(
        default=None, description="where resolved tickets are written as documents; default: DATA_DIR/helpdesk-resolutions"
    )
    handoff: bool = Field(
        default=False, description="offer 'ask the helpdesk' when the documents hold no answer: the conversation becomes a ticket",
    )


class RateLimitSettings(Section, flat_prefix="rate_limit_"):
    """Per API key limits on /v1 and the helpdesk."""
    requests_per_minute: int = Field(default=0, ge=0, description="per API key on /v1 and the helpdesk; 0 = unlimited")
    tokens_per_minute: int = Field(default=0, ge=0, description="per API key, answer tokens; 0 = unlimited")
    redis_url: RedisUrlText | None = Field(
        default=None, description="Redis shared by the API processes for rate limits; default: in-process counters"
    )


class WebhookSettings(Section, flat_prefix="webhook_"):
    """Delivery of webhooks to the hosts a key's URL may name."""
    allowed_hosts: list[str] = Field(
        default_factory=list, description="hosts (or host:port) a key's webhook URL may name; empty = no webhooks"
    )
    max_attempts: int = Field(default=8, ge=1, description="tries of one delivery before it is dead-lettered")
    backoff_s: float = Field(default=5.0, gt=0, description="seconds before the first retry; doubled each time")
    backoff_max_s: float = Field(default=600.0, gt=0, description="longest wait between two tries, in seconds")
    timeout_s: float = Field(default=10.0, gt=0, description="seconds one delivery attempt may take")


class RetentionSettings(Section, flat_prefix="retention_"):
    """How long records are kept, and what erasing a user does to the audit trail."""
    audit_days: int = Field(
        default=365, ge=0, description="days audit rows are kept; 0 = forever (China's Cybersecurity Law asks for at least 180)"
    )
    conversations_days: int = Field(
        default=0, ge=0, description="days a conversation is kept after its last message; 0 = until its owner deletes it"
    )
    feedback_days: int = Field(default=0, ge=0, description="days ratings are kept; 0 = forever")
    uploads_days: int = Field(default=0, ge=0, description="days an uploaded file (and its chunks) is kept; 0 = forever")
    job_items_days: int = Field(default=90, ge=0, description="days finished jobs and their per-file items are kept; 0 = forever")
    interval_s: float = Field(
        default=86400.0, ge=0, description="seconds between runs of the retention job (Celery beat or in-process); 0 = never"
    )
    erasure_audit_content: Literal["redact", "keep"] = Field(
        default="redact", validation_alias="erasure_audit_content",
        description="what erasing a user does to their audit rows: 'redact' replaces the query text (who, when, "
        "which documents stay), 'keep' leaves it",
    )


class UploadsSettings(Section, flat_prefix="upload_"):
    """Files uploaded through the web app."""
    dir: Path | None = Field(
        default=None, validation_alias="uploads_dir",
        description="where uploaded files are kept while their documents exist; default: DATA_DIR/uploads",
    )
    max_files: int = Field(default=20, ge=1, description="files accepted in one upload request")
    max_request_bytes: int = Field(
        default=256 * 1024 * 1024, ge=1024, description="largest upload request body (all its files), in bytes"
    )


class FinetuneSettings(Section, flat_prefix="finetune_"):
    """The monthly model refresh: LoRA hyperparameters, the dataset, the gate, the canary and the schedule."""
    dir: Path | None = Field(default=None, description="adapters, datasets and run logs; default: data_dir/finetune")
    base_model: str = Field(
        default="served",
        description="base the adapters are trained on, which must be the model that answers: 'served' (the GGUF that "
        "llm_model serves, dequantised; llama_cpp), the same as 'builtin:NAME' or a GGUF path, or (openai backend, vLLM) "
        "the local folder of the served model's bf16 weights",
    )
    lora_rank: int = Field(default=8, ge=1, le=VLLM_MAX_LORA_RANK, description="LoRA rank r (vLLM profiles allow up to 16)")
    lora_alpha: int = Field(default=16, ge=1, description="LoRA alpha (the update is scaled by alpha/r)")
    target_modules: list[str] = Field(
        default=list(VLLM_LORA_MODULES), description="modules the adapter trains (JSON list); only those vLLM loads are accepted",
    )
    learning_rate: float = Field(default=1e-3, gt=0)
    epochs: int = Field(default=12, ge=1)
    batch_size: int = Field(default=4, ge=1)
    max_length_tokens: int = Field(default=256, ge=32, description="longest training example, in tokens")
    heldout_share: float = Field(default=0.1, ge=0, lt=1, description="share of rows kept for the gate")
    qa_per_chunk: int = Field(default=1, ge=0, description="QA pairs the LLM writes per new chunk")
    max_new_chunks: int = Field(default=200, ge=0, description="new or changed chunks used per refresh")
    gate_tolerance: float = Field(
        default=0.05, ge=0,
        description="when the gate judges no answers: a candidate's held-out loss may be worse than live's by this "
        "share, no more",
    )
    eval_questions: Path | None = Field(
        default=None, description="`assistant eval` question file (JSONL) the gate scores candidates on; none: held-out rows only"
    )
    gate_answer_questions: int = Field(
        default=8, ge=0,
        description="evaluation questions (the first N of finetune_eval_questions) that candidate and live answer "
        "through the product's answering in the gate; 0: the held-out likelihood decides",
    )
    gate_answer_max_tokens: int = Field(default=96, ge=8, description="longest answer the gate generates per question, in tokens")
    gate_answer_tolerance: float = Field(
        default=0.1, ge=0, le=1,
        description="largest drop allowed in the share of evaluation questions answered right (a key fact, or a "
        "decline where the documents hold no answer) and in the share of answers citing their answer file, "
        "candidate against live",
    )
    canary_share: float = Field(default=0.1, ge=0, le=1, description="share of users served the canary")
    schedule_cron: str = Field(default="0 3 1 * *", description="when the refresh runs (cron: min hour day month weekday)")
    celery_queue: str = Field(default="gpu", description="Celery queue of the refresh (workers with a GPU consume it)")
    schedule_enabled: bool = Field(default=True, description="run the refresh on the schedule")

    @field_validator("target_modules")
    @classmethod
    def _vllm_modules_only(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(VLLM_LORA_MODULES))
        if unknown or not value:
            raise ValueError(
                f"{cls.env_name('target_modules')}={value!r}: only {sorted(VLLM_LORA_MODULES)} may be adapted (vLLM loads those)"
            )
        return value

    @field_validator("schedule_cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"{cls.env_name('schedule_cron')}={value!r} must have 5 fields (minute hour day month weekday)")
        return value
