"""A document's original bytes for a reader its ACL admits, exactly as they were indexed."""

from __future__ import annotations

import hashlib
import os
import stat

from assistant.core.db.documents import DocumentPublic, content_hash, readable_document
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError
from assistant.core.principals import Principal


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
    expected = content_hash(db, doc_id)
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
