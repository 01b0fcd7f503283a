"""One run of a folder sync: documents in flight, the cross-file embedding batch, the outcomes.

`Ingestor.sync` (ingest.pipeline) drives it: `start` reads, hashes and skips or submits each file to
the parser process, `collect` takes parse results into the batch, `flush` embeds the batch in one
call and replaces each document's points, `delete_missing` removes documents gone from the source.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable
from urllib.parse import quote

from sqlalchemy import select, update

from assistant.core import sparse
from assistant.core.db.models import Document, JobItem, utcnow
from assistant.core.language import document_language as detect_lang
from assistant.core.vectorstore import ChunkPoint
from ingest.ids import chunk_id, document_id
from ingest.isolated_parse import ParseResult

if TYPE_CHECKING:
    from ingest.pipeline import Ingestor

log = logging.getLogger(__name__)

UPSERT_POINTS = 256  # points per store call
MAX_ATTACHMENT_DEPTH = 3  # an e-mail attached to an e-mail attached to an e-mail, and no deeper


@dataclass
class FileOutcome:
    """What happened to one file (or attachment, `source` then ends in `#name`).

    `status` is one of done, skipped, failed, needs_ocr, encrypted, unsupported, empty, deleted;
    `chunks` the document's chunk count; `reused` how many of them took their embedding from the
    cache instead of the model; `duration_s` wall-clock seconds from first look to last write.
    """

    source: str
    uri: str
    status: str
    reason: str = ""
    chunks: int = 0
    duration_s: float = 0.0
    reused: int = 0

    def to_dict(self) -> dict:
        """The outcome as a JSON-serialisable dict."""
        return asdict(self)


@dataclass
class _Work:
    """A document on its way through one sync: read and hashed, then parsed, then embedded."""

    order: tuple[int, str]
    rel: str
    uri: str
    doc_id: str
    acl: list[str]
    content_hash: str
    size_bytes: int
    path: Path
    depth: int
    started: float
    item_id: int
    result: ParseResult | None = None


class SyncRun:
    """The state of one `Ingestor.sync` call: documents in flight, the embedding batch, outcomes."""

    def __init__(self, ingestor: Ingestor, job_id: int, source_id: int, on_file: Callable[[FileOutcome], None] | None):
        self.ing = ingestor
        self.res = ingestor.res
        self.job_id = job_id
        self.source_id = source_id
        self.on_file = on_file
        self.scratch = Path(tempfile.gettempdir())
        self.inflight: dict[str, _Work] = {}
        self.batch: list[_Work] = []
        self.batch_size = 0
        self.seen: set[str] = set()
        self.outcomes: dict[tuple[int, str], FileOutcome] = {}
        self.seconds: dict[str, float] = defaultdict(float)
        self._embedding: tuple | None = None  # the batch on the embedding thread, written on the next flush
        self._embed_busy_s = 0.0

    # -- read, hash, skip or submit ------------------------------------------------------------
    def start(self, path: Path, rel: str, uri: str, order: tuple[int, str], acl: list[str], depth: int, item_id: int) -> None:
        """Read and hash one document; record it skipped when unchanged, else hand it to the parser.

        Args:
            path: the file (an attachment's temporary copy for attachments).
            rel: its name in outcomes, relative to the source root (`#name` for an attachment).
            uri: its URI, from which its document ID derives.
            order: sort key of its outcome (file index, attachment suffix).
            acl: the principals who may read it.
            depth: 0 for a file, n for an attachment nested n levels deep.
            item_id: its `JobItem` row.
        """
        started = time.perf_counter()
        self.seen.add(uri)
        doc_id = document_id(uri)
        try:
            data = path.read_bytes()
        except OSError as exc:
            self._finish_item(order, item_id, FileOutcome(rel, uri, "failed", f"cannot read the file: {exc}"))
            return
        content_hash = hashlib.sha256(data).hexdigest()
        store = self.res.store
        with self.res.db.session() as session:
            doc = session.get(Document, doc_id)
            if doc is None:
                doc = Document(id=doc_id, source_id=self.source_id, path=rel, uri=uri)
                session.add(doc)
            unchanged = (
                doc.content_hash == content_hash
                and doc.embedding_model == self.ing.embedder.name
                and doc.deleted_at is None
                and (doc.status == "done" and store.count(doc_id=doc_id) == doc.chunk_count or doc.status not in ("done", "queued", "running"))
            )
            if unchanged:
                reason, payload = "unchanged", {}
                if sorted(doc.acl or []) != sorted(acl):
                    payload["acl"], doc.acl = acl, acl
                    reason = "unchanged; ACL updated"
                if doc.path != rel or doc.source_id != self.source_id:  # taken over by an enclosing source
                    payload["source"], doc.path, doc.source_id = rel, rel, self.source_id
                if payload:
                    store.set_payload(doc_id=doc_id, payload=payload)
                # Its attachments were not re-read: they are still present.
                self.seen.update(session.scalars(select(Document.uri).where(Document.uri.startswith(uri + "#", autoescape=True))))
                outcome = FileOutcome(rel, uri, "skipped", reason, doc.chunk_count, time.perf_counter() - started)
            else:
                outcome = None
                doc.status, doc.source_id, doc.path, doc.deleted_at = "running", self.source_id, rel, None
            session.execute(update(JobItem).where(JobItem.id == item_id).values(status="running", document_id=doc_id))
        if outcome is not None:
            self._finish_item(order, item_id, outcome)
            return
        work = _Work(order, rel, uri, doc_id, acl, content_hash, len(data), path, depth, started, item_id)
        self.inflight[uri] = work
        self.ing.parser.submit(uri, path, name=rel)

    def collect(self) -> None:
        """Take the next parse result: a failure is recorded, a success joins the embedding batch."""
        result = self.ing.parser.collect()
        work = self.inflight.pop(result.key)
        work.result = result
        self.seconds["parse_s"] += result.parse_s
        for n, (name, data) in enumerate(result.attachments):  # also those of a carrier without text
            self._start_attachment(work, n, name, data)
        if result.status != "done":
            self._finish_doc(work, set(), 0, result.status, result.reason)
            return
        self.batch.append(work)
        self.batch_size += len(result.chunks)
        if self.batch_size >= self.ing.batch_chunks:
            self.flush()

    def _start_attachment(self, parent: _Work, n: int, name: str, data: bytes) -> None:
        name = str(name) or f"attachment-{n + 1}"
        rel, uri = f"{parent.rel}#{name}", f"{parent.uri}#{quote(name, safe='')}"
        order = (parent.order[0], f"{parent.order[1]}#{n:04d}")
        if parent.depth >= MAX_ATTACHMENT_DEPTH:
            log.warning("%s: attachment nested deeper than %d levels is not ingested", rel, MAX_ATTACHMENT_DEPTH)
            return
        folder = self.scratch / uuid.uuid4().hex
        folder.mkdir()
        # Only the last path component of a sender-chosen name, so that it cannot escape the folder.
        target = folder / (Path(name.replace("\\", "/")).name.lstrip(".") or f"attachment-{n + 1}")
        target.write_bytes(data)
        with self.res.db.session() as session:
            item = JobItem(job_id=self.job_id, path=rel, status="queued")
            session.add(item)
            session.flush()
            item_id = item.id
        self.start(target, rel, uri, order, parent.acl, parent.depth + 1, item_id)

    # -- embed, upsert, replace ----------------------------------------------------------------
    def flush(self) -> None:
        """Send the batch to the embedding thread; write the previous batch's points meanwhile.

        Embedding runs on `Ingestor.embed_thread` (torch releases the GIL), so that upserts, SQL and
        parse results of one batch overlap the model's work on the next. A chunk's vector is found
        by its exact embedded text, else by (file sha256, position, text): the second key lets a
        byte-identical file at another path (whose title prefix may differ, e.g. a title taken from
        the file name) reuse the first copy's vectors; only the rest goes through the model.
        """
        batch, self.batch, self.batch_size = self.batch, [], 0
        previous, self._embedding = self._embedding, None
        if batch:
            self._embedding = self._submit(batch)
        if previous is not None:
            self._write(*previous)

    def drain(self) -> None:
        """Flush the last batch and wait until every document's points are written."""
        self.flush()
        self.flush()

    def _submit(self, batch: list[_Work]) -> tuple:
        started = time.perf_counter()
        cache = self.ing.cache
        keys = [
            [(cache.key(c.embed_text), cache.document_key(w.content_hash, c.position, c.text)) for c in w.result.chunks]
            for w in batch
        ]
        known = cache.get_many(k for ks in keys for pair in ks for k in pair)
        before = set(known)
        todo: dict[bytes, str] = {}  # text key -> text to embed
        alias: dict[bytes, bytes] = {}  # document key -> text key embedded in this batch
        picks: list[list[bytes]] = []  # per document, per chunk: the key holding its vector
        reused: list[int] = []
        for work, ks in zip(batch, keys):
            doc_picks, n_reused = [], 0
            for (text_key, doc_key), chunk in zip(ks, work.result.chunks):
                pick = next((k for k in (text_key, doc_key) if k in known), None)
                pick = pick or (text_key if text_key in todo else alias.get(doc_key))
                if pick is None:
                    todo[text_key] = chunk.embed_text
                    alias[doc_key] = pick = text_key
                else:
                    n_reused += 1
                doc_picks.append(pick)
            picks.append(doc_picks)
            reused.append(n_reused)
        future = self.ing.embed_thread.submit(self._embed, list(todo.values())) if todo else None
        self.seconds["lookup_s"] += time.perf_counter() - started
        return batch, keys, known, before, todo, picks, reused, future

    def _embed(self, texts: list[str]) -> tuple[object, float]:
        # On the embedding thread: the vectors, and the running total of seconds spent embedding
        # (kept on this thread's side: the caller reads a batch's result while the next one runs).
        started = time.perf_counter()
        vectors = self.ing.embedder.embed_passages(texts)
        self._embed_busy_s += time.perf_counter() - started
        return vectors, self._embed_busy_s

    def _write(self, batch, keys, known, before, todo, picks, reused, future) -> None:
        started = time.perf_counter()
        if future is not None:
            vectors, self.seconds["embed_s"] = future.result()
            known.update(zip(todo.keys(), vectors))
        self.seconds["embed_wait_s"] += time.perf_counter() - started
        fresh: dict[bytes, object] = {}
        for ks, doc_picks in zip(keys, picks):
            for (text_key, doc_key), pick in zip(ks, doc_picks):
                if text_key in todo:
                    fresh[text_key] = known[text_key]
                if doc_key not in before:
                    fresh[doc_key] = known[pick]
        self.ing.cache.put_many(fresh)
        for work, doc_picks, n_reused in zip(batch, picks, reused):
            started = time.perf_counter()
            ids = self._upsert(work, [known[k] for k in doc_picks])
            self.seconds["store_s"] += time.perf_counter() - started
            self._finish_doc(work, ids, n_reused, "done", "")

    def _upsert(self, work: _Work, vectors: list) -> set[str]:
        result = work.result
        lang = detect_lang(" ".join(c.text for c in result.chunks[:5]))
        points = [
            ChunkPoint(
                id=chunk_id(work.doc_id, chunk.position, chunk.text),
                dense=vector.tolist(),
                sparse=sparse.encode_document(chunk.embed_text),
                payload={
                    "doc_id": work.doc_id,
                    "chunk_index": chunk.position,
                    "text": chunk.text,
                    "title": result.title,
                    "heading": chunk.heading,
                    "page": chunk.page,
                    "source": work.rel,
                    "uri": work.uri,
                    "acl": work.acl,
                    "lang": lang,
                    "content_hash": work.content_hash,
                },
            )
            for chunk, vector in zip(result.chunks, vectors)
        ]
        for start in range(0, len(points), UPSERT_POINTS):
            self.res.store.upsert(points[start : start + UPSERT_POINTS])
        return {p.id for p in points}

    def _finish_doc(self, work: _Work, new_ids: set[str], reused: int, status: str, reason: str) -> None:
        store = self.res.store
        # New points are already in; only now do the old ones go, so a crash never leaves a gap.
        store.delete(sorted(store.scroll_ids(doc_id=work.doc_id) - new_ids))
        with self.res.db.session() as session:
            doc = session.get(Document, work.doc_id)
            doc.status, doc.reason, doc.chunk_count = status, reason, len(new_ids)
            doc.content_hash, doc.size_bytes, doc.acl = work.content_hash, work.size_bytes, work.acl
            doc.embedding_model = self.ing.embedder.name
            if status == "done":
                doc.title, doc.mime, doc.page_count = work.result.title, work.result.mime, work.result.page_count
        outcome = FileOutcome(work.rel, work.uri, status, reason, len(new_ids), time.perf_counter() - work.started, reused)
        self._finish_item(work.order, work.item_id, outcome)

    def _finish_item(self, order: tuple[int, str], item_id: int | None, outcome: FileOutcome) -> None:
        values = dict(
            status=outcome.status, reason=outcome.reason, chunks=outcome.chunks,
            duration_s=outcome.duration_s, document_id=document_id(outcome.uri),
        )
        with self.res.db.session() as session:
            if item_id is None:
                session.add(JobItem(job_id=self.job_id, path=outcome.source, **values))
            else:
                session.execute(update(JobItem).where(JobItem.id == item_id).values(**values))
        self.outcomes[order] = outcome
        if self.on_file:
            self.on_file(outcome)

    # -- documents gone from the source --------------------------------------------------------
    def delete_missing(self, *, under: str = "") -> None:
        """Delete the points of every document of this source that this run did not see.

        Args:
            under: only documents whose source-relative path starts with this prefix (`dir/`),
                for a run over one sub-folder of the source; "" for the whole source.
        """
        with self.res.db.session() as session:
            docs = session.scalars(
                select(Document).where(Document.source_id == self.source_id, Document.deleted_at.is_(None))
            ).all()
            gone = [(doc.id, doc.path, doc.uri) for doc in docs if doc.uri not in self.seen and doc.path.startswith(under)]
        for n, (doc_id, rel, uri) in enumerate(gone):
            self.res.store.delete(sorted(self.res.store.scroll_ids(doc_id=doc_id)))
            with self.res.db.session() as session:
                doc = session.get(Document, doc_id)
                doc.deleted_at, doc.status, doc.chunk_count = utcnow(), "deleted", 0
            self._finish_item((1 << 62, f"{n:09d}"), None, FileOutcome(rel, uri, "deleted", "removed at the source"))
