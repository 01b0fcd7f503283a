"""The current version (content hash) of documents a reader may open: what answer caches validate against."""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import select

from assistant.core.auth.access import may_read
from assistant.core.db.models import Document
from assistant.core.db.session import Database
from assistant.core.principals import Principal


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
