"""Whether a principal may open a document: the document's ACL checked against the principal's tokens."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterable
from urllib.parse import urlparse

from sqlalchemy import select

from assistant.core.db.models import Document, file_uri_path
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError
from assistant.core.principals import Principal


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


def may_read(acl: list[str] | None, principal: Principal) -> bool:
    """True when one of the principal's ACL tokens is in `acl` (an empty ACL admits nobody)."""
    return bool(set(acl or ()) & set(principal.acl_tokens))


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


def read_original(db: Database, doc_id: str, *, principal: Principal) -> tuple[DocumentPublic, bytes]:
    """The document's original bytes, exactly as they were indexed, for a reader its ACL admits.

    The ACL was computed for the content that was indexed: a file replaced since (by a symbolic
    link to a restricted document or a system file, or by new text under other rules) is refused
    until the next sync has read it. Hence: no symbolic link anywhere in the path, `O_NOFOLLOW` on
    the open, and the SHA-256 of what is read must equal the indexed `content_hash`.

    Returns:
        `(document, content)`.

    Raises:
        NotFoundError: as `readable_document`, or the file is gone, is a link, or has changed since
            it was indexed (no content is returned then).
    """
    doc = readable_document(db, doc_id, principal=principal)
    with db.session() as session:
        expected = session.get(Document, doc_id).content_hash
    path = doc.local_path
    changed = NotFoundError(
        f"document '{doc_id}' not found at its source as it was indexed (moved, replaced or changed since); "
        "the next sync of its source will pick up the current file"
    )
    if path is None or os.path.realpath(path) != str(path):
        raise changed
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise changed from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise changed
        content = handle.read(doc.size_bytes + 1)
    if len(content) != doc.size_bytes or hashlib.sha256(content).hexdigest() != expected:
        raise changed
    return doc, content
