"""File formats to sections of text (with page numbers and headings) through llama-index readers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.decoding import decode_text


@dataclass
class Section:
    """A run of text from one place of a document: `page` (1-based) for paged formats."""

    text: str
    page: int | None = None
    heading: str = ""


@dataclass
class ParsedDocument:
    title: str
    mime: str
    sections: list[Section] = field(default_factory=list)
    page_count: int | None = None
    markdown: bool = False


MARKDOWN = {".md", ".markdown", ".mdx"}
TEXT = {".txt", ".text", ".rst", ".log", ".csv", ".tsv", ".json", ".yaml", ".yml"}
HTML = {".html", ".htm", ".xhtml"}
PDF = {".pdf"}
DOCX = {".docx"}
SUPPORTED = MARKDOWN | TEXT | HTML | PDF | DOCX

_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.S)
_H1 = re.compile(r"^#\s+(.+)$", re.M)


def parse_file(path: Path) -> ParsedDocument:
    """Read one file into sections.

    Raises:
        IngestError: with status `unsupported` (format), `encrypted`, `needs_ocr` or `failed`.
    """
    suffix = path.suffix.lower()
    if suffix in MARKDOWN:
        return _markdown(path)
    if suffix in TEXT:
        return ParsedDocument(title=path.stem, mime="text/plain", sections=[Section(decode_text(path.read_bytes(), name=path.name))])
    if suffix in HTML:
        return _html(path)
    if suffix in PDF:
        return _pdf(path)
    if suffix in DOCX:
        return _docx(path)
    raise IngestError(f"{path.name}: the format '{suffix or 'no extension'}' is not supported", status="unsupported")


def _markdown(path: Path) -> ParsedDocument:
    text = decode_text(path.read_bytes(), name=path.name)
    front = _FRONT_MATTER.match(text)
    title = ""
    if front:
        m = re.search(r"^title:\s*[\"']?(.+?)[\"']?\s*$", front.group(), re.M)
        title = m.group(1) if m else ""
        text = text[front.end():]
    if not title:
        m = _H1.search(text)
        title = m.group(1).strip() if m else path.stem.replace("_", " ").replace("-", " ")
    return ParsedDocument(title=title, mime="text/markdown", sections=[Section(text)], markdown=True)


def _html(path: Path) -> ParsedDocument:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_text(path.read_bytes(), name=path.name), "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    title = (soup.title.get_text(strip=True) if soup.title else "") or path.stem
    body = soup.body or soup
    # Block elements end paragraphs; keep their text apart so that sentences are not glued together.
    text = body.get_text("\n", strip=True)
    return ParsedDocument(title=title, mime="text/html", sections=[Section(text)])


def _pdf(path: Path) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise IngestError(f"{path.name}: the PDF is encrypted with a password", status="encrypted")
            except NotImplementedError as exc:
                raise IngestError(f"{path.name}: the PDF is encrypted ({exc})", status="encrypted") from exc
        sections = []
        for number, page in enumerate(reader.pages, start=1):
            text = page.extract_text() or ""
            if text.strip():
                sections.append(Section(text, page=number))
        title = (reader.metadata.title if reader.metadata and reader.metadata.title else "") or path.stem
        page_count = len(reader.pages)
    except FileNotDecryptedError as exc:
        raise IngestError(f"{path.name}: the PDF is encrypted with a password", status="encrypted") from exc
    except PdfReadError as exc:
        raise IngestError(f"{path.name}: the PDF is malformed ({exc})", status="failed") from exc
    if not sections and page_count:
        raise IngestError(f"{path.name}: {page_count} page(s) but no text layer (scanned?)", status="needs_ocr")
    return ParsedDocument(title=str(title), mime="application/pdf", sections=sections, page_count=page_count)


def _docx(path: Path) -> ParsedDocument:
    from llama_index.readers.file import DocxReader

    try:
        docs = DocxReader().load_data(path)
    except Exception as exc:  # zipfile.BadZipFile, KeyError on a broken package, ...
        raise IngestError(f"{path.name}: the DOCX file cannot be read ({type(exc).__name__}: {exc})") from exc
    return ParsedDocument(
        title=path.stem,
        mime="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        sections=[Section(d.text) for d in docs if d.text.strip()],
    )
