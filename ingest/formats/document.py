"""The parsed form of one file: sections of text with pages and headings, plus attachments."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from assistant.core.errors import IngestError

_APP_PREFIX = re.compile(r"^Microsoft (Word|PowerPoint|Excel) - ")
_PLACEHOLDER_TITLE = re.compile(
    r"^(title|untitled|presentation|powerpoint presentation|word document|document\d*|slide \d+)$"
    r"|\.(jpe?g|png|tiff?|bmp|docx?|pptx?|xlsx?|pdf|txt)$",
    re.I,
)
# C0 controls except tab, line feed and carriage return, plus DEL: deleted; form feed ends a line.
_CONTROLS = {c: None for c in (*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F)} | {0x0C: "\n"}


@dataclass
class Section:
    """A run of text from one place of a document: `page` (1-based) for paged formats, slide number for
    decks; `ocr` is True for text recognised in an image (citations say so)."""

    text: str
    page: int | None = None
    heading: str = ""
    ocr: bool = False


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
        notes: sentences for the document's status although it was indexed (pages recognised by
            OCR, rows left out past a limit); a streamed document adds its notes as it is read.
        stream: the sections not read yet, for a table format read row by row (`finished_stream`);
            `parse_file` reads them into `sections` unless its caller asks for the stream, so that
            a workbook of any length can be chunked and handed over a part at a time.
    """

    title: str
    mime: str
    sections: list[Section] = field(default_factory=list)
    page_count: int | None = None
    markdown: bool = False
    attachments: list[tuple[str, bytes]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stream: Iterator[Section] | None = None

    def all_sections(self) -> Iterator[Section]:
        """The sections in reading order: `sections`, then what `stream` still holds (read once)."""
        yield from self.sections
        if self.stream is not None:
            stream, self.stream = self.stream, None
            yield from stream

    def materialise(self) -> ParsedDocument:
        """Read `stream` into `sections` (its errors, e.g. `too_large` or `empty`, are raised here)."""
        if self.stream is not None:
            self.sections = list(self.all_sections())
        return self


def real_title(candidate: str | None) -> str:
    """`candidate` (a title from file metadata) cleaned, or '' for an application's placeholder.

    Producers fill the title field with 'Presentation', 'Word Document' or the scanned image's file
    name; such a title would mislead every chunk it prefixes, so the caller falls back to the stem.

    Args:
        candidate: the metadata title (None or '' when absent).

    Returns:
        The title with whitespace collapsed and a 'Microsoft Word - ' prefix removed, or ''.
    """
    title = _APP_PREFIX.sub("", " ".join(str(candidate or "").split()))
    return "" if _PLACEHOLDER_TITLE.search(title) else title


def finish(doc: ParsedDocument, *, name: str) -> ParsedDocument:
    """Remove control characters, drop blank sections and refuse a document without text.

    Control characters (NUL from unmapped PDF glyphs, form feeds, vertical tabs) carry no meaning
    for search and break some consumers (PostgreSQL text refuses NUL).

    Args:
        doc: the document a format reader built.
        name: the file name, for the message.

    Returns:
        `doc`, its blank sections removed.

    Raises:
        IngestError(status="empty"): no section holds any text (attachments alone do not count: the
            caller ingests them separately, so the carrier itself is reported empty).
    """
    for section in doc.sections:
        section.text = section.text.translate(_CONTROLS)
    doc.sections = [s for s in doc.sections if s.text and s.text.strip()]
    if not doc.sections:
        extra = f" ({len(doc.attachments)} attachment(s) are ingested on their own)" if doc.attachments else ""
        raise IngestError(f"{name}: the document contains no text{extra}", status="empty", attachments=doc.attachments)
    return doc


def finished_stream(sections: Iterable[Section], *, name: str, attachments: list | None = None) -> Iterator[Section]:
    """`finish` for sections read one at a time: control characters removed and blank sections
    dropped as they pass; after the last one, the document without text is refused.

    Raises:
        IngestError(status="empty"): while iterated, when no section held any text.
    """
    found = False
    for section in sections:
        section.text = section.text.translate(_CONTROLS)
        if section.text and section.text.strip():
            found = True
            yield section
    if not found:
        raise IngestError(f"{name}: the document contains no text", status="empty", attachments=list(attachments or []))


class SectionBuilder:
    """Gathers a document's lines into sections: each heading closes the section before it.

    Used by readers that walk a body in order (DOCX, ODT); the heading line itself stays in the
    text, so that a chunk cut from the section's start still reads naturally.
    """

    def __init__(self) -> None:
        self._sections: list[Section] = []
        self._heading = ""
        self._lines: list[str] = []

    def start(self, heading: str) -> None:
        """Close the open section and begin one under `heading` (its first line).

        Args:
            heading: the heading's text.
        """
        self._flush()
        self._heading = heading
        self._lines.append(heading)

    def add(self, text: str) -> None:
        """Append one line (paragraph, table) to the current section.

        Args:
            text: the line; blank text is ignored.
        """
        if text and text.strip():
            self._lines.append(text)

    def sections(self) -> list[Section]:
        """Close the open section.

        Returns:
            All sections so far, in order.
        """
        self._flush()
        return list(self._sections)

    def _flush(self) -> None:
        if self._lines:
            self._sections.append(Section("\n".join(self._lines), heading=self._heading))
        self._lines = []
