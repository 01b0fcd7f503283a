"""Builds the configured vector store implementation."""

from __future__ import annotations

from assistant.core.settings import Settings
from assistant.core.vectorstore.base import VectorStore


def open_vector_store(settings: Settings) -> VectorStore:
    """Open the collection `settings.collection` in the configured engine.

    Raises:
        ConfigError: the embedded folder is held by another process.
    """
    if settings.vector_store == "edge":
        from assistant.core.vectorstore.edge import EdgeVectorStore

        return EdgeVectorStore(settings.edge_path, settings.collection)
    from assistant.core.vectorstore.server import QdrantServerStore

    return QdrantServerStore(
        settings.collection,
        url=settings.qdrant_url,
        path=settings.qdrant_path,
        api_key=settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None,
        timeout_s=settings.request_timeout_s,
    )
