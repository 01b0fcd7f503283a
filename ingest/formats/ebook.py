"""E-books (EPUB) to one section per chapter of the reading order, with ebooklib."""

from __future__ import annotations

import zipfile
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.decoding import decode_text
from ingest.formats.document import ParsedDocument, Section, finish
from ingest.formats.html import html_sections

MIME = "application/epub+zip"


def read_epub(path: Path) -> ParsedDocument:
    """Parse an EPUB book: the spine's XHTML documents in reading order.

    Args:
        path: the file (a zip package; the caller checked its unpacked size).

    Returns:
        Sections per chapter heading, the title from the book's Dublin Core metadata.

    Raises:
        IngestError: `encrypted` (DRM-protected content), `failed` (unreadable), `empty`.
    """
    import ebooklib
    from ebooklib import epub

    try:
        with zipfile.ZipFile(path) as archive:
            if "META-INF/encryption.xml" in archive.namelist() and _drm(archive.read("META-INF/encryption.xml")):
                raise IngestError(f"{path.name}: the e-book is DRM-encrypted", status="encrypted")
        book = epub.read_epub(str(path), options={"ignore_ncx": True})
    except (zipfile.BadZipFile, KeyError, ValueError, epub.EpubException) as exc:
        raise IngestError(f"{path.name}: the EPUB file cannot be read ({type(exc).__name__}: {exc})") from exc
    sections: list[Section] = []
    for item_id, _linear in book.spine:
        item = book.get_item_with_id(item_id)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        sections += html_sections(decode_text(item.get_content(), name=path.name))[1]
    titles = book.get_metadata("DC", "title")
    title = str(titles[0][0]).strip() if titles and titles[0][0] else path.stem
    return finish(ParsedDocument(title=title, mime=MIME, sections=sections), name=path.name)


def _drm(encryption_xml: bytes) -> bool:
    # Fonts are often "encrypted" by obfuscation only (IDPF/Adobe algorithms); text content is not.
    text = encryption_xml.decode("utf-8", errors="ignore")
    obfuscation = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
    algorithms = text.count("Algorithm=")
    return algorithms > sum(text.count(a) for a in obfuscation)
