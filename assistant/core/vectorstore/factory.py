"""Builds the configured vector store implementation."""

from __future__ import annotations

from assistant.core.settings import Settings
from assistant.core.vectorstore.base import VectorStore
from assistant.core.vectorstore.catalog import CollectionCatalog


def open_catalog(settings: Settings) -> CollectionCatalog:
    """The collections and aliases of the configured engine (close it with `close()`)."""
    if settings.vector_store == "edge":
        from assistant.core.vectorstore.edge import EdgeCatalog

        return EdgeCatalog(settings.edge_path)
    from assistant.core.vectorstore.server import ServerCatalog, connect

    return ServerCatalog(
        connect(
            url=settings.qdrant_url,
            path=settings.qdrant_path,
            api_key=settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None,
            timeout_s=settings.request_timeout_s,
        )
    )


def open_vector_store(settings: Settings) -> VectorStore:
    """Open the collection the alias `settings.collection` names now, in the configured engine.

    The store keeps that physical collection for its whole life, so a re-index that switches the
    alias meanwhile does not change what this process reads (see `catalog`).

    Raises:
        ConfigError: the embedded folder is held by another process, or the live collection was
            built with another embedding model than `settings.embedding_model`.
    """
    catalog = open_catalog(settings)
    try:
        return catalog.open_live(settings.collection, model=settings.embedding_model)
    except BaseException:
        catalog.close()
        raise
