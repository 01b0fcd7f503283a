"""Production vector store: a Qdrant server through `qdrant-client` (or its local mode in tests)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from assistant.core.vectorstore.base import (
    DENSE,
    INDEXED_KEYWORDS,
    RRF_K,
    SPARSE,
    ChunkPoint,
    FusionMethod,
    ScoredChunk,
    SearchMode,
    SparseEmbedding,
    VectorStore,
)
from assistant.core.vectorstore.catalog import CollectionCatalog, EmbeddingRecord

# Collection metadata keys (Qdrant >= 1.16 stores a free-form JSON object with each collection; an
# older server keeps no record, and then only the dimension is checked).
META_MODEL = "embedding_model"
META_DIM = "embedding_dim"


def connect(*, url: str | None, path: Path | None, api_key: str | None, timeout_s: float) -> QdrantClient:
    """A qdrant-client for a server at `url`, or for the local-mode folder `path` (tests)."""
    if url:
        return QdrantClient(url=url, api_key=api_key, timeout=int(timeout_s))
    return QdrantClient(path=str(path))


def _dense_size(config: qm.CollectionConfig) -> int:
    vectors = config.params.vectors
    if isinstance(vectors, dict):
        return int(vectors[DENSE].size)
    assert vectors is not None, "the collection has no dense vector"
    return int(vectors.size)


def _recorded_model(config: qm.CollectionConfig) -> str | None:
    return (getattr(config, "metadata", None) or {}).get(META_MODEL)


class QdrantServerStore(VectorStore):
    """A Qdrant collection reached with qdrant-client.

    Args:
        collection: collection name (may be an alias on the server).
        url: server URL, e.g. `http://qdrant:6333`; or
        path: a folder for qdrant-client's local mode (brute force, same API; for tests).
        api_key: server API key, if any.
        timeout_s: request timeout in seconds.
        client: an open client to use instead (closed with the store only if `own_client`).
        model: embedding model name, recorded in the collection's metadata on creation and checked after.
        on_create: called once the collection has been created (the catalog points an alias at it).
    """

    def __init__(
        self,
        collection: str,
        *,
        url: str | None = None,
        path: Path | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        client: QdrantClient | None = None,
        own_client: bool = False,
        model: str | None = None,
        on_create: Callable[[], None] | None = None,
    ):
        self.collection = collection
        self.model = model
        self._on_create = on_create
        self._own_client = own_client or client is None
        self.client = client or connect(url=url, path=path, api_key=api_key, timeout_s=timeout_s)
        self._exists: bool | None = None
        self.layout: dict[str, int] = {}  # shard_number, replication_factor for a new collection (ServerCatalog)

    def _collection_exists(self) -> bool:
        if not self._exists:
            self._exists = self.client.collection_exists(self.collection)
        return bool(self._exists)

    def ensure_collection(self, dim: int) -> None:
        if self._collection_exists():
            info = self.client.get_collection(self.collection)
            self._check_dim(self.collection, _dense_size(info.config), dim)
            self._check_model(self.collection, _recorded_model(info.config), self.model)
            return
        params: dict[str, Any] = {
            "vectors_config": {DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE)},
            "sparse_vectors_config": {SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
            **self.layout,
        }
        try:
            self.client.create_collection(
                self.collection, **params, metadata={META_MODEL: self.model, META_DIM: dim} if self.model else None
            )
        except UnexpectedResponse as exc:
            if b"metadata" not in exc.content:
                raise
            self.client.create_collection(self.collection, **params)  # a server before Qdrant 1.16
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # local mode warns that payload indexes are no-ops there
            for name in INDEXED_KEYWORDS:
                self.client.create_payload_index(self.collection, name, qm.PayloadSchemaType.KEYWORD)
        self._exists = True
        if self._on_create is not None:
            self._on_create()

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
        return set(self._scroll(doc_id, with_payload=False))

    def scroll_payloads(self, *, doc_id: str) -> dict[str, dict[str, Any]]:
        return self._scroll(doc_id, with_payload=True)

    def _scroll(self, doc_id: str, *, with_payload: bool) -> dict[str, dict[str, Any]]:
        if not self._collection_exists():
            return {}
        found: dict[str, dict[str, Any]] = {}
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.collection, scroll_filter=self._doc_filter(doc_id), limit=1024, offset=offset,
                with_payload=with_payload, with_vectors=False,
            )
            found.update((str(r.id), dict(r.payload or {}) if with_payload else {}) for r in records)
            if offset is None:
                return found

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
        fusion: FusionMethod,
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
                query=(
                    qm.RrfQuery(rrf=qm.Rrf(k=RRF_K, weights=list(rrf_weights)))
                    if fusion == "rrf"
                    else qm.FusionQuery(fusion=qm.Fusion.DBSF)
                ),
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
                dense=list(cast("list[float]", h.vector[DENSE])) if with_dense and isinstance(h.vector, dict) else None,
            )
            for h in response.points
        ]

    def close(self) -> None:
        if self._own_client:
            self.client.close()


class ServerCatalog(CollectionCatalog):
    """The collections of one Qdrant server (or local-mode folder) and its real aliases.

    Args:
        client: an open qdrant-client; the catalog closes it on `close()` unless a store took it over.
        layout: `shard_number` and `replication_factor` of the collections it creates (Qdrant
            distributed mode); empty: the server's defaults.
    """

    def __init__(self, client: QdrantClient, *, layout: dict[str, int] | None = None):
        self.client = client
        self.layout = layout or {}
        self._given_away = False

    def _aliases(self) -> dict[str, str]:
        return {a.alias_name: a.collection_name for a in self.client.get_aliases().aliases}

    def resolve(self, alias: str) -> str | None:
        target = self._aliases().get(alias)
        if target:
            return target
        return alias if alias in self.names() else None

    def names(self) -> list[str]:
        return sorted(c.name for c in self.client.get_collections().collections)

    def record(self, name: str) -> EmbeddingRecord | None:
        if name not in self.names():
            return None
        config = self.client.get_collection(name).config
        return EmbeddingRecord(model=_recorded_model(config), dim=_dense_size(config))

    def open(self, name: str, *, model: str | None, alias: str | None = None, own: bool = False) -> QdrantServerStore:
        self._given_away = self._given_away or own
        store = QdrantServerStore(
            name, client=self.client, own_client=own, model=model, on_create=self._claim_on_create(alias, name)
        )
        store.layout = self.layout
        return store

    def switch_alias(self, alias: str, name: str) -> None:
        current = self._aliases().get(alias)
        if current is None and alias in self.names():
            # A collection made before aliases holds the name: it has to go before the alias can
            # take it (the one moment a reader of the alias finds nothing; first re-index only).
            self.client.delete_collection(alias)
        operations: list[Any] = []
        if current:
            operations.append(qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=alias)))
        operations.append(qm.CreateAliasOperation(create_alias=qm.CreateAlias(collection_name=name, alias_name=alias)))
        self.client.update_collection_aliases(change_aliases_operations=operations)  # one atomic change

    def drop(self, name: str) -> bool:
        self._refuse_aliased(name, self._aliases())
        if name in self.names():
            self.client.delete_collection(name)
        return True

    def close(self) -> None:
        if not self._given_away:
            self.client.close()
