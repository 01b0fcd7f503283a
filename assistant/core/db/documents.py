"""Documents as readers see them: which ones a principal may open (by ID or by source path), their
public fields, and the current version (content hash) answer caches validate against; the ACLs the
stored-text rule (`assistant.core.visibility`) reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlparse

from sqlalchemy import select

from assistant.core.db.models import Document, file_uri_path
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError
from assistant.core.principals import Principal, may_read

# Rows per `IN (...)` list: well under SQLite's and PostgreSQL's bound-parameter limits.
_IN_BATCH = 500


@dataclass(frozen=True)
class DocumentPublic:
    """What a reader may learn about a document they may open."""

    id: str
    source: str
    uri: str
    title: str
    mime: str
    size_bytes: int
    page_count: int | None
    chunk_count: int
    updated_at: datetime | None

    @property
    def local_path(self) -> Path | None:
        """The file behind a `file://` URI, else None."""
        parsed = urlparse(self.uri)
        return file_uri_path(self.uri) if parsed.scheme == "file" else None


def readable_versions(db: Database, doc_ids: Iterable[str], *, principal: Principal) -> dict[str, str]:
    """`{doc_id: content_hash}` of those of `doc_ids` that exist, are indexed and `principal` may read.

    A document that was deleted, failed its last ingestion or had its ACL narrowed is absent from the
    result, so that whatever was derived from it is treated as stale.

    Args:
        db: the SQL database.
        doc_ids: document IDs (any order; duplicates are fine).
        principal: the reader.

    Returns:
        The content hash (SHA-256 hex) of each readable document.
    """
    ids = sorted(set(doc_ids))
    if not ids:
        return {}
    with db.session() as session:
        rows = session.execute(
            select(Document.id, Document.content_hash, Document.acl).where(
                Document.id.in_(ids), Document.deleted_at.is_(None), Document.status == "done"
            )
        )
        return {doc_id: content_hash for doc_id, content_hash, acl in rows if may_read(acl, principal)}


def readable_sources(db: Database, sources: Iterable[str], *, principal: Principal) -> set[str]:
    """Those of `sources` (paths relative to an ingested folder, as chunks carry them) that name an
    indexed document `principal` may read.

    A path of a deleted, failed or unreadable document is absent, as one that was never ingested:
    the result tells nothing about documents the principal may not open.
    """
    wanted = sorted(set(sources))
    if not wanted:
        return set()
    with db.session() as session:
        rows = session.execute(
            select(Document.path, Document.acl).where(
                Document.path.in_(wanted), Document.deleted_at.is_(None), Document.status == "done"
            )
        )
        return {path for path, acl in rows if may_read(acl, principal)}


def readable_document(db: Database, doc_id: str, *, principal: Principal) -> DocumentPublic:
    """The document `doc_id` if `principal` may open it. Admins get no exception: same ACLs.

    Raises:
        NotFoundError: no such document, deleted, not indexed, or not readable by `principal`; the
            message is the same in every case so that it tells nothing about documents one may not open.
    """
    with db.session() as session:
        doc = session.get(Document, doc_id)
        if doc is None or doc.deleted_at is not None or doc.status != "done" or not may_read(doc.acl, principal):
            raise NotFoundError(f"document '{doc_id}' not found")
        return DocumentPublic(
            id=doc.id, source=doc.path, uri=doc.uri, title=doc.title, mime=doc.mime, size_bytes=doc.size_bytes,
            page_count=doc.page_count, chunk_count=doc.chunk_count, updated_at=doc.updated_at,
        )


def content_hash(db: Database, doc_id: str) -> str | None:
    """The SHA-256 (hex) of document `doc_id`'s content as it was indexed; None for an unknown ID."""
    with db.session() as session:
        return session.scalar(select(Document.content_hash).where(Document.id == doc_id))


def acls_by_id(db: Database, doc_ids: Iterable[str]) -> dict[str, tuple[list[str], bool]]:
    """`{doc_id: (acl, deleted)}` of those of `doc_ids` that have a row (deleted ones included)."""
    ids = sorted(set(doc_ids))
    found: dict[str, tuple[list[str], bool]] = {}
    with db.session() as session:
        for start in range(0, len(ids), _IN_BATCH):
            for doc_id, acl, deleted in session.execute(
                select(Document.id, Document.acl, Document.deleted_at).where(Document.id.in_(ids[start:start + _IN_BATCH]))
            ):
                found[doc_id] = (list(acl or []), deleted is not None)
    return found


def acls_by_path(db: Database, paths: Iterable[str]) -> dict[str, list[tuple[list[str], bool]]]:
    """`{path: [(acl, deleted), ...]}`, one pair per document row of each of `paths` that has any."""
    wanted = sorted(set(paths))
    found: dict[str, list[tuple[list[str], bool]]] = {}
    with db.session() as session:
        for start in range(0, len(wanted), _IN_BATCH):
            for path, acl, deleted in session.execute(
                select(Document.path, Document.acl, Document.deleted_at).where(Document.path.in_(wanted[start:start + _IN_BATCH]))
            ):
                found.setdefault(path, []).append((list(acl or []), deleted is not None))
    return found
