"""The vector store interface the rest of the product codes against."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from assistant.core.errors import ConflictError, InvalidRequestError

SearchMode = Literal["hybrid", "dense", "sparse"]
# How hybrid mode fuses its dense and sparse lists: weighted reciprocal rank fusion, or Qdrant's
# distribution-based score fusion (each list's scores normalised by mean +- 3 standard deviations, summed).
FusionMethod = Literal["rrf", "dbsf"]

DENSE = "dense"
SPARSE = "sparse"
# Reciprocal rank fusion constant: score = sum over lists of 1 / (k + rank). k=60 is the value of
# Cormack, Clarke & Buettcher (SIGIR 2009); both implementations are given it explicitly so that they
# rank identically.
RRF_K = 60
# The product's RRF weights (dense, sparse), the one default of the store and the retriever: the keyword list
# counts half as much as the dense one (measured on tests/data/dev_questions.jsonl,
# docs/notes/retrieval-investigations.md, "Retrieval quality on the development set"). Weighted RRF multiplies
# each list's 1 / (k + rank) by its weight; Qdrant Edge `Fusion.Rrf(k, weights)` and qdrant-client
# `Rrf(k, weights)` implement the same formula, so both stores get the same weights and rank identically.
RRF_WEIGHTS: tuple[float, float] = (2.0, 1.0)
# Payload fields with a keyword index; `acl` is what every query filters on.
INDEXED_KEYWORDS = ("acl", "doc_id", "content_hash")


@dataclass(frozen=True)
class SparseEmbedding:
    """A sparse vector: term indices (uint32) and their weights (float32), same length."""

    indices: list[int]
    values: list[float]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.values):
            raise InvalidRequestError(
                f"sparse vector has {len(self.indices)} indices but {len(self.values)} values"
            )


@dataclass(frozen=True)
class ChunkPoint:
    """One chunk as stored: deterministic UUID `id`, `(dim,)` float32 dense vector, sparse vector,
    and the payload (`doc_id`, `text`, `source`, `uri`, `acl`, ...)."""

    id: str
    dense: Sequence[float]
    sparse: SparseEmbedding
    payload: dict[str, Any]


@dataclass(frozen=True)
class ScoredChunk:
    """A query hit. `score` is the fused (RRF) score in hybrid mode, else the mode's own score."""

    id: str
    score: float
    payload: dict[str, Any]
    dense: list[float] | None = field(default=None, compare=False)


class VectorStore(abc.ABC):
    """A Qdrant collection of chunks with named vectors `dense` (cosine) and `sparse` (IDF modifier).

    Every query takes `acl_any`, the reader's principals; the filter goes inside the query (and
    inside every prefetch), so a chunk the reader may not open is never scored, let alone returned.

    `collection` is the physical collection's name (an alias is resolved when the store is opened,
    see `catalog`); `model` is the embedding model the store is written with, recorded when the
    collection is created (None: not recorded, not checked).
    """

    collection: str
    model: str | None = None

    @abc.abstractmethod
    def ensure_collection(self, dim: int) -> None:
        """Create the collection for `dim`-dimensional embeddings if missing.

        Raises:
            ConflictError: the collection exists with another dimension.
        """

    @abc.abstractmethod
    def upsert(self, points: Sequence[ChunkPoint]) -> None:
        """Insert or replace points by ID (idempotent)."""

    @abc.abstractmethod
    def delete(self, ids: Sequence[str]) -> None:
        """Delete points by ID; unknown IDs are ignored."""

    @abc.abstractmethod
    def scroll_ids(self, *, doc_id: str) -> set[str]:
        """IDs of every point of one document."""

    @abc.abstractmethod
    def scroll_payloads(self, *, doc_id: str) -> dict[str, dict[str, Any]]:
        """Every chunk of document `doc_id`: point ID -> stored payload (`ChunkPayload.to_stored`), with
        no ACL filter: for callers that check `acl` themselves (the finetune dataset builder)."""

    @abc.abstractmethod
    def set_payload(self, *, doc_id: str, payload: dict[str, Any]) -> None:
        """Overwrite the given payload keys on every point of one document (e.g. a new ACL)."""

    @abc.abstractmethod
    def count(self, *, doc_id: str | None = None) -> int:
        """Number of points, in one document or in all."""

    @abc.abstractmethod
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
        """Implementation of `query`, after argument checks."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store (and its folder lock, if any)."""

    def optimize(self) -> None:  # noqa: B027 - optional hook: a no-op unless the engine needs it
        """Merge segments and build the search indexes after a large write (default: nothing to do;
        a Qdrant server's optimiser runs on its own)."""

    def query(
        self,
        *,
        dense: Sequence[float] | None,
        sparse: SparseEmbedding | None,
        acl_any: Sequence[str],
        limit: int = 10,
        prefetch_limit: int = 40,
        mode: SearchMode = "hybrid",
        doc_ids: Sequence[str] | None = None,
        with_dense: bool = False,
        rrf_weights: Sequence[float] = RRF_WEIGHTS,
        fusion: FusionMethod = "rrf",
    ) -> list[ScoredChunk]:
        """Best chunks first, among those whose `acl` shares a principal with `acl_any`.

        Args:
            dense: `(dim,)` query embedding (needed for hybrid and dense).
            sparse: query sparse vector (needed for hybrid and sparse).
            acl_any: the reader's principals (`everyone`, `user:NAME`, `group:NAME`); must not be empty.
            limit: hits to return.
            prefetch_limit: candidates per prefetch before fusion.
            mode: `hybrid` (dense + sparse fused by RRF), `dense` or `sparse`.
            doc_ids: optional restriction to these documents.
            with_dense: return each hit's dense vector (for relevance scoring and diversity).
            rrf_weights: (dense, sparse) weights of weighted reciprocal rank fusion in hybrid mode
                (Cormack, Clarke & Buettcher, SIGIR 2009, with per-list weights); both positive.
            fusion: `rrf`, or `dbsf` (Qdrant's distribution-based score fusion, unweighted).

        Raises:
            InvalidRequestError: no principals, the vector the mode needs is missing, or a weight
                is not positive.
        """
        principals = [p for p in acl_any if p]
        if not principals:
            raise InvalidRequestError("a query needs at least one principal in acl_any (e.g. 'everyone')")
        if mode in ("hybrid", "dense") and dense is None:
            raise InvalidRequestError(f"search mode '{mode}' needs a dense query vector")
        if mode in ("hybrid", "sparse") and sparse is None:
            raise InvalidRequestError(f"search mode '{mode}' needs a sparse query vector")
        weights = tuple(float(w) for w in rrf_weights)
        if len(weights) != 2 or min(weights) <= 0:
            raise InvalidRequestError(f"rrf_weights must be two positive numbers (dense, sparse), not {weights}")
        if fusion not in ("rrf", "dbsf"):
            raise InvalidRequestError(f"fusion must be 'rrf' or 'dbsf', not {fusion!r}")
        if mode == "hybrid" and sparse is not None and not sparse.indices:
            mode = "dense"  # a question with no indexable term: fusion with an empty list is dense alone
        if mode == "sparse" and sparse is not None and not sparse.indices:
            return []
        return self._query(
            dense=dense,
            sparse=sparse,
            acl_any=principals,
            limit=limit,
            prefetch_limit=max(prefetch_limit, limit),
            mode=mode,
            doc_ids=list(doc_ids) if doc_ids else None,
            with_dense=with_dense,
            rrf_weights=(weights[0], weights[1]),
            fusion=fusion,
        )

    @staticmethod
    def _check_dim(collection: str, existing: int, wanted: int) -> None:
        if existing != wanted:
            raise ConflictError(
                f"collection '{collection}' holds {existing}-dimensional embeddings; the configured "
                f"embedding model makes {wanted}-dimensional ones: re-index into a new collection"
            )

    @staticmethod
    def _check_model(collection: str, recorded: str | None, wanted: str | None) -> None:
        # Two models may share a dimension (all-MiniLM-L6-v2 and multilingual-e5-small are both
        # 384-d): their vectors must still never meet in one collection.
        if recorded and wanted and recorded != wanted:
            raise ConflictError(
                f"collection '{collection}' was built with the embedding model {recorded!r}, not {wanted!r}: "
                "run `assistant reindex` to build a collection for the new model"
            )
