"""Builds the configured vector store implementation."""

from __future__ import annotations

import logging

from assistant.core.settings import Settings
from assistant.core.vectorstore.base import VectorStore
from assistant.core.vectorstore.catalog import CollectionCatalog
from assistant.core.vectorstore.edge import EdgeCatalog


def open_catalog(settings: Settings) -> CollectionCatalog:
    """The collections and aliases of the configured engine (close it with `close()`)."""
    if settings.storage.vector_store == "edge":
        return EdgeCatalog(settings.edge_path)
    from assistant.core.vectorstore.server import ServerCatalog, connect  # noqa: PLC0415 - qdrant-client: ~1 s, only with a Qdrant server

    return ServerCatalog(
        connect(
            url=settings.storage.qdrant_url,
            path=settings.storage.qdrant_path,
            api_key=settings.storage.qdrant_api_key.get_secret_value() if settings.storage.qdrant_api_key else None,
            timeout_s=settings.llm.request_timeout_s,
        ),
        layout={k: v for k, v in (("shard_number", settings.storage.qdrant_shard_number),
                                  ("replication_factor", settings.storage.qdrant_replication_factor)) if v},
    )


def open_vector_store(settings: Settings) -> VectorStore:
    """Open the collection the alias `settings.collection` names now, in the configured engine.

    The store keeps that physical collection for its whole life, so a re-index that switches the
    alias meanwhile does not change what this process reads (see `catalog`).

    Raises:
        ConfigError: the embedded folder is held by another process, or the live collection was
            built with another embedding model than an explicitly set `settings.embedding_model`.
    """
    catalog = open_catalog(settings)
    try:
        follow_live_model(settings, catalog)
        return catalog.open_live(settings.storage.collection, model=settings.embedding.model)
    except BaseException:
        catalog.close()
        raise


def follow_live_model(settings: Settings, catalog: CollectionCatalog) -> None:
    """Serve an index with the model that built it when `ASSISTANT_EMBEDDING_MODEL` is not set.

    When the default embedding model changes (all-MiniLM-L6-v2 to multilingual-e5-small), an
    existing index keeps working with its own model, with a warning, until `assistant reindex`
    (which builds with `settings.embedding_model` and never opens the live collection) moves it.
    An explicitly set model that differs from the index's is still an error (`open_live`).
    """
    if "model" in settings.embedding.model_fields_set:
        return
    name = catalog.resolve(settings.storage.collection)
    record = catalog.record(name) if name else None
    if record is None or not record.model or record.model == settings.embedding.model:
        return
    logging.getLogger(__name__).warning(
        "collection %r was built with %s; serving it with that model (the default is now %s): run "
        "`assistant reindex` to move it, or set ASSISTANT_EMBEDDING_MODEL to keep it",
        settings.storage.collection, record.model, settings.embedding.model,
    )
    settings.embedding.model = record.model
