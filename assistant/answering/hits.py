"""A search's hits as `assistant search` prints them, whether it searched itself or the server did."""

from __future__ import annotations

from typing import Any

from assistant.answering.injection import without_instructions
from assistant.retrieval.retriever import RetrievedChunk


def hit_rows(chunks: list[RetrievedChunk]) -> list[dict[str, Any]]:
    """One dict per chunk, best first: `source`, `uri`, `chunk_id`, `doc_id`, `title`, `heading`,
    `page` (None: not paged), `score` (the retriever's, higher is better) and `text` (without
    instruction-like lines: `without_instructions`). The `--json` output of `assistant search`."""
    return [
        {"source": c.source, "uri": c.uri, "chunk_id": c.chunk_id, "doc_id": c.doc_id, "title": c.title,
         "heading": c.heading, "page": c.page, "score": c.score, "text": without_instructions(c.text)}
        for c in chunks
    ]
