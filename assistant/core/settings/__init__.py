"""The one configuration object, read from `ASSISTANT_*` environment variables (and `.env`).

`Settings` holds one section per subject (`settings.retrieval.top_k`, `settings.llm.max_tokens`,
`settings.finetune.lora_rank`), grouped by layer in `kernel`, `answering` and `features`. Every field
keeps its flat environment name (`ASSISTANT_TOP_K`, `ASSISTANT_LLM_MAX_TOKENS`,
`ASSISTANT_FINETUNE_LORA_RANK`), declared at the field (`env_names`); `ENV_FIELDS`, derived from the
sections, maps flat names to sections for the environment, `.env`, `Settings(top_k=3)` and
`model_copy(update=...)`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from dotenv import dotenv_values
from pydantic import Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from assistant.core.errors import ConfigError
from assistant.core.settings.answering import AnswerCacheSettings, RerankingSettings, RetrievalSettings
from assistant.core.settings.env_names import (
    ENV_PREFIX,
    env_fields,
    env_name_at,
    flat_env_source,
    nest_flat_names,
    section_model,
    unknown_env_names,
)
from assistant.core.settings.features import (
    AuthSettings,
    FinetuneSettings,
    HelpdeskSettings,
    IngestSettings,
    OcrSettings,
    OidcSettings,
    RateLimitSettings,
    RetentionSettings,
    UploadsSettings,
    WebhookSettings,
)
from assistant.core.settings.kernel import (
    EmbeddingSettings,
    JobsSettings,
    LlmSettings,
    ObservabilitySettings,
    ServerSettings,
    StorageSettings,
)

__all__ = ["ENV_FIELDS", "PLACEHOLDER_SECRETS", "Settings", "describe_invalid_settings", "env_name", "get_settings"]

# Values that stand for a secret not chosen yet (compared trimmed and lower-cased): refused in production.
# The installation (the checkout holding this package and its .venv) keeps one model cache for all its
# data folders: converting multilingual-e5-small again for each of them cost 20-70 s (issue 41).
INSTALLATION_MODEL_CACHE = Path(__file__).resolve().parents[3] / "var" / "models"
PLACEHOLDER_SECRETS = frozenset({"", "empty", "none", "null", "changeme", "change-me", "change_me", "secret", "password"})


class Settings(BaseSettings):
    """Every knob of the product, one section per subject. Values only: no clients, no sessions.

    Selecting the embedded default or the production deployment is configuration, never a code fork:
    `storage.vector_store`, `jobs.backend` and `llm.backend` pick the implementations.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    storage: StorageSettings = Field(default_factory=StorageSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    reranking: RerankingSettings = Field(default_factory=RerankingSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    answer_cache: AnswerCacheSettings = Field(default_factory=AnswerCacheSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    oidc: OidcSettings = Field(default_factory=OidcSettings)
    helpdesk: HelpdeskSettings = Field(default_factory=HelpdeskSettings)
    rate_limits: RateLimitSettings = Field(default_factory=RateLimitSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    uploads: UploadsSettings = Field(default_factory=UploadsSettings)
    finetune: FinetuneSettings = Field(default_factory=FinetuneSettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments first, then the environment, then `.env`, all by flat name (no secrets folder)."""
        # pydantic-settings hands its EnvSettingsSource and DotEnvSettingsSource (a subclass) in here.
        env, dotenv = cast(EnvSettingsSource, env_settings), cast(EnvSettingsSource, dotenv_settings)
        return init_settings, flat_env_source(settings_cls, env), flat_env_source(settings_cls, dotenv)

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        return nest_flat_names(cls, data) if isinstance(data, dict) else data

    @classmethod
    def flat_fields(cls) -> dict[str, FieldInfo]:
        """Every setting by its flat name (`top_k`, `llm_model`): the section field behind `ASSISTANT_<NAME>`."""
        return {flat: section_model(cls, section).model_fields[name]
                for flat, (section, name) in env_fields(cls).items()}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """A copy with `update` applied, its keys flat names (`top_k`) or sections; no validation.

        Each section is copied as well, so that changing a section of the copy (or of this object)
        never changes the other.
        """
        nested = nest_flat_names(type(self), dict(update or {}))
        for section in type(self).model_fields:
            change = nested.get(section)
            if change is None or isinstance(change, dict):
                nested[section] = getattr(self, section).model_copy(update=change, deep=deep)
        return super().model_copy(update=nested, deep=deep)

    @model_validator(mode="after")
    def _refuse_impossible(self) -> Settings:
        jobs, storage, auth, environment = self.jobs, self.storage, self.auth, self.server.environment
        if jobs.task_time_limit_s <= jobs.task_soft_time_limit_s:
            raise ConfigError(
                f"ASSISTANT_TASK_TIME_LIMIT_S={jobs.task_time_limit_s} must exceed "
                f"ASSISTANT_TASK_SOFT_TIME_LIMIT_S={jobs.task_soft_time_limit_s}: the soft limit lets a job record why it stopped"
            )
        if jobs.backend == "celery" and storage.vector_store == "edge":
            raise ConfigError(
                "ASSISTANT_JOBS_BACKEND='celery' cannot be combined with ASSISTANT_VECTOR_STORE='edge': "
                "the embedded Qdrant Edge folder may be opened by one process only; "
                "use ASSISTANT_VECTOR_STORE='qdrant' with ASSISTANT_QDRANT_URL for external workers"
            )
        if self.reranking.model and self.reranking.url:
            raise ConfigError(
                f"ASSISTANT_RERANKER_MODEL={str(self.reranking.model)!r} and ASSISTANT_RERANKER_URL={self.reranking.url!r} "
                "are both set: choose one reranker"
            )
        if storage.vector_store == "qdrant" and not (storage.qdrant_url or storage.qdrant_path):
            raise ConfigError(
                "ASSISTANT_VECTOR_STORE='qdrant' needs ASSISTANT_QDRANT_URL (a server) "
                "or ASSISTANT_QDRANT_PATH (qdrant-client local mode)"
            )
        if environment == "production":
            self._refuse_placeholder_secrets()
        if auth.secret_key is not None and len(auth.secret_key.get_secret_value()) < 16:
            raise ConfigError("ASSISTANT_SECRET_KEY is shorter than 16 characters; use a random value of 32 or more")
        if environment == "production" and auth.secret_key is None:
            raise ConfigError(
                "ASSISTANT_SECRET_KEY must be set in production (a random value of 32 characters or more, "
                "the same for every API process)"
            )
        if jobs.backend == "celery" and self.resolved_database_url.startswith("sqlite"):
            raise ConfigError(
                "ASSISTANT_JOBS_BACKEND='celery' needs a shared database: set ASSISTANT_DATABASE_URL to PostgreSQL; "
                "Celery workers in other processes or machines cannot share the embedded SQLite file"
            )
        if environment == "production" and auth.session_cookie_secure is False:
            raise ConfigError(
                "ASSISTANT_SESSION_COOKIE_SECURE=false cannot be combined with ASSISTANT_ENVIRONMENT='production': "
                "the session cookie would travel over plain HTTP"
            )
        oidc = {"ASSISTANT_OIDC_ISSUER_URL": self.oidc.issuer_url, "ASSISTANT_OIDC_CLIENT_ID": self.oidc.client_id,
                "ASSISTANT_OIDC_CLIENT_SECRET": self.oidc.client_secret}
        missing = [name for name, value in oidc.items() if not value]
        if self.oidc.issuer_url and missing:
            raise ConfigError(f"single sign-on needs {', '.join(missing)} as well as ASSISTANT_OIDC_ISSUER_URL")
        return self

    def _refuse_placeholder_secrets(self) -> None:
        # A placeholder names no secret, so the value is shown; a real secret never is.
        secrets = {"secret_key": self.auth.secret_key, "qdrant_api_key": self.storage.qdrant_api_key,
                   "oidc_client_secret": self.oidc.client_secret, "bootstrap_admin_password": self.auth.bootstrap_admin_password,
                   "metrics_token": self.observability.metrics_token}
        if self.llm.backend == "openai":  # the key is sent only to an OpenAI-compatible server
            secrets["openai_api_key"] = self.llm.openai_api_key
        for name, value in secrets.items():
            if value is not None and value.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS:
                raise ConfigError(
                    f"{env_name(name)}={value.get_secret_value()!r} is a placeholder, refused with "
                    "ASSISTANT_ENVIRONMENT='production': set a real secret (for ASSISTANT_OPENAI_API_KEY, the key "
                    "the LLM server was started with, e.g. vLLM --api-key)"
                )

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL in use: `storage.database_url`, or a SQLite file under `storage.data_dir`."""
        if self.storage.database_url:
            return self.storage.database_url
        return f"sqlite:///{(self.storage.data_dir / 'assistant.db').resolve()}"

    @property
    def edge_path(self) -> Path:
        """Folder of the embedded Qdrant Edge shard."""
        return self.storage.data_dir / "qdrant-edge"

    @property
    def model_cache_path(self) -> Path:
        """Folder of converted and exported models: `embedding.model_cache_dir`, else the installation's
        `var/models` (next to its `.venv`, where `make install` converts them), one for every data folder."""
        return self.embedding.model_cache_dir or INSTALLATION_MODEL_CACHE

    @property
    def onnx_cache_dir(self) -> Path | None:
        """Folder of exported question-embedding graphs, or None when `embedding.query_runtime` is torch."""
        if self.embedding.query_runtime != "onnx":
            return None
        return self.model_cache_path / "onnx"

    @property
    def threads(self) -> int:
        """CPU threads for the chat model: `llm.threads`, or every core when that is 0."""
        return self.llm.threads or os.cpu_count() or 1

    @property
    def resolutions_dir(self) -> Path:
        """The folder resolved helpdesk tickets are written to as documents (`helpdesk.resolutions_dir`)."""
        return self.helpdesk.resolutions_dir or self.storage.data_dir / "helpdesk-resolutions"

    @property
    def resolved_uploads_dir(self) -> Path:
        """The folder uploaded files are kept in (`uploads.dir`)."""
        return self.uploads.dir or self.storage.data_dir / "uploads"

    @property
    def tables_dir(self) -> Path:
        """The folder of the documents' queryable tables, one duckdb file per document (DATA_DIR/tables)."""
        return self.storage.data_dir / "tables"

    @property
    def cookie_secure(self) -> bool:
        """Whether the session cookie carries the Secure flag (explicit setting, else production only)."""
        if self.auth.session_cookie_secure is not None:
            return self.auth.session_cookie_secure
        return self.server.environment == "production"

    @property
    def finetune_path(self) -> Path:
        """Folder of adapters, dataset snapshots and run logs (`finetune.dir`)."""
        return self.finetune.dir or self.storage.data_dir / "finetune"

    def ensure_dirs(self) -> bool:
        """Create `storage.data_dir` if missing, readable by its owner only (it holds password hashes,
        the audit log and the text of restricted chunks). Returns True when it was created now."""
        data_dir = self.storage.data_dir
        created = not data_dir.exists()
        data_dir.mkdir(parents=True, exist_ok=True)
        if created:
            data_dir.chmod(0o700)
        return created


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment.

    An `ASSISTANT_*` variable of the environment or `.env` that is no setting (a misspelt name) is
    ignored with a warning on stderr naming the closest setting (`env_names.unknown_env_names`): a
    warning, not an error, since other tools may share the prefix.

    Raises:
        ConfigError: a variable is invalid (each one named, e.g. `ASSISTANT_TOP_K`, with the
            problem; values are not repeated, since some are secrets) or the combination is
            impossible.
    """
    try:
        settings = Settings()
    except ValidationError as exc:
        raise ConfigError(describe_invalid_settings(exc)) from None
    names = [*os.environ, *(dotenv_values(".env") if os.path.isfile(".env") else ())]
    for sentence in unknown_env_names(Settings, names):
        print(f"warning: {sentence}", file=sys.stderr)
    return settings


def describe_invalid_settings(exc: ValidationError) -> str:
    """One sentence per problem of a failed `Settings()`: the environment variable and why."""
    problems = []
    for error in exc.errors():
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        name = env_name_at(Settings, tuple(error.get("loc") or ()))
        problems.append(f"{name}: {message}" if name and not message.startswith(name) else message)
    return "; ".join(problems)


# flat name -> (section, field) of every setting, derived from the sections (`env_names.env_fields`).
ENV_FIELDS: dict[str, tuple[str, str]] = env_fields(Settings)


def env_name(flat: str) -> str:
    """The environment variable of a flat setting name, e.g. `ASSISTANT_TOP_K` for `top_k`.

    Raises:
        KeyError: `flat` is no setting's flat name.
    """
    section, field = ENV_FIELDS[flat]
    return section_model(Settings, section).env_name(field)
