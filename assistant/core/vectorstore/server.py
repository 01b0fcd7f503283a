"""Production vector store: a Qdrant server through `qdrant-client` (or its local mode in tests)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Sequence

from qdrant_client import QdrantClient
from qdrant_client import models as qm

from assistant.core.vectorstore.base import (
    DENSE,
    INDEXED_KEYWORDS,
    RRF_K,
    SPARSE,
    ChunkPoint,
    ScoredChunk,
    SearchMode,
    SparseEmbedding,
    VectorStore,
)


class QdrantServerStore(VectorStore):
    """A Qdrant collection reached with qdrant-client.

    Args:
        collection: collection name (may be an alias on the server).
        url: server URL, e.g. `http://qdrant:6333`; or
        path: a folder for qdrant-client's local mode (brute force, same API; for tests).
        api_key: server API key, if any.
        timeout_s: request timeout in seconds.
    """

    def __init__(
        self,
        collection: str,
        *,
        url: str | None = None,
        path: Path | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
    ):
        self.collection = collection
        if url:
            self.client = QdrantClient(url=url, api_key=api_key, timeout=int(timeout_s))
        else:
            self.client = QdrantClient(path=str(path))
        self._exists: bool | None = None

    def _collection_exists(self) -> bool:
        if not self._exists:
            self._exists = self.client.collection_exists(self.collection)
        return bool(self._exists)

    def ensure_collection(self, dim: int) -> None:
        if self._collection_exists():
            info = self.client.get_collection(self.collection)
            vectors = info.config.params.vectors
            existing = vectors[DENSE].size if isinstance(vectors, dict) else vectors.size
            self._check_dim(self.collection, int(existing), dim)
            return
        self.client.create_collection(
            self.collection,
            vectors_config={DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE)},
            sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # local mode warns that payload indexes are no-ops there
            for name in INDEXED_KEYWORDS:
                self.client.create_payload_index(self.collection, name, qm.PayloadSchemaType.KEYWORD)
        self._exists = True

    def upsert(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        self.client.upsert(
            self.collection,
            points=[
                qm.PointStruct(
                    id=p.id,
                    vector={
                        DENSE: [float(x) for x in p.dense],
                        SPARSE: qm.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                    },
                    payload=p.payload,
                )
                for p in points
            ],
            wait=True,
        )

    def delete(self, ids: Sequence[str]) -> None:
        if ids and self._collection_exists():
            self.client.delete(self.collection, points_selector=qm.PointIdsList(points=list(ids)), wait=True)

    @staticmethod
    def _doc_filter(doc_id: str) -> qm.Filter:
        return qm.Filter(must=[qm.FieldCondition(key="doc_id", match=qm.MatchValue(value=doc_id))])

    def scroll_ids(self, *, doc_id: str) -> set[str]:
        if not self._collection_exists():
            return set()
        ids: set[str] = set()
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.collection, scroll_filter=self._doc_filter(doc_id), limit=1024, offset=offset,
                with_payload=False, with_vectors=False,
            )
            ids.update(str(r.id) for r in records)
            if offset is None:
                return ids

    def set_payload(self, *, doc_id: str, payload: dict[str, Any]) -> None:
        if self._collection_exists():
            self.client.set_payload(self.collection, payload=payload, points=self._doc_filter(doc_id), wait=True)

    def count(self, *, doc_id: str | None = None) -> int:
        if not self._collection_exists():
            return 0
        flt = self._doc_filter(doc_id) if doc_id else None
        return int(self.client.count(self.collection, count_filter=flt, exact=True).count)

    def _query(
        self,
        *,
        dense: Sequence[float] | None,
        sparse: SparseEmbedding | None,
        acl_any: list[str],
        limit: int,
        prefetch_limit: int,
        mode: SearchMode,
        doc_ids: list[str] | None,
        with_dense: bool,
        rrf_weights: tuple[float, float],
    ) -> list[ScoredChunk]:
        if not self._collection_exists():
            return []
        must: list[Any] = [qm.FieldCondition(key="acl", match=qm.MatchAny(any=acl_any))]
        if doc_ids:
            must.append(qm.FieldCondition(key="doc_id", match=qm.MatchAny(any=doc_ids)))
        flt = qm.Filter(must=must)
        dense_q = [float(x) for x in dense] if dense is not None else None
        sparse_q = qm.SparseVector(indices=sparse.indices, values=sparse.values) if sparse is not None else None
        with_vectors: Any = [DENSE] if with_dense else False
        if mode == "hybrid":
            response = self.client.query_points(
                self.collection,
                prefetch=[
                    qm.Prefetch(query=dense_q, using=DENSE, filter=flt, limit=prefetch_limit),
                    qm.Prefetch(query=sparse_q, using=SPARSE, filter=flt, limit=prefetch_limit),
                ],
                query=qm.RrfQuery(rrf=qm.Rrf(k=RRF_K, weights=list(rrf_weights))),
                query_filter=flt,
                limit=limit,
                with_payload=True,
                with_vectors=with_vectors,
            )
        else:
            response = self.client.query_points(
                self.collection,
                query=dense_q if mode == "dense" else sparse_q,
                using=DENSE if mode == "dense" else SPARSE,
                query_filter=flt,
                limit=limit,
                with_payload=True,
                with_vectors=with_vectors,
            )
        return [
            ScoredChunk(
                id=str(h.id),
                score=float(h.score),
                payload=dict(h.payload or {}),
                dense=list(h.vector[DENSE]) if with_dense and isinstance(h.vector, dict) else None,
            )
            for h in response.points
        ]

    def close(self) -> None:
        self.client.close()
