"""The FastAPI app factory: builds long-lived clients in the lifespan and mounts routers and the UI."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from assistant import __version__
from assistant.api.errors import install_error_handlers
from assistant.api.routes import chat, health, search
from assistant.composition import Assistant
from assistant.core import resources as resources_mod
from assistant.core.jobs import JobDispatcher
from assistant.core.resources import Resources
from assistant.core.settings import Settings, get_settings

WEB_DIR = Path(__file__).resolve().parents[2] / "web"


def create_app(settings: Settings | None = None, *, resources: Resources | None = None) -> FastAPI:
    """Build the app.

    Args:
        settings: configuration (default: from the environment).
        resources: already-open resources to use (tests, the CLI's `serve` after ingesting);
            otherwise they are opened in the lifespan and closed at shutdown.
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        own = resources is None
        res = resources or Resources.open(settings)
        resources_mod.set_current(res)
        app.state.assistant = Assistant.build(res)
        app.state.dispatcher = JobDispatcher(settings)
        app.state.dispatcher.resume_unfinished(res.db)
        try:
            yield
        finally:
            if own:
                res.close()
                resources_mod.set_current(None)

    app = FastAPI(title="Private assistant", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(search.router)
    app.include_router(chat.router)
    if WEB_DIR.is_dir():
        app.mount("/", StaticFiles(directory=WEB_DIR, html=True), name="web")
    return app
