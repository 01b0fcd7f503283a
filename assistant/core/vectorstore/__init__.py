"""The Qdrant access layer: one small interface, two implementations (embedded Edge, Qdrant server)."""

from assistant.core.vectorstore.base import (
    RRF_WEIGHTS,
    ChunkPoint,
    FusionMethod,
    ScoredChunk,
    SearchMode,
    SparseEmbedding,
    VectorStore,
)
from assistant.core.vectorstore.catalog import CollectionCatalog, EmbeddingRecord
from assistant.core.vectorstore.factory import open_catalog, open_vector_store

__all__ = [
    "ChunkPoint", "FusionMethod", "RRF_WEIGHTS", "ScoredChunk", "SearchMode", "SparseEmbedding", "VectorStore",
    "CollectionCatalog", "EmbeddingRecord", "open_catalog", "open_vector_store",
]
