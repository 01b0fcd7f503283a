"""The FastAPI app factory: builds long-lived clients in the lifespan and mounts routers and the UI."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.sessions import SessionMiddleware

from assistant import __version__
from assistant.api.body_limit import BodyLimitMiddleware
from assistant.api.deps import PrincipalDep, get_principal
from assistant.api.errors import install_error_handlers
from assistant.api.observability import RequestObservabilityMiddleware, install_request_ids
from assistant.api.rate_limit import RateLimitMiddleware, enforce_rate_limit
from assistant.api.rate_limit_store import RateLimiter
from assistant.api.routes import (
    admin,
    api_docs,
    auth,
    chat,
    compliance,
    conversations,
    documents,
    feedback,
    finetune,
    handoff,
    health,
    helpdesk,
    jobs,
    local_ingest,
    local_queries,
    metrics,
    openai_compat,
    operations,
    search,
    uploads,
    users,
)
from assistant.api.security_headers import SecurityHeadersMiddleware
from assistant.auth.signing import signing_key
from assistant.composition import Assistant
from assistant.core import resources as resources_mod
from assistant.core.errors import ConfigError
from assistant.core.jobs import JobDispatcher
from assistant.core.resources import Resources
from assistant.core.settings import Settings, get_settings

log = logging.getLogger(__name__)
# The browser app as `make install` builds it (web/build.mjs: npm libraries bundled, public/ copied).
WEB_DIR = Path(__file__).resolve().parents[2] / "web" / "dist"


def create_app(settings: Settings | None = None, *, resources: Resources | None = None) -> FastAPI:
    """Build the app. Its settings (`app.state.settings`) are its resources' settings: one object.

    Args:
        settings: configuration (default: the resources', else from the environment).
        resources: already-open resources to use (tests, the CLI's `serve` after ingesting);
            otherwise they are opened from `settings` in the lifespan and closed at shutdown.

    Raises:
        ConfigError: `settings` and `resources.settings` differ (the routes and the clients would
            read different configurations).
    """
    if resources is not None:
        if settings is not None and settings != resources.settings:
            raise ConfigError(
                "create_app got settings that differ from its resources' settings: pass the resources alone "
                "(their settings are the app's)"
            )
        settings = resources.settings
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        own = resources is None
        # Retrieval runs in worker threads (asyncio.to_thread); the default pool of cores + 4 threads
        # would queue concurrent chats before their questions could share an embedding batch.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(64, thread_name_prefix="assistant"))
        res = resources or Resources.open(settings)
        resources_mod.set_current(res)
        app.state.assistant = Assistant.build(res)
        # Questions move to ONNX Runtime once its graph is exported (first start: ~12 s of one core)
        # and checked; until then, and if that fails, PyTorch embeds them.
        threading.Thread(target=res.prepare_query_runtime, name="query-runtime", daemon=True).start()
        app.state.dispatcher = JobDispatcher(settings)
        app.state.dispatcher.resume_unfinished(res.db)
        try:
            yield
        finally:
            if own:
                # A sync running in-process starts no further file, and its files in progress get
                # ASSISTANT_SHUTDOWN_GRACE_S; then its job is `interrupted` (`ingest.tasks.interrupted_when_cut_off`)
                # and resumes at the next start, rather than holding the shutdown until it ends. Other
                # tasks get as long.
                res.stopping.set()
                app.state.dispatcher.stop()
                if app.state.dispatcher.join(timeout_s=settings.jobs.shutdown_grace_s + 2.0):
                    res.close()
                else:  # the task still writes: closing the store under it would fail its job; exiting does not
                    log.warning("shutting down with a background task still running; its job resumes at the next start")
                resources_mod.set_current(None)

    # The schema and its viewer are not public: /api/openapi.json below and /api/docs (api_docs) need a
    # signed-in caller; FastAPI's own /docs, /redoc and /openapi.json are off.
    app = FastAPI(
        title="Private assistant", version=__version__, lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None
    )
    app.state.settings = settings
    app.state.oauth = auth.build_oauth(settings)
    app.add_middleware(
        SessionMiddleware,
        secret_key=signing_key(settings),
        session_cookie=settings.auth.session_cookie_name,
        max_age=settings.auth.session_max_age_s,
        same_site="lax",  # sent on the top-level redirect back from the single sign-on issuer
        https_only=settings.cookie_secure,
    )
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.server.max_request_bytes,
        overrides={"/api/uploads": (settings.uploads.max_request_bytes, "ASSISTANT_UPLOAD_MAX_REQUEST_BYTES")},
    )
    app.state.rate_limiter = RateLimiter(settings.rate_limits.redis_url)
    app.add_middleware(RateLimitMiddleware, limiter=app.state.rate_limiter)
    app.add_middleware(SecurityHeadersMiddleware)  # outermost: refusals get the headers too
    app.add_middleware(RequestObservabilityMiddleware)
    install_request_ids(app)  # around everything: every response has its X-Request-ID
    install_error_handlers(app)
    # Public: liveness and sign-in. Everything else refuses anonymous callers at the router level.
    app.include_router(health.router)
    app.include_router(local_ingest.router)  # its own check: loopback callers with the local token
    app.include_router(local_queries.router)  # the same check: the CLI's search and ask
    app.include_router(auth.public_router)
    app.include_router(metrics.router)  # these two check admins or their tokens in the route
    app.include_router(operations.router)
    signed_in = [Depends(get_principal)]
    for router in (
        auth.router, search.router, chat.router, documents.router, users.router, jobs.router,
        conversations.router, feedback.router, compliance.router, uploads.router, admin.router, handoff.router, finetune.router,
        api_docs.router,
    ):
        app.include_router(router, dependencies=signed_in)
    # The routes that generate for API keys also count against the key's rate limits.
    for router in (helpdesk.router, openai_compat.router):
        app.include_router(router, dependencies=[*signed_in, Depends(enforce_rate_limit)])

    @app.get("/api/openapi.json", include_in_schema=False, dependencies=signed_in)
    def openapi(_principal: PrincipalDep) -> dict:
        """The OpenAPI schema, for signed-in callers."""
        return app.openapi()

    if WEB_DIR.is_dir():
        app.mount("/", StaticFiles(directory=WEB_DIR, html=True), name="web")
    return app
