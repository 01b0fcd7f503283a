"""The ingestion pipeline's writes on document rows (`ingest.sync_run`): claiming a document for a sync
in one transaction that also decides whether it is unchanged, recording its outcome, and marking those
gone from their source deleted. Whether a document is unchanged, and what its points are told when its
ACL or path changed, are the caller's: it passes them in as functions, run inside the transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select, update

from assistant.core.db.models import Document, JobItem, utcnow
from assistant.core.db.session import Database


@dataclass(frozen=True)
class StoredDocument:
    """A document's row as a sync compares it with the file it read: `status` (None for a row made
    by this claim), the SHA-256 (hex) of the content and the embedding model of its last ingestion,
    its chunk count, and whether it was deleted at its source."""

    id: str
    status: str | None
    content_hash: str | None
    embedding_model: str | None
    chunk_count: int | None
    deleted: bool


@dataclass(frozen=True)
class UnchangedDocument:
    """A claimed document found unchanged: its chunk count, whether its ACL was updated, and the URIs
    of its attachments' rows (not read again, so still present)."""

    chunk_count: int
    acl_updated: bool
    attachment_uris: list[str]


@dataclass(frozen=True)
class ParsedFile:
    """What a successful parse tells about a document: its title, MIME type and page count (None
    where the format has no pages)."""

    title: str
    mime: str
    page_count: int | None


def claim_document(
    db: Database,
    *,
    doc_id: str,
    uri: str,
    path: str,
    source_id: int,
    acl: list[str],
    item_id: int,
    unchanged: Callable[[StoredDocument], bool],
    refresh_points: Callable[[list[str] | None, str | None], None],
) -> UnchangedDocument | None:
    """In one transaction: the row of document `doc_id` (made when new), and job item `item_id` marked
    running for it; the document marked running from source `source_id` at `path` as well, unless
    `unchanged` says it is unchanged: then its ACL and path are brought up to date instead.

    Args:
        uri: its URI (stored with a new row).
        path: its path relative to the source root.
        acl: the principals who may read it now.
        unchanged: decides from the stored row whether the document needs no parse.
        refresh_points: called for an unchanged document whose ACL (first argument) or path (second)
            changed, with the new value or None where it did not change; it updates the points.

    Returns:
        The unchanged document, or None when it was claimed for parsing.
    """
    with db.session() as session:
        doc = session.get(Document, doc_id)
        if doc is None:
            doc = Document(id=doc_id, source_id=source_id, path=path, uri=uri)
            session.add(doc)
        stored = StoredDocument(
            id=doc_id, status=doc.status, content_hash=doc.content_hash, embedding_model=doc.embedding_model,
            chunk_count=doc.chunk_count, deleted=doc.deleted_at is not None,
        )
        found = None
        if unchanged(stored):
            new_acl = new_path = None
            if sorted(doc.acl or []) != sorted(acl):
                new_acl = doc.acl = acl
            if doc.path != path or doc.source_id != source_id:  # taken over by an enclosing source
                new_path, doc.path, doc.source_id = path, path, source_id
            if new_acl is not None or new_path is not None:
                refresh_points(new_acl, new_path)
            attachments = session.scalars(select(Document.uri).where(Document.uri.startswith(uri + "#", autoescape=True)))
            found = UnchangedDocument(doc.chunk_count, new_acl is not None, list(attachments))
        else:
            doc.status, doc.source_id, doc.path, doc.deleted_at = "running", source_id, path, None
        session.execute(update(JobItem).where(JobItem.id == item_id).values(status="running", document_id=doc_id))
    return found


def finish_document(
    db: Database,
    doc_id: str,
    *,
    status: str,
    reason: str,
    chunk_count: int,
    content_hash: str,
    size_bytes: int,
    acl: list[str],
    embedding_model: str,
    parsed: ParsedFile | None,
) -> None:
    """Record the outcome of document `doc_id`'s ingestion: `status` (done, failed, needs_ocr, ...)
    and its `reason`, the points written, the content (SHA-256 hex, bytes) and ACL they came from,
    the embedding model; and when `parsed` (a done file) its title, MIME type and page count."""
    with db.session() as session:
        doc = session.get_one(Document, doc_id)
        doc.status, doc.reason, doc.chunk_count = status, reason, chunk_count
        doc.content_hash, doc.size_bytes, doc.acl = content_hash, size_bytes, acl
        doc.embedding_model = embedding_model
        if parsed is not None:
            doc.title, doc.mime, doc.page_count = parsed.title, parsed.mime, parsed.page_count


def live_documents(db: Database, source_id: int) -> list[tuple[str, str, str]]:
    """`(id, path, uri)` of every document of source `source_id` not deleted at the source."""
    with db.session() as session:
        docs = session.scalars(
            select(Document).where(Document.source_id == source_id, Document.deleted_at.is_(None))
        ).all()
        return [(doc.id, doc.path, doc.uri) for doc in docs]


def mark_document_deleted(db: Database, doc_id: str) -> None:
    """Mark document `doc_id` deleted at its source now, with no chunks."""
    with db.session() as session:
        doc = session.get_one(Document, doc_id)
        doc.deleted_at, doc.status, doc.chunk_count = utcnow(), "deleted", 0
