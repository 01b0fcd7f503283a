"""How a chunk reads to a model: its document title and heading path before its text.

Ingestion embeds chunks in this form and the reranker scores them in it, so both models see where a
passage sits in its document (a section titled "Laptop setup" under "Computer standards").
"""

from __future__ import annotations


def heading_prefix(title: str, heading: str) -> str:
    """`"Title — Heading > Sub\\n"`, `""` when both are empty; a heading that repeats the title keeps one."""
    parts = [p for p in (title.strip(), heading.strip()) if p]
    # Avoid "Passwords — Passwords" when the H1 is the title.
    if len(parts) == 2 and parts[1].split(" > ")[0].casefold() == parts[0].casefold():
        parts = [parts[1]]
    return (" — ".join(parts) + "\n") if parts else ""


def passage_text(title: str, heading: str, text: str) -> str:
    """The chunk `text` with its `heading_prefix`, as models read it."""
    return heading_prefix(title, heading) + text
