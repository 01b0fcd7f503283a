"""The index format, defined once: a chunk's point ID, its vectors and its payload as ingestion writes
them and retrieval reads them back.

A point in the collection is one chunk (`ChunkPoint`):

- `id`: `chunk_id(doc_id, position, text)`, a UUIDv5 under `NAMESPACE`; the document's own ID is
  `document_id(uri)`. Both are deterministic, so a re-run of ingestion writes the same points.
- `dense`: the embedding model's vector of the chunk's passage text (title and heading path before
  the text, `passages.heading_prefix`), `(dim,)` float32.
- `sparse`: the BM25 term-frequency vector of the same passage text (`sparse.encode_document`).
- `payload`: a `ChunkPayload`, stored as a plain mapping under its field names. Of those, `acl`,
  `doc_id` and `content_hash` carry keyword indexes (`vectorstore.base.INDEXED_KEYWORDS`); `acl`
  and `source` are rewritten in place when a document's ACL or path changes.

Stored keys and values are those of every release so far, so existing collections read back unchanged.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from assistant.core.index import sparse
from assistant.core.vectorstore.base import ChunkPoint

NAMESPACE = uuid.UUID("6f1c1f0e-3a9b-5e2f-9d57-2b8f1f6c0a11")


def document_id(uri: str) -> str:
    """Deterministic document ID: UUIDv5 of the file's URI (`file:///...`, `#name` for an attachment)."""
    return str(uuid.uuid5(NAMESPACE, uri))


def chunk_id(doc_id: str, position: int, text: str) -> str:
    """Deterministic chunk (point) ID from document ID, position and the SHA-1 of the chunk's text."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    return str(uuid.uuid5(NAMESPACE, f"{doc_id}:{position}:{digest}"))


@dataclass(frozen=True)
class ChunkPayload:
    """The payload of one chunk's point, field for field as stored (`to_stored`, `from_stored`).

    Attributes:
        doc_id: the document's ID (`document_id` of `uri`).
        chunk_index: the chunk's position in its document, 0-based, in reading order.
        text: the chunk's text as shown to readers (without the title and heading prefix).
        title: the document's title ("" when it has none).
        heading: the heading path of the chunk's section (`Setup > Laptops`, "" when none).
        page: 1-based page (PDF, slide) the chunk starts on; None for formats without pages.
        source: the file's path relative to its source folder (`#name` appended for an attachment).
        uri: the file's URI (`file:///...`, `#name` appended for an attachment).
        acl: the principals who may read the chunk; every query filters on it.
        lang: the document's language, `en` or `zh`.
        content_hash: SHA-256 (hex) of the file's bytes.
        ocr: the text was recognised by OCR in a scanned page or an image (citations say so).
    """

    doc_id: str
    chunk_index: int
    text: str
    title: str
    heading: str
    page: int | None
    source: str
    uri: str
    acl: list[str] = field(default_factory=list)
    lang: str = ""
    content_hash: str = ""
    ocr: bool = False

    def to_stored(self) -> dict[str, Any]:
        """The payload mapping to store, its keys in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_stored(cls, payload: Mapping[str, Any]) -> ChunkPayload:
        """The payload of a stored point; a missing key reads as empty (0 for `chunk_index`, None for
        `page`), so points written without one of the later fields still read."""
        return cls(
            doc_id=str(payload.get("doc_id", "")),
            chunk_index=int(payload.get("chunk_index", 0)),
            text=str(payload.get("text", "")),
            title=str(payload.get("title", "")),
            heading=str(payload.get("heading", "")),
            page=payload.get("page"),
            source=str(payload.get("source", "")),
            uri=str(payload.get("uri", "")),
            acl=list(payload.get("acl") or []),
            lang=str(payload.get("lang", "")),
            content_hash=str(payload.get("content_hash", "")),
            ocr=bool(payload.get("ocr", False)),
        )

    def evidence_text(self) -> str:
        """Title, heading and text joined by spaces: the words a hit shows as evidence of a match."""
        return " ".join((self.title, self.heading, self.text))


def chunk_point(payload: ChunkPayload, *, dense: Sequence[float], passage: str) -> ChunkPoint:
    """The point of one chunk.

    Args:
        payload: the chunk's payload; its `doc_id`, `chunk_index` and `text` give the point ID.
        dense: the embedding of `passage`, `(dim,)` floats.
        passage: the text that was embedded (title and heading first, as the chunker cut it); its
            sparse vector is computed here.
    """
    return ChunkPoint(
        id=chunk_id(payload.doc_id, payload.chunk_index, payload.text),
        dense=dense,
        sparse=sparse.encode_document(passage),
        payload=payload.to_stored(),
    )
