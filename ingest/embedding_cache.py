"""Embeddings by content: a SQLite file in the data dir maps a chunk text's hash to its vector.

Identical text (the same file at two paths, or the unchanged paragraphs of an edited file) is then
embedded once: later occurrences reuse the stored vector and only pay for a lookup. The key includes
the model name and dimension, so a model change never serves stale vectors. The file is bounded:
past `max_vectors` the oldest insertions are dropped (first in, first out), which costs at most a
re-embedding of their text later.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

_LOOKUP_BATCH = 500  # SQLite's default limit on bound parameters is 999


class EmbeddingCache:
    """Dense vectors keyed by `sha256(model, dim, text)`; safe across threads and processes (WAL).

    Args:
        path: the SQLite file (created if missing).
        model: the embedding model's name (part of every key).
        dim: the embedding dimension.
        max_vectors: most vectors kept (each `dim * 4` bytes plus a 32-byte key; 1,000,000 of
            384 dimensions take about 1.6 GB).
    """

    def __init__(self, path: Path, *, model: str, dim: int, max_vectors: int = 1_000_000):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        self._salt = f"{model}\x00{dim}\x00".encode()
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # a lost tail only costs a re-embedding
        self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self.max_vectors = max_vectors
        self._count = self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0]

    def key(self, text: str) -> bytes:
        """The 32-byte key of one text as embedded (prefix included)."""
        return hashlib.sha256(self._salt + text.encode("utf-8")).digest()

    def document_key(self, content_hash: str, position: int, text: str) -> bytes:
        """The 32-byte key of a chunk by place: the file's sha256, the chunk's position and text."""
        return hashlib.sha256(self._salt + f"doc\x00{content_hash}\x00{position}\x00".encode() + text.encode("utf-8")).digest()

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, np.ndarray]:
        """Stored vectors for those of `keys` that are known.

        Returns:
            key -> `(dim,)` float32 vector.
        """
        wanted = list(dict.fromkeys(keys))
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(wanted), _LOOKUP_BATCH):
                part = wanted[start : start + _LOOKUP_BATCH]
                rows = self._conn.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (self.dim,):
                        found[bytes(key)] = vector
        return found

    def put_many(self, items: Mapping[bytes, np.ndarray] | Sequence[tuple[bytes, np.ndarray]]) -> None:
        """Store vectors (`(dim,)` float32 each) under their keys; existing keys are kept."""
        pairs = items.items() if isinstance(items, Mapping) else items
        rows = [(key, np.asarray(vector, dtype=np.float32).tobytes()) for key, vector in pairs]
        if not rows:
            return
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany("INSERT OR IGNORE INTO vectors (key, vector) VALUES (?, ?)", rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._count += len(rows)  # an upper bound: keys already present were ignored
            if self._count > self.max_vectors:
                self._trim()

    def _trim(self) -> None:
        # Another process may have added rows too: count for real, then drop the oldest rowids.
        self._count = self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        excess = self._count - self.max_vectors
        if excess > 0:
            self._conn.execute("DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM vectors ORDER BY rowid LIMIT ?)", (excess,))
            self._count -= excess

    def __len__(self) -> int:
        """Vectors stored now."""
        with self._lock:
            return self._conn.execute("SELECT count(*) FROM vectors").fetchone()[0]

    def close(self) -> None:
        """Close the SQLite connection."""
        with self._lock:
            self._conn.close()
