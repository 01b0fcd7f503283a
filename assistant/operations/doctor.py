"""`assistant doctor`: is this deployment able to serve? One check per part, each with what to fix.

Every check runs whatever the others found (a dead database does not hide a missing model file) and
none changes anything: no migration, no model conversion, no collection created.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import redis

from assistant.core.db.schema import database_revisions, ping, script_heads
from assistant.core.db.session import Database
from assistant.core.embedding import e5_onnx
from assistant.core.embedding.embedder import BUILTIN_E5, resolve_model_path
from assistant.core.errors import AssistantError
from assistant.core.llm.model_files import builtin_model, gguf_dir, package_dir
from assistant.core.settings import Settings

GIB = 1024**3


@dataclass(frozen=True)
class Check:
    """The outcome of one check: `ok`, what was found (`detail`) and, when not ok, what to do (`fix`)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return asdict(self)


def _run(name: str, probe: Callable[[], Check | None], fix: str) -> Check:
    """Run one probe; an exception becomes a failed check naming its type and message."""
    try:
        return probe() or Check(name, True, "ok")
    except AssistantError as exc:
        return Check(name, False, exc.message, fix)
    except Exception as exc:  # unreachable services raise whatever their driver raises
        return Check(name, False, f"{type(exc).__name__}: {exc}"[:500], fix)


def check_database(settings: Settings) -> list[Check]:
    """The SQL database answers, and its schema is at this release's migration head."""

    url = settings.resolved_database_url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        # Connecting would create an empty file: report the missing database instead.
        return [Check("database", False, f"no database at {url.removeprefix('sqlite:///')}",
                      "`assistant migrate` creates it (so does `assistant serve` when it starts); or correct ASSISTANT_DATA_DIR")]
    db = Database(url)
    where = db.engine.url.render_as_string(hide_password=True)
    try:
        def connect() -> Check:
            ping(db)
            return Check("database", True, f"{where} answers")

        found = _run("database", connect, f"start the database or correct ASSISTANT_DATABASE_URL ({where})")
        if not found.ok:
            return [found]

        def migrations() -> Check:
            current, heads = database_revisions(db), script_heads()
            if current == heads:
                return Check("migrations", True, f"at head {', '.join(sorted(heads))}")
            return Check(
                "migrations", False, f"database at {', '.join(sorted(current)) or 'no revision'}, code at "
                f"{', '.join(sorted(heads))}",
                "back up (`assistant backup PATH`), then `assistant migrate` (the server also migrates when it starts)",
            )

        return [found, _run("migrations", migrations, "`assistant migrate`")]
    finally:
        db.dispose()


def check_vector_store(settings: Settings) -> Check:
    """Qdrant answers (server) or the Edge folder is present and writable (embedded)."""
    if settings.storage.vector_store == "edge":
        def edge() -> Check:
            path = settings.edge_path
            if not path.exists():
                return Check("vector store", True, f"Qdrant Edge folder {path} not created yet (first ingestion does)")
            if not _writable(path):
                return Check("vector store", False, f"Qdrant Edge folder {path} is not writable",
                             f"give the service's user write access to {path}")
            return Check("vector store", True, f"Qdrant Edge folder {path}")

        return _run("vector store", edge, "check ASSISTANT_DATA_DIR")

    def server() -> Check:
        from assistant.core.vectorstore.server import connect  # noqa: PLC0415 - qdrant-client: ~1 s, only with a Qdrant server

        key = settings.storage.qdrant_api_key.get_secret_value() if settings.storage.qdrant_api_key else None
        client = connect(url=settings.storage.qdrant_url, path=settings.storage.qdrant_path, api_key=key, timeout_s=settings.llm.connect_timeout_s)
        try:
            names = [c.name for c in client.get_collections().collections]
            aliases = [a.alias_name for a in client.get_aliases().aliases]
        finally:
            client.close()
        where = settings.storage.qdrant_url or settings.storage.qdrant_path
        if settings.storage.collection not in names + aliases:
            return Check("vector store", True, f"Qdrant at {where} answers; collection '{settings.storage.collection}' "
                         "not created yet (first ingestion does)")
        return Check("vector store", True, f"Qdrant at {where} answers; collection '{settings.storage.collection}' present")

    return _run("vector store", server, f"start Qdrant or correct ASSISTANT_QDRANT_URL ({settings.storage.qdrant_url})")


def redis_urls(settings: Settings) -> dict[str, str]:
    """The Redis servers this configuration uses, by purpose."""
    urls = {}
    if settings.jobs.backend == "celery" and settings.jobs.broker_url.startswith(("redis://", "rediss://")):
        urls["job broker (ASSISTANT_BROKER_URL)"] = settings.jobs.broker_url
    for purpose, url in (("answer cache (ASSISTANT_ANSWER_CACHE_REDIS_URL)", settings.answer_cache.redis_url),
                         ("rate limits (ASSISTANT_RATE_LIMIT_REDIS_URL)", getattr(settings.rate_limits, "redis_url", None))):
        if url:
            urls[purpose] = url
    return urls


def check_redis(settings: Settings) -> list[Check]:
    """Each configured Redis answers PING."""
    checks = []
    for purpose, url in redis_urls(settings).items():
        def ping(url: str = url, purpose: str = purpose) -> Check:
            client = redis.Redis.from_url(url, socket_timeout=settings.llm.connect_timeout_s,
                                          socket_connect_timeout=settings.llm.connect_timeout_s)
            try:
                client.ping()
            finally:
                client.close()
            return Check(f"redis: {purpose}", True, "answers PING")

        checks.append(_run(f"redis: {purpose}", ping, f"start Redis or correct the URL of the {purpose}"))
    return checks


def check_llm(settings: Settings) -> Check:
    """The OpenAI-compatible server lists the configured model, or the in-process GGUF file exists."""
    if settings.llm.backend == "openai":
        def endpoint() -> Check:
            key = settings.llm.openai_api_key.get_secret_value()
            response = httpx.get(
                settings.llm.openai_base_url.rstrip("/") + "/models", headers={"Authorization": f"Bearer {key}"},
                timeout=settings.llm.connect_timeout_s,
            )
            if response.status_code in (401, 403):
                return Check("LLM server", False, f"{settings.llm.openai_base_url} refused the key (HTTP {response.status_code})",
                             "set ASSISTANT_OPENAI_API_KEY to the key the server was started with (vLLM --api-key)")
            response.raise_for_status()
            served = [m.get("id") for m in response.json().get("data", [])]
            if settings.llm.openai_model not in served:
                return Check("LLM server", False, f"{settings.llm.openai_base_url} serves {served}, not '{settings.llm.openai_model}'",
                             "set ASSISTANT_OPENAI_MODEL to a served model (vLLM --served-model-name) or load the adapter")
            return Check("LLM server", True, f"{settings.llm.openai_base_url} serves '{settings.llm.openai_model}'")

        return _run("LLM server", endpoint, f"start the LLM server or correct ASSISTANT_OPENAI_BASE_URL ({settings.llm.openai_base_url})")

    def gguf() -> Check:
        if settings.llm.model_path:
            path = Path(settings.llm.model_path)
        else:
            model = builtin_model(settings.llm.model)
            folder = gguf_dir(settings.model_cache_path) if model.parts else package_dir(model.packages[0])
            path = folder / model.file_name
        if not path.is_file():
            return Check("chat model", False, f"{path} is missing",
                         "`python -m assistant.core.llm.model_files` assembles the built-in model (make install runs it)")
        return Check("chat model", True, f"{path} ({path.stat().st_size / GIB:.2f} GiB)")

    return _run("chat model", gguf, "install the chat model (make install) or set ASSISTANT_LLM_MODEL_PATH")


def check_embedding_model(settings: Settings) -> Check:
    """The embedding model's files are on disk (nothing is downloaded or converted here)."""
    def files() -> Check:
        if settings.embedding.model == BUILTIN_E5:
            folder = e5_onnx.cache_folder(settings.model_cache_path)
            if not (folder / e5_onnx.MODEL_FILE).is_file():
                return Check("embedding model", False, f"the converted multilingual-e5-small is not in {folder}",
                             "`python -m assistant.core.embedding.e5` converts it (make install runs it), or set "
                             "ASSISTANT_MODEL_CACHE_DIR to where it was converted")
            return Check("embedding model", True, str(folder))
        return Check("embedding model", True, str(resolve_model_path(settings.embedding.model)))

    return _run("embedding model", files, "set ASSISTANT_EMBEDDING_MODEL to an installed model")


def check_disk(settings: Settings) -> Check:
    """Free space on the file system of the data folder is at least `doctor_min_free_bytes`."""
    def space() -> Check:
        folder = settings.storage.data_dir if settings.storage.data_dir.exists() else settings.storage.data_dir.resolve().parent
        usage = shutil.disk_usage(folder)
        detail = f"{usage.free / GIB:.1f} GiB free of {usage.total / GIB:.1f} GiB under {folder}"
        if usage.free < settings.observability.doctor_min_free_bytes:
            return Check("disk space", False, detail + f" (below {settings.observability.doctor_min_free_bytes / GIB:.1f} GiB)",
                         "free space or grow the volume (ingestion, backups and the vector store need room)")
        return Check("disk space", True, detail)

    return _run("disk space", space, "check ASSISTANT_DATA_DIR")


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def run_checks(settings: Settings) -> list[Check]:
    """Every check for `settings`, in the order an operator would fix them.

    Returns:
        The checks; the deployment is healthy when all are `ok`.
    """
    return [
        *check_database(settings), check_vector_store(settings), *check_redis(settings), check_llm(settings),
        check_embedding_model(settings), check_disk(settings),
    ]
