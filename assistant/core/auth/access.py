"""Whether a principal may open a document: the document's ACL checked against the principal's tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from assistant.core.db.models import Document
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
        return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def may_read(acl: list[str] | None, principal: Principal) -> bool:
    """True when one of the principal's ACL tokens is in `acl` (an empty ACL admits nobody)."""
    return bool(set(acl or ()) & set(principal.acl_tokens))


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
