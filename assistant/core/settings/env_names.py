"""The one table from a flat setting name to its place in the nested settings.

Every setting keeps the flat environment name it always had: `ASSISTANT_` and the flat name in
capitals (`top_k` is `ASSISTANT_TOP_K`, `finetune_lora_rank` is `ASSISTANT_FINETUNE_LORA_RANK`),
while the value lives in a section (`settings.retrieval.top_k`, `settings.finetune.lora_rank`).
The same flat names are accepted as keyword arguments of `Settings(...)` and keys of
`Settings.model_copy(update=...)`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

ENV_PREFIX = "ASSISTANT_"

# flat name -> (section, field); `ASSISTANT_<FLAT NAME>` is the environment variable.
ENV_FIELDS: dict[str, tuple[str, str]] = {
    # storage
    "data_dir": ("storage", "data_dir"),
    "database_url": ("storage", "database_url"),
    "vector_store": ("storage", "vector_store"),
    "qdrant_url": ("storage", "qdrant_url"),
    "qdrant_path": ("storage", "qdrant_path"),
    "qdrant_api_key": ("storage", "qdrant_api_key"),
    "collection": ("storage", "collection"),
    "qdrant_shard_number": ("storage", "qdrant_shard_number"),
    "qdrant_replication_factor": ("storage", "qdrant_replication_factor"),
    # embedding
    "embedding_model": ("embedding", "model"),
    "embedding_batch_size": ("embedding", "batch_size"),
    "embedding_threads": ("embedding", "threads"),
    "query_runtime": ("embedding", "query_runtime"),
    "model_cache_dir": ("embedding", "model_cache_dir"),
    # ingest
    "chunk_size_tokens": ("ingest", "chunk_size_tokens"),
    "chunk_overlap_tokens": ("ingest", "chunk_overlap_tokens"),
    "max_file_size_bytes": ("ingest", "max_file_size_bytes"),
    "max_pages": ("ingest", "max_pages"),
    "max_decompressed_bytes": ("ingest", "max_decompressed_bytes"),
    "max_sheet_cells": ("ingest", "max_sheet_cells"),
    "max_sheet_rows": ("ingest", "max_sheet_rows"),
    "parse_timeout_s": ("ingest", "parse_timeout_s"),
    "parse_memory_limit_bytes": ("ingest", "parse_memory_limit_bytes"),
    "parse_part_chunks": ("ingest", "parse_part_chunks"),
    "embedding_batch_chunks": ("ingest", "embedding_batch_chunks"),
    "optimize_min_points": ("ingest", "optimize_min_points"),
    "embedding_cache_max_vectors": ("ingest", "embedding_cache_max_vectors"),
    "ingest_via_server": ("ingest", "via_server"),
    "source_roots": ("ingest", "source_roots"),
    # ocr
    "ocr_engine": ("ocr", "engine"),
    "ocr_languages": ("ocr", "languages"),
    "ocr_page_timeout_s": ("ocr", "page_timeout_s"),
    "ocr_threads": ("ocr", "threads"),
    # retrieval
    "top_k": ("retrieval", "top_k"),
    "chunks_per_document": ("retrieval", "chunks_per_document"),
    "prefetch_k": ("retrieval", "prefetch_k"),
    "fusion": ("retrieval", "fusion"),
    "interleave_depth": ("retrieval", "interleave_depth"),
    "query_translation": ("retrieval", "query_translation"),
    "min_relevance": ("retrieval", "min_relevance"),
    "question_translation": ("retrieval", "question_translation"),
    "question_translation_timeout_s": ("retrieval", "question_translation_timeout_s"),
    "query_rewrite": ("retrieval", "query_rewrite"),
    # reranking
    "reranker": ("reranking", "mode"),
    "reranker_model": ("reranking", "model"),
    "reranker_url": ("reranking", "url"),
    "reranker_url_model": ("reranking", "url_model"),
    "reranker_url_api_key": ("reranking", "url_api_key"),
    "reranker_timeout_s": ("reranking", "timeout_s"),
    # llm
    "llm_backend": ("llm", "backend"),
    "llm_model": ("llm", "model"),
    "llm_model_path": ("llm", "model_path"),
    "llm_context_tokens": ("llm", "context_tokens"),
    "llm_cpu_window_tokens": ("llm", "cpu_window_tokens"),
    "llm_cpu_source_tokens": ("llm", "cpu_source_tokens"),
    "llm_threads": ("llm", "threads"),
    "llm_max_tokens": ("llm", "max_tokens"),
    "llm_temperature": ("llm", "temperature"),
    "openai_base_url": ("llm", "openai_base_url"),
    "openai_api_key": ("llm", "openai_api_key"),
    "openai_model": ("llm", "openai_model"),
    "request_timeout_s": ("llm", "request_timeout_s"),
    "connect_timeout_s": ("llm", "connect_timeout_s"),
    "llm_connect_retries": ("llm", "connect_retries"),
    "llm_retry_backoff_s": ("llm", "retry_backoff_s"),
    "llm_retry_backoff_max_s": ("llm", "retry_backoff_max_s"),
    "llm_breaker_failure_threshold": ("llm", "breaker_failure_threshold"),
    "llm_breaker_cooldown_s": ("llm", "breaker_cooldown_s"),
    "llm_max_concurrency": ("llm", "max_concurrency"),
    "llm_queue_max": ("llm", "queue_max"),
    "llm_queue_max_per_principal": ("llm", "queue_max_per_principal"),
    "llm_queue_timeout_s": ("llm", "queue_timeout_s"),
    # answer_cache
    "answer_cache_entries": ("answer_cache", "entries"),
    "answer_cache_ttl_s": ("answer_cache", "ttl_s"),
    "answer_cache_redis_url": ("answer_cache", "redis_url"),
    # server
    "host": ("server", "host"),
    "port": ("server", "port"),
    "environment": ("server", "environment"),
    "max_request_bytes": ("server", "max_request_bytes"),
    "forwarded_allow_ips": ("server", "forwarded_allow_ips"),
    "sse_heartbeat_s": ("server", "sse_heartbeat_s"),
    "sse_coalesce_ms": ("server", "sse_coalesce_ms"),
    # auth
    "secret_key": ("auth", "secret_key"),
    "session_cookie_name": ("auth", "session_cookie_name"),
    "session_cookie_secure": ("auth", "session_cookie_secure"),
    "session_max_age_s": ("auth", "session_max_age_s"),
    "login_max_failures": ("auth", "login_max_failures"),
    "login_failure_window_s": ("auth", "login_failure_window_s"),
    "login_backoff_base_s": ("auth", "login_backoff_base_s"),
    "bootstrap_admin_name": ("auth", "bootstrap_admin_name"),
    "bootstrap_admin_password": ("auth", "bootstrap_admin_password"),
    # oidc
    "oidc_issuer_url": ("oidc", "issuer_url"),
    "oidc_client_id": ("oidc", "client_id"),
    "oidc_client_secret": ("oidc", "client_secret"),
    "oidc_scopes": ("oidc", "scopes"),
    "oidc_redirect_url": ("oidc", "redirect_url"),
    "oidc_username_claim": ("oidc", "username_claim"),
    "oidc_groups_claim": ("oidc", "groups_claim"),
    "oidc_group_map": ("oidc", "group_map"),
    # helpdesk
    "helpdesk_auto_reply_threshold": ("helpdesk", "auto_reply_threshold"),
    "helpdesk_resolutions_dir": ("helpdesk", "resolutions_dir"),
    "helpdesk_handoff": ("helpdesk", "handoff"),
    # rate_limits
    "rate_limit_requests_per_minute": ("rate_limits", "requests_per_minute"),
    "rate_limit_tokens_per_minute": ("rate_limits", "tokens_per_minute"),
    "rate_limit_redis_url": ("rate_limits", "redis_url"),
    # webhooks
    "webhook_allowed_hosts": ("webhooks", "allowed_hosts"),
    "webhook_max_attempts": ("webhooks", "max_attempts"),
    "webhook_backoff_s": ("webhooks", "backoff_s"),
    "webhook_backoff_max_s": ("webhooks", "backoff_max_s"),
    "webhook_timeout_s": ("webhooks", "timeout_s"),
    # jobs
    "jobs_backend": ("jobs", "backend"),
    "broker_url": ("jobs", "broker_url"),
    "result_backend": ("jobs", "result_backend"),
    "celery_queue": ("jobs", "celery_queue"),
    "task_soft_time_limit_s": ("jobs", "task_soft_time_limit_s"),
    "task_time_limit_s": ("jobs", "task_time_limit_s"),
    "task_max_retries": ("jobs", "task_max_retries"),
    "job_max_attempts": ("jobs", "max_attempts"),
    "sync_interval_s": ("jobs", "sync_interval_s"),
    # retention
    "retention_audit_days": ("retention", "audit_days"),
    "retention_conversations_days": ("retention", "conversations_days"),
    "retention_feedback_days": ("retention", "feedback_days"),
    "retention_uploads_days": ("retention", "uploads_days"),
    "retention_job_items_days": ("retention", "job_items_days"),
    "retention_interval_s": ("retention", "interval_s"),
    "erasure_audit_content": ("retention", "erasure_audit_content"),
    # observability
    "metrics_token": ("observability", "metrics_token"),
    "log_format": ("observability", "log_format"),
    "log_level": ("observability", "log_level"),
    "prometheus_multiproc_dir": ("observability", "prometheus_multiproc_dir"),
    "doctor_min_free_bytes": ("observability", "doctor_min_free_bytes"),
    # uploads
    "uploads_dir": ("uploads", "dir"),
    "upload_max_files": ("uploads", "max_files"),
    "upload_max_request_bytes": ("uploads", "max_request_bytes"),
    # finetune
    "finetune_dir": ("finetune", "dir"),
    "finetune_base_model": ("finetune", "base_model"),
    "finetune_lora_rank": ("finetune", "lora_rank"),
    "finetune_lora_alpha": ("finetune", "lora_alpha"),
    "finetune_target_modules": ("finetune", "target_modules"),
    "finetune_learning_rate": ("finetune", "learning_rate"),
    "finetune_epochs": ("finetune", "epochs"),
    "finetune_batch_size": ("finetune", "batch_size"),
    "finetune_max_length_tokens": ("finetune", "max_length_tokens"),
    "finetune_heldout_share": ("finetune", "heldout_share"),
    "finetune_qa_per_chunk": ("finetune", "qa_per_chunk"),
    "finetune_max_new_chunks": ("finetune", "max_new_chunks"),
    "finetune_gate_tolerance": ("finetune", "gate_tolerance"),
    "finetune_eval_questions": ("finetune", "eval_questions"),
    "finetune_gate_answer_questions": ("finetune", "gate_answer_questions"),
    "finetune_gate_answer_max_tokens": ("finetune", "gate_answer_max_tokens"),
    "finetune_gate_answer_tolerance": ("finetune", "gate_answer_tolerance"),
    "finetune_canary_share": ("finetune", "canary_share"),
    "finetune_schedule_cron": ("finetune", "schedule_cron"),
    "finetune_celery_queue": ("finetune", "celery_queue"),
    "finetune_schedule_enabled": ("finetune", "schedule_enabled"),}

# Flat names read from a variable of another name (prometheus-client's own, unprefixed).
UNPREFIXED_ENV_NAMES: dict[str, str] = {"prometheus_multiproc_dir": "PROMETHEUS_MULTIPROC_DIR"}

FLAT_NAMES: dict[tuple[str, str], str] = {place: flat for flat, place in ENV_FIELDS.items()}
_ALIASES: dict[str, str] = {env: flat for flat, env in UNPREFIXED_ENV_NAMES.items()}


def env_name(flat: str) -> str:
    """The environment variable of a flat setting name, e.g. `ASSISTANT_TOP_K` for `top_k`."""
    return UNPREFIXED_ENV_NAMES.get(flat) or f"{ENV_PREFIX}{flat.upper()}"


def env_name_at(loc: tuple[Any, ...]) -> str:
    """The environment variable of a validation error's location, e.g. ("retrieval", "top_k")
    -> `ASSISTANT_TOP_K`; a location outside the sections names `ASSISTANT_<FIRST PART>`, and an
    empty one names nothing ("")."""
    if not loc:
        return ""
    flat = FLAT_NAMES.get((str(loc[0]), str(loc[1]))) if len(loc) > 1 else None
    return env_name(flat or _ALIASES.get(str(loc[0]), str(loc[0])))


def env_name_of_field(model_name: str | None, field: str) -> str:
    """The environment variable of `field` in the section model named `model_name` (a validator's
    `info.config["title"]`, e.g. "OidcSettings", "issuer_url" -> `ASSISTANT_OIDC_ISSUER_URL`);
    `ASSISTANT_<FIELD>` when the model is no section."""
    from assistant.core.settings import Settings  # the sections are its fields; imported late (it imports this)

    sections = {info.annotation.__name__: section for section, info in Settings.model_fields.items()}
    flat = FLAT_NAMES.get((sections.get(model_name or ""), field))
    return env_name(flat or field)


def nest_flat_names(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with every flat name (`top_k`, `PROMETHEUS_MULTIPROC_DIR`) moved into its section
    (`{"retrieval": {"top_k": ...}}`); other keys are kept as they are. A section given whole (a
    mapping or a section model) takes the flat values on top of its own."""
    nested = {key: value for key, value in values.items() if _ALIASES.get(key, key) not in ENV_FIELDS}
    for key, value in values.items():
        flat = _ALIASES.get(key, key)
        if flat not in ENV_FIELDS:
            continue
        section, field = ENV_FIELDS[flat]
        given = nested.get(section) or {}
        if isinstance(given, BaseModel):
            given = {name: getattr(given, name) for name in given.model_fields_set}
        nested[section] = {**given, field: value}
    return nested
