"""The Qdrant access layer: one small interface, two implementations (embedded Edge, Qdrant server)."""

from assistant.core.vectorstore.base import (  # noqa: F401
    ChunkPoint,
    FusionMethod,
    RRF_WEIGHTS,
    ScoredChunk,
    SearchMode,
    SparseEmbedding,
    VectorStore,
)
from assistant.core.vectorstore.catalog import CollectionCatalog, EmbeddingRecord  # noqa: F401
from assistant.core.vectorstore.factory import open_catalog, open_vector_store  # noqa: F401
