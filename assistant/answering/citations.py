"""Map the `[n]` markers of an answer to the sources they name."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Sequence

from assistant.retrieval import RetrievedChunk

SNIPPET_CHARS = 280


@dataclass
class Citation:
    """A source cited by an answer. `n` is the marker number; `inline` is False when the model gave no
    marker and the sources it was given are listed instead."""

    n: int
    source: str
    uri: str
    doc_id: str
    chunk_id: str
    title: str
    heading: str
    page: int | None
    score: float
    snippet: str
    inline: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def cited_numbers(answer: str) -> list[int]:
    """Distinct marker numbers in order of first appearance (`[1]`, `[1, 3]`)."""
    seen: list[int] = []
    for match in re.finditer(r"\[([\d,，\s]+)\]", answer):
        for part in re.split(r"[,，\s]+", match.group(1)):
            if part.isdigit() and int(part) not in seen:
                seen.append(int(part))
    return seen


def make_citations(answer: str, sources: Sequence[RetrievedChunk]) -> list[Citation]:
    """Citations for the markers in `answer` that name a real source; if there are none, every
    source the answer was generated from, in prompt order (marked `inline=False`): without markers
    nothing says which of them the model used, so none is left out."""

    def cite(n: int, chunk: RetrievedChunk, inline: bool) -> Citation:
        snippet = " ".join(chunk.text.split())[:SNIPPET_CHARS]
        return Citation(
            n=n, source=chunk.source, uri=chunk.uri, doc_id=chunk.doc_id, chunk_id=chunk.chunk_id,
            title=chunk.title, heading=chunk.heading, page=chunk.page, score=chunk.score,
            snippet=snippet, inline=inline,
        )

    numbers = [n for n in cited_numbers(answer) if 1 <= n <= len(sources)]
    if numbers:
        return [cite(n, sources[n - 1], True) for n in numbers]
    return [cite(i, c, False) for i, c in enumerate(sources, start=1)]
