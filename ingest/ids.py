"""Deterministic identities: a document's ID from its URI, a chunk's (point's) ID from its place and text."""

from __future__ import annotations

import hashlib
import uuid

NAMESPACE = uuid.UUID("6f1c1f0e-3a9b-5e2f-9d57-2b8f1f6c0a11")


def document_id(uri: str) -> str:
    """Deterministic document ID: UUIDv5 of the file's URI (`file:///...`, `#name` for an attachment)."""
    return str(uuid.uuid5(NAMESPACE, uri))


def chunk_id(doc_id: str, position: int, text: str) -> str:
    """Deterministic chunk (point) ID from document ID, position and the chunk's content hash."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    return str(uuid.uuid5(NAMESPACE, f"{doc_id}:{position}:{digest}"))
