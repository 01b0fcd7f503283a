"""One run of a folder sync: documents in flight, the cross-file embedding batch, the outcomes.

`Ingestor.sync` (ingest.pipeline) drives it: `start` reads, hashes and skips or submits each file to
the parser process, `collect` takes parse results into the batch, `flush` sends the batch to the
embedding thread in slices (`embedding_slice_chunks` passages per model call) and writes each slice's
points as soon as its vectors are ready, so that the chunk count of the progress moves while one big
file is embedded; `delete_missing` removes documents gone from the source.

A big file's chunks come from the parser in parts (`Settings.parse_part_chunks`), and each part is
embedded and its points written as the batches fill, so that a workbook of any length costs a few
batches of memory. The document stays `running` until its final result: only then are its stale
points deleted and the document marked done. A file that fails after some parts were written (a
limit reached late, the parser killed) loses every point of the document, as any failed file does,
and a run that dies in between leaves it `running`, so that the next sync parses it again.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from assistant.core.db.document_sync import (
    ParsedFile,
    StoredDocument,
    claim_document,
    finish_document,
    live_documents,
    mark_document_deleted,
)
from assistant.core.db.jobs import add_item, record_item
from assistant.core.db.session import Database
from assistant.core.embedding.embedder import Embedder
from assistant.core.index.payload import ChunkPayload, chunk_point, document_id
from assistant.core.language import document_language as detect_lang
from assistant.core.vectorstore import VectorStore
from assistant.tables.files import install as install_tables
from assistant.tables.files import remove as remove_tables
from ingest.embedding_cache import EmbeddingCache
from ingest.isolated_parse import IsolatedParser, ParseResult
from ingest.pii_masking import mask_parse_result
from ingest.progress import LiveTotals

log = logging.getLogger(__name__)

UPSERT_POINTS = 256  # points per store call
# Outcomes that the same bytes may not reach again, because their cause is outside the file: a tool
# that was missing (LibreOffice for .doc/.ppt) or an OCR engine that was off. Such files are parsed
# again on every sync instead of being skipped as unchanged.
RETRIED = ("unsupported", "needs_ocr")
MAX_ATTACHMENT_DEPTH = 3  # an e-mail attached to an e-mail attached to an e-mail, and no deeper


@dataclass
class FileOutcome:
    """What happened to one file (or attachment, `source` then ends in `#name`).

    `status` is one of done, skipped, failed, needs_ocr, encrypted, unsupported, too_large, empty,
    deleted (a done file's `reason` holds its notes: pages recognised by OCR, rows past a limit);
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
    result: ParseResult | None = None  # the final result, once it came
    title: str = ""  # from its first part (masked when the source masks personal data)
    lang: str = ""  # detected on its first chunks
    parts: int = 0  # parts taken from the parser so far (the final result counts as one)
    pending: int = 0  # of those, parts whose points are not written yet
    written: int = 0  # points written so far (counted in the live totals before the document is done)
    ids: set[str] = field(default_factory=set)  # the points written so far
    reused: int = 0  # of those, how many took their vector from the cache or the batch


@dataclass
class _Part:
    """Some of a document's chunks, in reading order, on their way to the embedder and the store."""

    work: _Work
    chunks: list


@dataclass
class _EmbeddingBatch:
    """Parts of documents whose vectors are being found: in the cache, else on the embedding thread.

    Attributes:
        works: the parts, in submission order.
        keys: per part, per chunk: (text key, document key) in the `EmbeddingCache`.
        known: key -> `(dim,)` float32 vector; the cache's hits, then the newly embedded ones.
        cached: the keys the cache already held (their vectors need not be stored again).
        todo: text key -> text, the passages the model embeds, each distinct text once, in chunk order.
        picks: per part, per chunk: the key whose vector the chunk takes (a cached key, or a `todo` key of
            this chunk or of an earlier one).
        reused: per part, how many chunks took a vector without embedding it themselves.
        slices: the embedding thread's `(vectors, embed seconds so far)` of `todo`'s texts, `step` at a
            time, in order; empty when nothing is to embed.
        next_slice: the first slice whose vectors are not in `known` yet.
        part_at, chunk_at: the first chunk whose point is not written yet (part index, chunk index).
        cut: a stop cancelled the slices not started (`SyncRun._cut`).
    """

    works: list[_Part]
    keys: list[list[tuple[bytes, bytes]]]
    known: dict[bytes, object]
    cached: set[bytes]
    todo: dict[bytes, str] = field(default_factory=dict)
    picks: list[list[bytes]] = field(default_factory=list)
    reused: list[int] = field(default_factory=list)
    slices: list[Future] = field(default_factory=list)
    step: int = 1
    next_slice: int = 0
    part_at: int = 0
    chunk_at: int = 0
    cut: bool = False  # a stop cancelled the slices not started (`SyncRun._cut`)


class SyncRun:
    """The state of one `Ingestor.sync` call: documents in flight, the embedding batch, outcomes.

    Args:
        store: the collection the points go to.
        db: the database of documents and job items.
        parser: the parser process files are handed to.
        embedder: the embedding model.
        cache: vectors by passage text and by place in a file.
        embed_executor: the single thread batches are embedded on, in order.
        batch_chunks: chunks gathered across documents before they are sent to the embedding thread.
        slice_chunks: passages per model call; each slice's points are written once its vectors are in.
        job_id: the `Job` row of this run.
        source_id: the `Source` row the documents belong to.
        on_file: called with each outcome as it is recorded.
    """

    def __init__(
        self,
        *,
        store: VectorStore,
        db: Database,
        parser: IsolatedParser,
        embedder: Embedder,
        cache: EmbeddingCache,
        embed_executor: Executor,
        batch_chunks: int,
        slice_chunks: int = 64,
        job_id: int,
        source_id: int,
        on_file: Callable[[FileOutcome], None] | None,
    ):
        self.store = store
        self.db = db
        self.parser = parser
        self.embedder = embedder
        self.cache = cache
        self.embed_executor = embed_executor
        self.batch_chunks = batch_chunks
        self.slice_chunks = slice_chunks
        self.job_id = job_id
        self.source_id = source_id
        self.on_file = on_file
        self.scratch = Path(tempfile.gettempdir())
        self.inflight: dict[str, _Work] = {}
        self.batch: list[_Part] = []
        self.batch_size = 0
        self.seen: set[str] = set()
        self.outcomes: dict[tuple[int, str], FileOutcome] = {}
        self.seconds: dict[str, float] = defaultdict(float)
        self._embedding: _EmbeddingBatch | None = None  # on the embedding thread, written on the next flush
        self._embed_busy_s = 0.0
        self.pii_kinds: tuple[str, ...] = ()  # personal data to mask (the source manifest's `mask_pii`)
        self.pii_masked: Counter = Counter()  # spans masked per kind, for the job's totals
        self.reparse_all = False  # the source's masking changed: no file counts as unchanged
        self.live: LiveTotals | None = None  # the job row's running counts (set by the pipeline)
        self.tables_dir: Path | None = None  # documents' table files (set by the pipeline; None: none kept)
        # A stop asked of the run (an event, or the job's `JobStop`; set by the pipeline): read between
        # embedding slices, so that a stop does not wait for a whole batch of gathered files.
        self.stop: Any = None  # anything with is_set()
        self.cut_short = False  # a stop left gathered or embedding documents unfinished

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
        work = _Work(order, rel, uri, doc_id, acl, content_hash, len(data), path, depth, started, item_id)
        outcome = self._claim(work)
        if outcome is not None:
            self._finish_item(order, item_id, outcome)
            return
        self.inflight[uri] = work
        self.parser.submit(uri, path, name=rel)

    def _claim(self, work: _Work) -> FileOutcome | None:
        """Mark the document and its job item running; the `skipped` outcome instead when the
        document is unchanged (its ACL and path brought up to date on its points)."""
        def refresh_points(acl: list[str] | None, source: str | None) -> None:
            payload = {key: value for key, value in (("acl", acl), ("source", source)) if value is not None}
            self.store.set_payload(doc_id=work.doc_id, payload=payload)

        found = claim_document(
            self.db, doc_id=work.doc_id, uri=work.uri, path=work.rel, source_id=self.source_id, acl=work.acl,
            item_id=work.item_id, unchanged=lambda doc: self._unchanged(doc, work), refresh_points=refresh_points,
        )
        if found is None:
            return None
        # Its attachments were not re-read: they are still present.
        self.seen.update(found.attachment_uris)
        reason = "unchanged; ACL updated" if found.acl_updated else "unchanged"
        return FileOutcome(work.rel, work.uri, "skipped", reason, found.chunk_count, time.perf_counter() - work.started)

    def _unchanged(self, doc: StoredDocument, work: _Work) -> bool:
        """The document holds these bytes, embedded with this model, all its points present (or it
        ended in a state that re-parsing the same bytes would reach again: not `RETRIED`)."""
        return not self.reparse_all and (
            doc.content_hash == work.content_hash
            and doc.embedding_model == self.embedder.name
            and not doc.deleted
            and (doc.status == "done" and self.store.count(doc_id=work.doc_id) == doc.chunk_count
                 or doc.status not in ("done", "queued", "running", *RETRIED))
        )

    def collect(self) -> None:
        """Take the next parse result: a part or a success joins the embedding batch, a failure is
        recorded once the document's parts already in the batches have gone through."""
        if self._embedding is not None:  # the slices embedded meanwhile are written before waiting for the parser
            self._advance(self._embedding, wait=False)
        result = self.parser.collect()
        work = self.inflight[result.key]
        self.seconds["parse_s"] += result.parse_s
        if not result.final:
            self._take_part(work, result)
            return
        del self.inflight[result.key]
        work.result = result
        for n, (name, data) in enumerate(result.attachments):  # also those of a carrier without text
            self._start_attachment(work, n, name, data)
        if result.status == "done":
            self._take_part(work, result)
        else:  # its parts not yet sent to the embedder are dropped; those on their way are not written
            kept = [p for p in self.batch if p.work is not work]
            work.pending -= len(self.batch) - len(kept)
            self.batch, self.batch_size = kept, sum(len(p.chunks) for p in kept)
        self._settle(work)

    def _take_part(self, work: _Work, result: ParseResult) -> None:
        """Add a part's chunks (or a done file's last ones) to the embedding batch."""
        # The chunks (OCR text included, `chunk.ocr`) are final here and not yet embedded.
        if self.pii_kinds:  # before the cache look-up and the embedding: nothing unmasked is stored
            if work.parts:
                result.title = ""  # masked and counted with the first part
            mask_parse_result(result, self.pii_kinds, self.pii_masked)
        if not work.parts:
            work.title = result.title
            work.lang = detect_lang(" ".join(c.text for c in result.chunks[:5]))
        work.parts += 1
        if not result.chunks:
            return
        work.pending += 1
        self.batch.append(_Part(work, result.chunks))
        self.batch_size += len(result.chunks)
        if self.batch_size >= self.batch_chunks:
            self.flush()

    def _settle(self, work: _Work) -> None:
        """Record the document's outcome once its final result came and its parts are all written:
        done with the points written, or the failure (its points, partial ones included, deleted)."""
        if work.result is None or work.pending:
            return
        if work.result.status == "done":
            self._finish_doc(work, work.ids, work.reused, "done", work.result.reason)
        else:
            self._finish_doc(work, set(), 0, work.result.status, work.result.reason)

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
        item_id = add_item(self.db, self.job_id, rel, parent.acl)
        self.start(target, rel, uri, order, parent.acl, parent.depth + 1, item_id)

    # -- embed, upsert, replace ----------------------------------------------------------------
    def flush(self) -> None:
        """Send the batch to the embedding thread; write the previous batch's points meanwhile.

        Embedding runs on `embed_executor` (torch releases the GIL), so that upserts, SQL and
        parse results of one batch overlap the model's work on the next. The batch goes in slices of
        `slice_chunks` passages, and the points of each slice are written as soon as its vectors are
        in (a document is still marked done only once all its points are written). A chunk's vector is found
        by its exact embedded text, else by (file sha256, position, text): the second key lets a
        byte-identical file at another path (whose title prefix may differ, e.g. a title taken from
        the file name) reuse the first copy's vectors; only the rest goes through the model.
        """
        batch, self.batch, self.batch_size = self.batch, [], 0
        previous, self._embedding = self._embedding, None
        if batch and self._stopping():
            self.cut_short = True  # their documents stay unfinished, as in `drop_unsent`
        elif batch:
            self._embedding = self._submit(batch)
        if previous is not None:
            self._write(previous)

    def drop_unsent(self) -> None:
        """Stopping (a first Ctrl-C, an admin's Stop, shutdown): forget the parts gathered for the next
        embedding batch. Parsing runs ahead of the embedder by up to a batch (`batch_chunks`: dozens of
        small files), so finishing them would not stop at the next file boundary; their documents stay
        unfinished (`running`), which the resumed run indexes again. Of the batch already embedding, the
        slices done are written and the rest is cancelled (`_advance`)."""
        if self.batch:
            self.cut_short = True
        self.batch, self.batch_size = [], 0

    def _stopping(self) -> bool:
        """Whether a stop was asked of the run (`stop`)."""
        return self.stop is not None and bool(self.stop.is_set())

    def drain(self) -> None:
        """Flush the last batch and wait until every document's points are written."""
        self.flush()
        self.flush()

    def _submit(self, batch: list[_Part]) -> _EmbeddingBatch:
        """Look the batch's chunks up in the cache and send the rest to the embedding thread."""
        started = time.perf_counter()
        pending = self._look_up(batch)
        texts, pending.step = list(pending.todo.values()), self.slice_chunks
        pending.slices = [self.embed_executor.submit(self._embed, texts[at : at + pending.step])
                          for at in range(0, len(texts), pending.step)]
        self.seconds["lookup_s"] += time.perf_counter() - started
        return pending

    def _look_up(self, batch: list[_Part]) -> _EmbeddingBatch:
        """The cache's vectors for the batch's chunks, and for each chunk the key it takes its vector
        from: a cached one, else the first chunk of the batch with its text, else its own text's."""
        keys = [
            [(self.cache.key(c.embed_text), self.cache.document_key(p.work.content_hash, c.position, c.text)) for c in p.chunks]
            for p in batch
        ]
        known = self.cache.get_many(k for ks in keys for pair in ks for k in pair)
        pending = _EmbeddingBatch(works=batch, keys=keys, known=known, cached=set(known))
        alias: dict[bytes, bytes] = {}  # document key -> text key embedded in this batch
        for part, ks in zip(batch, keys):
            doc_picks, n_reused = [], 0
            for (text_key, doc_key), chunk in zip(ks, part.chunks):
                pick = next((k for k in (text_key, doc_key) if k in known), None)
                pick = pick or (text_key if text_key in pending.todo else alias.get(doc_key))
                if pick is None:
                    pending.todo[text_key] = chunk.embed_text
                    alias[doc_key] = pick = text_key
                else:
                    n_reused += 1
                doc_picks.append(pick)
            pending.picks.append(doc_picks)
            pending.reused.append(n_reused)
        return pending

    def _embed(self, texts: list[str]) -> tuple[object, float]:
        # On the embedding thread: the vectors, and the running total of seconds spent embedding
        # (kept on this thread's side: the caller reads a batch's result while the next one runs).
        started = time.perf_counter()
        vectors = self.embedder.embed_passages(texts)
        self._embed_busy_s += time.perf_counter() - started
        return vectors, self._embed_busy_s

    def _write(self, pending: _EmbeddingBatch) -> None:
        """Write the batch's points slice by slice as its vectors come, then store the new vectors in
        the cache."""
        self._advance(pending, wait=True)
        self.cache.put_many(self._new_cache_entries(pending))

    def _advance(self, pending: _EmbeddingBatch, *, wait: bool) -> None:
        """Take the slices of `pending` embedded so far (all of them, waiting for each, when `wait`) and
        write the points whose vectors are in, in chunk order, settling the documents they complete."""
        keys = list(pending.todo)
        while True:
            self._write_known(pending)
            if not pending.cut and self._stopping():
                self._cut(pending)
            if pending.next_slice == len(pending.slices):
                return
            future = pending.slices[pending.next_slice]
            if not wait and not future.done():
                return
            started = time.perf_counter()
            vectors, self.seconds["embed_s"] = future.result()
            self.seconds["embed_wait_s"] += time.perf_counter() - started
            at = pending.next_slice * pending.step
            pending.known.update(zip(keys[at : at + pending.step], vectors))
            pending.next_slice += 1

    def _cut(self, pending: _EmbeddingBatch) -> None:
        """Stopped: the batch's slices that the embedding thread has not started are cancelled; those
        done or running are still taken and written, so the files in progress finish, and the parts that
        reach into a cancelled slice stay unfinished (`running`): the resumed run indexes them."""
        pending.cut = True
        kept = len(pending.slices)
        for n in range(pending.next_slice, len(pending.slices)):
            if pending.slices[n].cancel():  # not started: neither is any after it (one thread, in order)
                kept = n
                break
        for rest in pending.slices[kept:]:
            rest.cancel()
        if kept < len(pending.slices):
            del pending.slices[kept:]
            self.cut_short = True

    def _write_known(self, pending: _EmbeddingBatch) -> None:
        """Write the points from the batch's cursor on while their vectors are known (not those of a
        document that failed meanwhile); a part written to its end settles its document."""
        while pending.part_at < len(pending.works):
            part, picks = pending.works[pending.part_at], pending.picks[pending.part_at]
            start = end = pending.chunk_at
            while end < len(picks) and picks[end] in pending.known:
                end += 1
            work = part.work
            if end > start and (work.result is None or work.result.status == "done"):
                began = time.perf_counter()
                written = self._upsert(work, part.chunks[start:end], [pending.known[k] for k in picks[start:end]])
                work.ids |= written
                self.seconds["store_s"] += time.perf_counter() - began
                if self.live is not None:  # shown now; counted again, whole, when the document is done
                    work.written += len(written)
                    self.live.written(len(written))
            pending.chunk_at = end
            if end < len(picks):
                return
            work.pending -= 1
            if work.result is None or work.result.status == "done":
                work.reused += pending.reused[pending.part_at]
            pending.part_at, pending.chunk_at = pending.part_at + 1, 0
            self._settle(work)

    @staticmethod
    def _new_cache_entries(pending: _EmbeddingBatch) -> dict[bytes, object]:
        """Key -> vector for what the cache lacks: the texts embedded now, and every chunk's place."""
        fresh: dict[bytes, object] = {}
        for ks, doc_picks in zip(pending.keys, pending.picks):
            for (text_key, doc_key), pick in zip(ks, doc_picks):
                if pick not in pending.known:  # its slice was cancelled by a stop
                    continue
                if text_key in pending.todo:
                    fresh[text_key] = pending.known[text_key]
                if doc_key not in pending.cached:
                    fresh[doc_key] = pending.known[pick]
        return fresh

    def _upsert(self, work: _Work, chunks: list, vectors: list) -> set[str]:
        """Write the points of `chunks` of `work` (`index_format`), `UPSERT_POINTS` per store call; their IDs."""
        points = [
            chunk_point(
                ChunkPayload(
                    doc_id=work.doc_id,
                    chunk_index=chunk.position,
                    text=chunk.text,
                    title=work.title,
                    heading=chunk.heading,
                    page=chunk.page,
                    source=work.rel,
                    uri=work.uri,
                    acl=work.acl,
                    lang=work.lang,
                    content_hash=work.content_hash,
                    ocr=chunk.ocr,
                ),
                dense=vector.tolist(),
                passage=chunk.embed_text,
            )
            for chunk, vector in zip(chunks, vectors)
        ]
        for start in range(0, len(points), UPSERT_POINTS):
            self.store.upsert(points[start : start + UPSERT_POINTS])
        return {p.id for p in points}

    def _finish_doc(self, work: _Work, new_ids: set[str], reused: int, status: str, reason: str) -> None:
        store = self.store
        # New points are already in; only now do the old ones go, so a crash never leaves a gap.
        if self.tables_dir is not None:  # replaced like the points: the new file, or none (a failure, no large sheet)
            staged = work.result.tables_file if status == "done" and work.result is not None else None
            install_tables(Path(staged) if staged else None, tables_dir=self.tables_dir, doc_id=work.doc_id)
        store.delete(sorted(store.scroll_ids(doc_id=work.doc_id) - new_ids))
        finish_document(
            self.db, work.doc_id, status=status, reason=reason, chunk_count=len(new_ids),
            content_hash=work.content_hash, size_bytes=work.size_bytes, acl=work.acl,
            embedding_model=self.embedder.name,
            parsed=ParsedFile(work.title, work.result.mime, work.result.page_count) if status == "done" else None,
        )
        outcome = FileOutcome(work.rel, work.uri, status, reason, len(new_ids), time.perf_counter() - work.started, reused)
        if self.live is not None and work.written:
            self.live.written(-work.written)  # counted again, whole, as the document's outcome
        self._finish_item(work.order, work.item_id, outcome)

    def _finish_item(self, order: tuple[int, str], item_id: int | None, outcome: FileOutcome) -> None:
        record_item(
            self.db, self.job_id, item_id, path=outcome.source, status=outcome.status, reason=outcome.reason,
            chunks=outcome.chunks, duration_s=outcome.duration_s, document_id=document_id(outcome.uri),
        )
        self.outcomes[order] = outcome
        if self.live is not None:
            self.live.file(outcome.status, outcome.chunks, attachment="#" in order[1])
        if self.on_file:
            self.on_file(outcome)

    # -- documents gone from the source --------------------------------------------------------
    def delete_missing(self, *, under: str = "") -> None:
        """Delete the points of every document of this source that this run did not see.

        Args:
            under: only documents whose source-relative path starts with this prefix (`dir/`),
                for a run over one sub-folder of the source; "" for the whole source.
        """
        gone = [
            (doc_id, rel, uri) for doc_id, rel, uri in live_documents(self.db, self.source_id)
            if uri not in self.seen and rel.startswith(under)
        ]
        for n, (doc_id, rel, uri) in enumerate(gone):
            self.store.delete(sorted(self.store.scroll_ids(doc_id=doc_id)))
            if self.tables_dir is not None:
                remove_tables(self.tables_dir, doc_id)
            mark_document_deleted(self.db, doc_id)
            self._finish_item((1 << 62, f"{n:09d}"), None, FileOutcome(rel, uri, "deleted", "removed at the source"))
