"""Embedded vector store: Qdrant Edge (`qdrant-edge-py`), Qdrant's in-process engine, on local disk."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import qdrant_edge as qe

from assistant.core.errors import ConfigError
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

_META = "collection.json"
_ALIASES = "aliases.json"


def take_owner_lock(lock: Path, refusal: str) -> int:
    """Take the POSIX lock on file `lock` (created if missing) without waiting; returns its descriptor,
    whose closing (or the process's end) releases it.

    Raises:
        ConfigError(code="store_locked"): another process holds it; `refusal` is the message.
    """
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise ConfigError(f"{refusal} ({exc.strerror})", code="store_locked") from exc
    return fd


class EdgeVectorStore(VectorStore):
    """A collection stored as an EdgeShard folder `root/collection`. One process may open it.

    Args:
        root: folder holding one sub-folder per collection.
        collection: collection name.
        model: embedding model name, recorded in `collection.json` on creation and checked after.
        on_create: called once the collection has been created (the catalog points an alias at it).
    """

    def __init__(
        self,
        root: Path,
        collection: str,
        *,
        model: str | None = None,
        on_create: Callable[[], None] | None = None,
    ):
        self.root = Path(root)
        self.collection = collection
        self.model = model
        self.path = self.root / collection
        self._on_create = on_create
        self._shard: qe.EdgeShard | None = None
        self._lock = threading.RLock()
        self._dim: int | None = None
        self._recorded_model: str | None = None
        self._owner_fd: int | None = None
        self._claim()
        meta = self.path / _META
        if meta.exists():
            recorded = json.loads(meta.read_text())
            self._dim, self._recorded_model = int(recorded["dim"]), recorded.get("model")
            try:
                self._shard = self._load()
            except BaseException:
                self.close()
                raise

    def _claim(self) -> None:
        """Take the collection's owner lock before touching its files.

        Loading an EdgeShard that another process holds is refused by the engine only after it has
        opened the segments, and that attempt can damage the files the owner is writing (a sparse
        vector journal found "shorter than expected" by the owning server). A POSIX lock on a file
        beside the folder, taken first, keeps a second process away from them entirely; it is
        released when the store is closed or its process ends.

        Raises:
            ConfigError(code="store_locked"): another process holds the collection.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self._owner_fd = take_owner_lock(
            self.root / f".{self.collection}.lock",
            f"cannot open the Qdrant Edge collection at {self.path}: another process holds it. Only one process "
            "may open it: stop the other assistant process (e.g. `assistant serve`), or use a Qdrant server. "
            "ingest, search, ask and backup go through a running server found at ASSISTANT_HOST:ASSISTANT_PORT "
            "(default 127.0.0.1:8000): set them to the address `assistant serve` listens on",
        )

    def _load(self) -> qe.EdgeShard:
        try:
            return qe.EdgeShard.load(str(self.path))
        except Exception as exc:  # the engine reports a held lock or corrupt files as a plain error
            # Another process holds the write-ahead log's lock ("WouldBlock"): a state, not a bad setting.
            held = "WouldBlock" in str(exc)
            raise ConfigError(
                f"cannot open the Qdrant Edge collection at {self.path}: {exc}. Only one process may "
                "open it: stop the other assistant process (e.g. `assistant serve`), or use a Qdrant server",
                code="store_locked" if held else None,
            ) from exc

    def ensure_collection(self, dim: int) -> None:
        with self._lock:
            if self._shard is not None:
                self._check_dim(self.collection, self._dim or 0, dim)
                self._check_model(self.collection, self._recorded_model, self.model)
                return
            self.path.mkdir(parents=True, exist_ok=True)
            config = qe.EdgeConfig(
                vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
                sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            )
            self._shard = qe.EdgeShard.create(str(self.path), config)
            for name in INDEXED_KEYWORDS:
                self._shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
            self._shard.flush()
            meta = {"dim": dim, "model": self.model} if self.model else {"dim": dim}
            (self.path / _META).write_text(json.dumps(meta))
            self._dim, self._recorded_model = dim, self.model
        if self._on_create is not None:
            self._on_create()

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise ConfigError(f"collection '{self.collection}' does not exist yet: ingest documents first")
        return self._shard

    def upsert(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        edge_points = [
            qe.Point(
                id=p.id,
                vector={
                    DENSE: [float(x) for x in p.dense],
                    SPARSE: qe.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                },
                payload=p.payload,
            )
            for p in points
        ]
        with self._lock:
            self.shard.update(qe.UpdateOperation.upsert_points(edge_points))
            self.shard.flush()

    def delete(self, ids: Sequence[str]) -> None:
        if not ids or self._shard is None:
            return
        with self._lock:
            self.shard.update(qe.UpdateOperation.delete_points(list(ids)))
            self.shard.flush()

    @staticmethod
    def _doc_filter(doc_id: str) -> qe.Filter:
        return qe.Filter(must=[qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc_id))])

    def scroll_ids(self, *, doc_id: str) -> set[str]:
        return set(self._scroll(doc_id, with_payload=False))

    def scroll_payloads(self, *, doc_id: str) -> dict[str, dict[str, Any]]:
        return self._scroll(doc_id, with_payload=True)

    def _scroll(self, doc_id: str, *, with_payload: bool) -> dict[str, dict[str, Any]]:
        if self._shard is None:
            return {}
        found: dict[str, dict[str, Any]] = {}
        offset = None
        with self._lock:
            while True:
                records, offset = self.shard.scroll(
                    qe.ScrollRequest(
                        offset=offset, limit=1024, filter=self._doc_filter(doc_id), with_payload=with_payload
                    )
                )
                found.update((str(r.id), dict(r.payload or {}) if with_payload else {}) for r in records)
                if offset is None:
                    return found

    def set_payload(self, *, doc_id: str, payload: dict[str, Any]) -> None:
        if self._shard is None:
            return
        with self._lock:
            self.shard.update(qe.UpdateOperation.set_payload_by_filter(self._doc_filter(doc_id), payload))
            self.shard.flush()

    def count(self, *, doc_id: str | None = None) -> int:
        if self._shard is None:
            return 0
        flt = self._doc_filter(doc_id) if doc_id else None
        with self._lock:
            return int(self.shard.count(qe.CountRequest(exact=True, filter=flt)))

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
        if self._shard is None:
            return []
        must: list[Any] = [qe.FieldCondition(key="acl", match=qe.MatchAny(acl_any))]
        if doc_ids:
            must.append(qe.FieldCondition(key="doc_id", match=qe.MatchAny(doc_ids)))
        flt = qe.Filter(must=must)
        dense_q = qe.Query.Nearest([float(x) for x in dense], using=DENSE) if dense is not None else None
        sparse_q = (
            qe.Query.Nearest(qe.SparseVector(indices=sparse.indices, values=sparse.values), using=SPARSE)
            if sparse is not None
            else None
        )
        with_vector: Any = [DENSE] if with_dense else False
        if mode == "hybrid":
            request = qe.QueryRequest(
                limit=limit,
                prefetches=[
                    qe.Prefetch(limit=prefetch_limit, query=dense_q, filter=flt),
                    qe.Prefetch(limit=prefetch_limit, query=sparse_q, filter=flt),
                ],
                # Rrf and Dbsf subclass Fusion (qdrant-edge's stubs declare them as plain nested classes).
                query=cast(
                    qe.Fusion,
                    qe.Fusion.Rrf(k=RRF_K, weights=list(rrf_weights)) if fusion == "rrf" else qe.Fusion.Dbsf(),
                ),
                filter=flt,
                with_payload=True,
                with_vector=with_vector,
            )
        else:
            request = qe.QueryRequest(
                limit=limit,
                query=dense_q if mode == "dense" else sparse_q,
                filter=flt,
                with_payload=True,
                with_vector=with_vector,
            )
        with self._lock:
            hits = self.shard.query(request)
        return [
            ScoredChunk(
                id=str(h.id),
                score=float(h.score),
                payload=dict(h.payload or {}),
                dense=_named(h.vector, DENSE) if with_dense else None,
            )
            for h in hits
        ]

    def optimize(self) -> None:
        """`EdgeShard.optimize()`: Edge runs no background optimiser, so a large sync calls this.

        On the handbook + docs-zh index (9,825 chunks) it took 18.5 s and brought filtered hybrid
        queries from p50 5.9 / p95 24 ms to 1.4 / 2.5 ms (docs/notes/serving-and-ingestion-investigations.md,
        "Qdrant Edge optimisation after a large sync"). Queries wait for it.
        """
        with self._lock:
            if self._shard is not None:
                self._shard.optimize()
                self._shard.flush()

    def close(self) -> None:
        with self._lock:
            if self._shard is not None:
                self._shard.flush()
                self._shard.close()
                self._shard = None
            if self._owner_fd is not None:
                os.close(self._owner_fd)  # releases the owner lock
                self._owner_fd = None

    @contextmanager
    def writes_paused(self) -> Iterator[Path]:
        """Hold this process's writes (upserts, deletes, optimisation) with everything flushed, so that
        the folder can be copied consistently (Edge has no snapshot of its own); yields the folder."""
        with self._lock:
            if self._shard is not None:
                self._shard.flush()
            yield self.path


class EdgeCatalog(CollectionCatalog):
    """The collections under one Qdrant Edge folder. Edge has no aliases: `aliases.json` in `root`
    maps alias -> collection folder, replaced atomically (temporary file, then `os.replace`).

    Args:
        root: the Edge folder (`settings.edge_path`).
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def _aliases(self) -> dict[str, str]:
        path = self.root / _ALIASES
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def _exists(self, name: str) -> bool:
        return (self.root / name / _META).exists()

    def resolve(self, alias: str) -> str | None:
        target = self._aliases().get(alias)
        if target and self._exists(target):
            return target
        return alias if self._exists(alias) else None

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(d.name for d in self.root.iterdir() if (d / _META).exists())

    def record(self, name: str) -> EmbeddingRecord | None:
        if not self._exists(name):
            return None
        meta = json.loads((self.root / name / _META).read_text())
        return EmbeddingRecord(model=meta.get("model"), dim=int(meta["dim"]))

    def open(self, name: str, *, model: str | None, alias: str | None = None, own: bool = False) -> EdgeVectorStore:
        return EdgeVectorStore(self.root, name, model=model, on_create=self._claim_on_create(alias, name))

    def switch_alias(self, alias: str, name: str) -> None:
        if not self._exists(name):
            raise ConfigError(f"cannot point alias '{alias}' at '{name}': no such collection under {self.root}")
        aliases = self._aliases() | {alias: name}
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".aliases-", suffix=".json", dir=self.root)
        with os.fdopen(fd, "w") as f:
            json.dump(aliases, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / _ALIASES)  # readers see the old record or the new one, never half

    def drop(self, name: str) -> bool:
        self._refuse_aliased(name, self._aliases())
        path = self.root / name
        if not path.exists():
            return True
        try:  # only a folder nobody holds may go: a running server still reads its old collection
            qe.EdgeShard.load(str(path)).close()
        except Exception:
            return False
        shutil.rmtree(path)
        return True


def _named(vector: Any, name: str) -> list[float] | None:
    if isinstance(vector, dict):
        value = vector.get(name)
        return list(value) if value is not None else None
    return None
