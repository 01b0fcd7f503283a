"""The retriever: one ACL-filtered hybrid query (dense + sparse fused by RRF), then optional reranking."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from assistant.core import sparse
from assistant.core.embedder import Embedder
from assistant.core.principals import Principal
from assistant.core.vectorstore import SearchMode, VectorStore

if TYPE_CHECKING:
    from assistant.retrieval.reranker import Reranker


@dataclass
class RetrievedChunk:
    """A chunk the reader may open, with its scores.

    Attributes:
        score: rank score (RRF in hybrid mode, reranker score when reranked).
        relevance: cosine similarity between question and chunk embeddings, in [-1, 1]; used to
            decide whether the documents answer the question at all.
    """

    chunk_id: str
    doc_id: str
    chunk_index: int
    text: str
    source: str
    uri: str
    title: str
    heading: str
    page: int | None
    lang: str
    score: float
    relevance: float

    def to_dict(self) -> dict:
        return asdict(self)


class Retriever:
    """Finds the chunks that answer a question among those the principal may read.

    Args:
        store: the vector store.
        embedder: the embedding model (same one that embedded the chunks).
        reranker: optional cross-encoder stage.
        prefetch_k: candidates per prefetch (dense and sparse) before fusion.
        mode: `hybrid` (default), `dense` or `sparse`.
    """

    def __init__(
        self,
        *,
        store: VectorStore,
        embedder: Embedder,
        reranker: "Reranker | None" = None,
        prefetch_k: int = 40,
        mode: SearchMode = "hybrid",
    ):
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.prefetch_k = prefetch_k
        self.mode = mode

    def retrieve(self, query: str, *, principal: Principal, top_k: int = 5) -> list[RetrievedChunk]:
        """Best `top_k` chunks for `query` among those `principal` may read, best first.

        The ACL filter is part of the vector query itself (both prefetches), never applied after.
        """
        dense = self.embedder.embed_query(query)
        limit = max(top_k, self.prefetch_k // 2) if self.reranker else top_k
        hits = self.store.query(
            dense=dense.tolist(),
            sparse=sparse.encode_query(query),
            acl_any=principal.acl_tokens,
            limit=limit,
            prefetch_limit=self.prefetch_k,
            mode=self.mode,
            with_dense=True,
        )
        chunks = []
        for hit in hits:
            p = hit.payload
            relevance = float(np.dot(dense, np.asarray(hit.dense, dtype=np.float32))) if hit.dense else 0.0
            chunks.append(
                RetrievedChunk(
                    chunk_id=hit.id,
                    doc_id=str(p.get("doc_id", "")),
                    chunk_index=int(p.get("chunk_index", 0)),
                    text=str(p.get("text", "")),
                    source=str(p.get("source", "")),
                    uri=str(p.get("uri", "")),
                    title=str(p.get("title", "")),
                    heading=str(p.get("heading", "")),
                    page=p.get("page"),
                    lang=str(p.get("lang", "")),
                    score=hit.score,
                    relevance=relevance,
                )
            )
        if self.reranker and chunks:
            chunks = self.reranker.rerank(query, chunks)
        return chunks[:top_k]
