"""The parsed form of one file: sections of text with pages and headings, plus attachments."""

from __future__ import annotations

from dataclasses import dataclass, field

from assistant.core.errors import IngestError


@dataclass
class Section:
    """A run of text from one place of a document: `page` (1-based) for paged formats, slide number for decks."""

    text: str
    page: int | None = None
    heading: str = ""


@dataclass
class ParsedDocument:
    """One file's text.

    Attributes:
        title: the document's own title, or the file stem.
        mime: the MIME type of the format that was read.
        sections: text in reading order; never empty for a document returned by `parse_file`.
        page_count: pages (PDF) or slides (decks); None for unpaged formats.
        markdown: the sections are Markdown (the chunker splits them on headings).
        attachments: (file name, bytes) of files carried inside this one (e-mail attachments, PDF
            embedded files); the caller ingests each as its own document.
    """

    title: str
    mime: str
    sections: list[Section] = field(default_factory=list)
    page_count: int | None = None
    markdown: bool = False
    attachments: list[tuple[str, bytes]] = field(default_factory=list)


def finish(doc: ParsedDocument, *, name: str) -> ParsedDocument:
    """Drop blank sections and refuse a document without text.

    Args:
        doc: the document a format reader built.
        name: the file name, for the message.

    Returns:
        `doc`, its blank sections removed.

    Raises:
        IngestError(status="empty"): no section holds any text (attachments alone do not count: the
            caller ingests them separately, so the carrier itself is reported empty).
    """
    doc.sections = [s for s in doc.sections if s.text and s.text.strip()]
    if not doc.sections:
        extra = f" ({len(doc.attachments)} attachment(s) are ingested on their own)" if doc.attachments else ""
        raise IngestError(f"{name}: the document contains no text{extra}", status="empty")
    return doc
