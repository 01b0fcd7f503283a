"""The ingestion pipeline: sync a folder (or one file) into the collection, one job row per run.

Invariants kept here: chunk IDs are deterministic (document ID + position + chunk hash), so a re-run
changes nothing; an updated file replaces its chunks (new ones upserted first, stale ones deleted
after); a file deleted at the source loses its chunks; a bad file fails alone with a reason.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from sqlalchemy import select

from assistant.core import sparse
from assistant.core.db.models import Document, Job, JobItem, Source
from assistant.core.errors import IngestError, InvalidRequestError
from assistant.core.resources import Resources
from assistant.core.vectorstore import ChunkPoint
from ingest.acl import AclManifest
from ingest.chunking import Chunk, Chunker
from ingest.readers import ParsedDocument, parse_file

log = logging.getLogger(__name__)

NAMESPACE = uuid.UUID("6f1c1f0e-3a9b-5e2f-9d57-2b8f1f6c0a11")
DONE_STATES = {"done", "skipped"}


def document_id(uri: str) -> str:
    """Deterministic document ID: UUIDv5 of the file's URI."""
    return str(uuid.uuid5(NAMESPACE, uri))


def chunk_id(doc_id: str, position: int, text: str) -> str:
    """Deterministic chunk (point) ID from document ID, position and the chunk's content hash."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    return str(uuid.uuid5(NAMESPACE, f"{doc_id}:{position}:{digest}"))


def detect_lang(text: str) -> str:
    """`zh` when at least a fifth of the letters are CJK ideographs, else `en`."""
    sample = text[:4000]
    cjk = sum(1 for ch in sample if "\u3400" <= ch <= "\u9fff")
    letters = sum(1 for ch in sample if ch.isalpha()) or 1
    return "zh" if cjk / letters >= 0.2 else "en"


@dataclass
class FileOutcome:
    """What happened to one file: status is one of done, skipped, failed, needs_ocr, encrypted,
    unsupported, empty, deleted."""

    source: str
    uri: str
    status: str
    reason: str = ""
    chunks: int = 0
    duration_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def iter_files(root: Path) -> Iterable[Path]:
    """Every regular file under `root`, sorted, hidden files and folders skipped."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink():
            yield path


class Ingestor:
    """Turns files into points for one process's resources.

    Args:
        resources: DB, vector store and embedder of this process.
    """

    def __init__(self, resources: Resources):
        self.res = resources
        embedder = resources.embedder
        self.embedder = embedder
        settings = resources.settings
        self.chunker = Chunker(
            lambda t: embedder.tokenizer.encode(t, add_special_tokens=False),
            max_tokens=embedder.max_text_tokens,
            chunk_tokens=settings.chunk_size_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
        )
        resources.store.ensure_collection(embedder.dim)

    # -- one run -------------------------------------------------------------------------------
    def sync(
        self,
        path: Path,
        *,
        acl: AclManifest | None = None,
        job_id: int | None = None,
        on_file: Callable[[FileOutcome], None] | None = None,
        on_total: Callable[[int], None] | None = None,
    ) -> list[FileOutcome]:
        """Ingest a folder recursively, or one file; return one outcome per file.

        For a folder, files that vanished since the last sync of the same folder lose their chunks
        (outcome `deleted`). `source` in outcomes is the path relative to `path` (the file name for
        a single file).

        Raises:
            InvalidRequestError: `path` does not exist.
        """
        path = Path(path).resolve()
        if not path.exists():
            raise InvalidRequestError(f"ingest path {path} does not exist")
        root, files = (path, list(iter_files(path))) if path.is_dir() else (path.parent, [path])
        manifest = acl or AclManifest()
        db = self.res.db
        with db.session() as session:
            source = session.scalar(select(Source).where(Source.uri == root.as_uri()))
            if source is None:
                source = Source(kind="folder", uri=root.as_uri())
                session.add(source)
                session.flush()
            if acl is not None or source.acl_manifest is None:
                source.acl_manifest = manifest.to_dict()
            else:
                manifest = AclManifest.from_dict(source.acl_manifest)
            if job_id is None:
                job = Job(kind="sync", source_id=source.id, params={"path": str(path)})
                session.add(job)
                session.flush()
                job_id = job.id
            job = session.get(Job, job_id)
            job.status, job.started_at, job.attempts = "running", _now(), job.attempts + 1
            source_id = source.id
        if on_total:
            on_total(len(files))

        outcomes: list[FileOutcome] = []
        try:
            for file in files:
                outcome = self._ingest_file(file, root=root, source_id=source_id, acl=manifest.acl_for(file.relative_to(root).as_posix()))
                outcomes.append(outcome)
                self._record(job_id, outcome)
                if on_file:
                    on_file(outcome)
            if path.is_dir():
                for outcome in self._delete_missing(source_id, {f.resolve().as_uri() for f in files}):
                    outcomes.append(outcome)
                    self._record(job_id, outcome)
                    if on_file:
                        on_file(outcome)
        except BaseException as exc:
            with db.session() as session:
                job = session.get(Job, job_id)
                job.status, job.finished_at, job.reason = "failed", _now(), f"{type(exc).__name__}: {exc}"
            raise
        with db.session() as session:
            job = session.get(Job, job_id)
            totals: dict[str, int] = {}
            for o in outcomes:
                totals[o.status] = totals.get(o.status, 0) + 1
            totals["chunks"] = sum(o.chunks for o in outcomes if o.status == "done")
            job.status, job.finished_at, job.totals = "done", _now(), totals
            session.get(Source, source_id).last_synced_at = _now()
        return outcomes

    # -- one file ------------------------------------------------------------------------------
    def _ingest_file(self, file: Path, *, root: Path, source_id: int, acl: list[str]) -> FileOutcome:
        started = time.perf_counter()
        rel = file.relative_to(root).as_posix()
        uri = file.resolve().as_uri()
        doc_id = document_id(uri)
        store = self.res.store
        try:
            data = file.read_bytes()
        except OSError as exc:
            return FileOutcome(rel, uri, "failed", f"cannot read the file: {exc}")
        content_hash = hashlib.sha256(data).hexdigest()
        with self.res.db.session() as session:
            doc = session.get(Document, doc_id)
            if doc is None:
                doc = Document(id=doc_id, source_id=source_id, path=rel, uri=uri)
                session.add(doc)
            unchanged = (
                doc.content_hash == content_hash
                and doc.embedding_model == self.embedder.name
                and doc.deleted_at is None
                and (doc.status == "done" and store.count(doc_id=doc_id) == doc.chunk_count or doc.status not in ("done", "queued", "running"))
            )
            if unchanged:
                reason = "unchanged"
                if sorted(doc.acl or []) != sorted(acl):
                    store.set_payload(doc_id=doc_id, payload={"acl": acl})
                    doc.acl = acl
                    reason = "unchanged; ACL updated"
                return FileOutcome(rel, uri, "skipped", reason, doc.chunk_count, time.perf_counter() - started)
            doc.status, doc.source_id, doc.path, doc.deleted_at = "running", source_id, rel, None

        try:
            parsed = parse_file(file)
            chunks = self.chunker.chunk(parsed)
            if not chunks:
                raise IngestError(f"{file.name}: no text found", status="empty")
            new_ids = self._upsert_chunks(doc_id, rel, uri, parsed, chunks, acl, content_hash)
            status, reason = "done", ""
        except IngestError as exc:
            new_ids, status, reason = set(), exc.status, exc.message
        except Exception as exc:  # a parser bug must not stop the batch
            log.exception("ingesting %s failed", file)
            new_ids, status, reason = set(), "failed", f"{type(exc).__name__}: {exc}"
        stale = store.scroll_ids(doc_id=doc_id) - new_ids
        store.delete(sorted(stale))
        with self.res.db.session() as session:
            doc = session.get(Document, doc_id)
            doc.status, doc.reason, doc.chunk_count = status, reason, len(new_ids)
            doc.content_hash, doc.size_bytes, doc.acl = content_hash, len(data), acl
            doc.embedding_model = self.embedder.name
            if status == "done":
                doc.title, doc.mime, doc.page_count = parsed.title, parsed.mime, parsed.page_count
        return FileOutcome(rel, uri, status, reason, len(new_ids), time.perf_counter() - started)

    def _upsert_chunks(
        self, doc_id: str, rel: str, uri: str, parsed: ParsedDocument, chunks: list[Chunk], acl: list[str], content_hash: str
    ) -> set[str]:
        vectors = self.embedder.embed_passages([c.embed_text for c in chunks])
        lang = detect_lang(" ".join(c.text for c in chunks[:5]))
        points = []
        for chunk, vector in zip(chunks, vectors):
            points.append(
                ChunkPoint(
                    id=chunk_id(doc_id, chunk.position, chunk.text),
                    dense=vector.tolist(),
                    sparse=sparse.encode_document(chunk.embed_text),
                    payload={
                        "doc_id": doc_id,
                        "chunk_index": chunk.position,
                        "text": chunk.text,
                        "title": parsed.title,
                        "heading": chunk.heading,
                        "page": chunk.page,
                        "source": rel,
                        "uri": uri,
                        "acl": acl,
                        "lang": lang,
                        "content_hash": content_hash,
                    },
                )
            )
        for start in range(0, len(points), 256):
            self.res.store.upsert(points[start : start + 256])
        return {p.id for p in points}

    def _delete_missing(self, source_id: int, present: set[str]) -> list[FileOutcome]:
        outcomes = []
        with self.res.db.session() as session:
            docs = session.scalars(
                select(Document).where(Document.source_id == source_id, Document.deleted_at.is_(None))
            ).all()
            for doc in docs:
                if doc.uri in present:
                    continue
                self.res.store.delete(sorted(self.res.store.scroll_ids(doc_id=doc.id)))
                doc.deleted_at, doc.status, doc.chunk_count = _now(), "deleted", 0
                outcomes.append(FileOutcome(doc.path, doc.uri, "deleted", "removed at the source"))
        return outcomes

    def _record(self, job_id: int, outcome: FileOutcome) -> None:
        with self.res.db.session() as session:
            session.add(
                JobItem(
                    job_id=job_id, path=outcome.source, document_id=document_id(outcome.uri),
                    status=outcome.status, reason=outcome.reason, chunks=outcome.chunks,
                    duration_s=outcome.duration_s,
                )
            )


def _now() -> datetime:
    return datetime.now(timezone.utc)
