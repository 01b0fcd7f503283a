"""OpenDocument text (ODT) to sections at headings, with odfpy; tables one row per line."""

from __future__ import annotations

import zipfile
from pathlib import Path
from xml.parsers.expat import ExpatError

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, SectionBuilder, finish

MIME = "application/vnd.oasis.opendocument.text"


def read_odt(path: Path) -> ParsedDocument:
    """Parse an ODT document in body order.

    Args:
        path: the file (a zip package; the caller checked its unpacked size).

    Returns:
        One section per heading (text:h), tables as ' | '-joined rows; title from the metadata.

    Raises:
        IngestError: `encrypted` (password-protected), `failed` (unreadable), `empty`.
    """
    from odf import opendocument

    try:
        with zipfile.ZipFile(path) as archive:
            manifest = archive.read("META-INF/manifest.xml") if "META-INF/manifest.xml" in archive.namelist() else b""
        if b"encryption-data" in manifest:
            raise IngestError(f"{path.name}: the document is encrypted with a password", status="encrypted")
        document = opendocument.load(str(path))
    except (zipfile.BadZipFile, KeyError, ValueError, ExpatError) as exc:
        raise IngestError(f"{path.name}: the ODT file cannot be read ({type(exc).__name__}: {exc})") from exc
    builder = SectionBuilder()
    _walk(document.text, builder)
    sections = builder.sections()
    return finish(ParsedDocument(title=_title(document) or path.stem, mime=MIME, sections=sections), name=path.name)


def _walk(element, builder: SectionBuilder) -> None:
    for child in element.childNodes:
        local = getattr(child, "qname", (None, None))[1]
        if local == "h":
            builder.start(_text(child))
        elif local == "p":
            builder.add(_text(child))
        elif local == "table":
            builder.add(_table(child))
        elif local in ("list", "list-item", "section", "list-header", "index-body", "table-of-content"):
            _walk(child, builder)


def _text(element) -> str:
    from odf import teletype

    return " ".join(teletype.extractText(element).split())


def _table(table) -> str:
    rows = []
    for row in _descendants(table, "table-row"):
        cells = [_text(cell) for cell in row.childNodes if getattr(cell, "qname", (None, None))[1] == "table-cell"]
        if any(cells):
            rows.append(" | ".join(c for c in cells if c))
    return "\n".join(rows)


def _descendants(element, local: str):
    for child in element.childNodes:
        if getattr(child, "qname", (None, None))[1] == local:
            yield child
        elif getattr(child, "qname", None):
            yield from _descendants(child, local)


def _title(document) -> str:
    from odf import dc

    titles = document.meta.getElementsByType(dc.Title)
    return " ".join(str(titles[0]).split()) if titles else ""
