"""Map the `[n]` markers of an answer to the sources they name.

A citation tells the reader where a fact comes from without telling them anything about the server:
the document's path relative to its source folder (`source`) and the API route that serves the
document to readers its ACL admits (`route`), never the `file://` URI of the server's copy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from assistant.answering.injection import without_instructions
from assistant.retrieval import RetrievedChunk

SNIPPET_CHARS = 280


def document_route(doc_id: str) -> str:
    """The API route that serves document `doc_id`'s original file (`GET /api/documents/{id}/content`,
    ACL-checked there)."""
    return f"/api/documents/{doc_id}/content"


@dataclass
class Citation:
    """A source cited by an answer. `n` is the marker number; `source` the document's path relative to
    its source folder; `route` the API route of the document. `inline` is True: every citation comes
    from a marker in the answer (kept for clients of the earlier API, where False meant "listed
    although not cited"). `ocr` is True when the cited text was recognised by OCR in a scanned page or
    an image (it may hold recognition errors)."""

    n: int
    source: str
    route: str
    doc_id: str
    chunk_id: str
    title: str
    heading: str
    page: int | None
    score: float
    snippet: str
    inline: bool = True
    ocr: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def snippet_of(text: str) -> str:
    """The first `SNIPPET_CHARS` characters of a cited chunk's `text`, whitespace collapsed, without what
    the chunk addresses to the assistant (`injection.without_instructions`): a snippet is shown under
    the answer, where a planted "reply with this link" would read as the assistant's own advice."""
    return " ".join(without_instructions(text).split())[:SNIPPET_CHARS]


def cited_numbers(answer: str) -> list[int]:
    """Distinct marker numbers in order of first appearance (`[1]`, `[1, 3]`)."""
    seen: list[int] = []
    for match in re.finditer(r"\[([\d,，\s]+)\]", answer):
        for part in re.split(r"[,，\s]+", match.group(1)):
            if part.isdigit() and int(part) not in seen:
                seen.append(int(part))
    return seen


def make_citations(answer: str, sources: Sequence[RetrievedChunk]) -> list[Citation]:
    """Citations for the markers in `answer` that name a real source (1..len(sources)), in order of
    first appearance; none for an answer without markers (a grounded answer has one per sentence)."""
    out = []
    for n in cited_numbers(answer):
        if 1 <= n <= len(sources):
            chunk = sources[n - 1]
            out.append(
                Citation(
                    n=n, source=chunk.source, route=document_route(chunk.doc_id), doc_id=chunk.doc_id,
                    chunk_id=chunk.chunk_id, title=chunk.title, heading=chunk.heading, page=chunk.page,
                    score=chunk.score, snippet=snippet_of(chunk.text),
                    ocr=chunk.ocr,
                )
            )
    return out


# Closest documents listed with a "not found".
CLOSEST_DOCUMENTS = 3


def source_entries(sources: Sequence[RetrievedChunk]) -> list[dict]:
    """The numbered sources an answer is written from, as the chat's `sources` event lists them before
    the answer: `[{"n", "source", "title", "heading", "page", "route", "doc_id"}]` (no text: the reader
    opens a document through its ACL-checked `route`)."""
    return [
        {"n": n, "source": c.source, "title": c.title, "heading": c.heading, "page": c.page,
         "route": document_route(c.doc_id), "doc_id": c.doc_id}
        for n, c in enumerate(sources, start=1)
    ]


def closest_documents(chunks: Sequence[RetrievedChunk], limit: int = CLOSEST_DOCUMENTS) -> list[dict]:
    """The distinct documents among retrieved `chunks` (ACL-filtered by retrieval), best first, at most
    `limit`: what a "not found" answer offers the reader to open. `[{"source", "title", "route", "doc_id"}]`."""
    out: dict[str, dict] = {}
    for c in chunks:
        if c.doc_id not in out and len(out) < limit:
            out[c.doc_id] = {"source": c.source, "title": c.title, "route": document_route(c.doc_id), "doc_id": c.doc_id}
    return list(out.values())
