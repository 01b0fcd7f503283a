"""Pick the reader for a file by its extension and first bytes, and apply the size limits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument
from ingest.formats.ebook import read_epub
from ingest.formats.html import read_html
from ingest.formats.legacy import converted, is_ole2, ole_encrypted
from ingest.formats.limits import Limits, check_file_size, check_zip
from ingest.formats.mail import read_eml, read_msg
from ingest.formats.ocr import IMAGE_MIMES, read_image
from ingest.formats.office import read_docx
from ingest.formats.opendocument import read_odt
from ingest.formats.pdf import read_pdf
from ingest.formats.presentation import read_pptx
from ingest.formats.rtf import read_rtf
from ingest.formats.spreadsheet import read_delimited, read_ods, read_xls, read_xlsx
from ingest.formats.text import read_markdown, read_text

Reader = Callable[[Path, Limits], ParsedDocument]


def _plain(read: Callable[[Path], ParsedDocument]) -> Reader:
    return lambda path, limits: read(path)


def _limited(read: Callable[..., ParsedDocument]) -> Reader:
    return lambda path, limits: read(path, limits=limits)


MARKDOWN = {".md", ".markdown", ".mdx"}
TEXT = {".txt", ".text", ".rst", ".log", ".json", ".yaml", ".yml"}
DELIMITED = {".csv", ".tsv"}
HTML = {".html", ".htm", ".xhtml"}
IMAGES = set(IMAGE_MIMES)
# Zip packages, checked against max_decompressed_bytes before any reader unpacks them.
ZIPPED: dict[str, Reader] = {
    ".docx": _plain(read_docx),
    ".docm": _plain(read_docx),
    ".pptx": _limited(read_pptx),
    ".pptm": _limited(read_pptx),
    ".xlsx": _limited(read_xlsx),
    ".xlsm": _limited(read_xlsx),
    ".odt": _plain(read_odt),
    ".ods": _limited(read_ods),
    ".epub": _plain(read_epub),
}
# Legacy binary Office formats: converted by LibreOffice to the zip format of their family.
CONVERTED = {".doc": "docx", ".ppt": "pptx"}
_LEGACY_MIMES = {".doc": "application/msword", ".ppt": "application/vnd.ms-powerpoint"}
PLAIN: dict[str, Reader] = {
    ".pdf": _limited(read_pdf),
    ".xls": _limited(read_xls),
    ".rtf": _plain(read_rtf),
    ".eml": _plain(read_eml),
    ".msg": _plain(read_msg),
    **{s: _limited(read_delimited) for s in DELIMITED},
    **{s: _plain(read_html) for s in HTML},
    **{s: _plain(read_markdown) for s in MARKDOWN},
    **{s: _plain(read_text) for s in TEXT},
    **{s: _limited(read_image) for s in IMAGES},
}
SUPPORTED = frozenset(ZIPPED) | frozenset(CONVERTED) | frozenset(PLAIN)
_OFFICE = frozenset(ZIPPED) | frozenset(CONVERTED) | {".xls"}
_OOXML_LEGACY = {".docx": "doc", ".docm": "doc", ".pptx": "ppt", ".pptm": "ppt", ".xlsx": "xls", ".xlsm": "xls"}
_LEGACY_OOXML = {".doc": "docx", ".ppt": "pptx", ".xls": "xlsx"}
_ZIP_MAGIC = b"PK\x03\x04"


def parse_file(path: Path, *, limits: Limits | None = None, streamed: bool = False) -> ParsedDocument:
    """Read one file into sections of text.

    Args:
        path: the file; its extension picks the format, its first bytes correct a wrong one
            (an encrypted OOXML file or a legacy file renamed to .docx/.xlsx/.pptx).
        limits: size limits and OCR languages (default: from the process settings).
        streamed: leave a table format's sections in `ParsedDocument.stream`, to be read as they
            are consumed (`all_sections`); its `too_large` and `empty` errors then come from that
            reading. False: every section is read here, into `sections`.

    Returns:
        The document with at least one non-blank section (or, streamed, a stream that yields one
        or raises); files carried inside it (e-mail attachments, PDF embedded files) in `attachments`.

    Raises:
        IngestError: with `status` one of
            `unsupported` (unknown or legacy format without LibreOffice), `too_large` (a size limit
            exceeded: the reason names the ASSISTANT_* setting, the limit and the value),
            `encrypted` (a password is needed), `needs_ocr` (images or scanned pages and no OCR
            engine), `empty` (no text) or
            `failed` (a damaged file).
    """
    path = Path(path)
    limits = limits or Limits.from_settings()
    suffix = path.suffix.lower()
    if not path.is_file():
        raise IngestError(f"{path.name}: not a regular file")
    if suffix not in SUPPORTED:
        raise IngestError(f"{path.name}: the format '{suffix or 'no extension'}' is not supported", status="unsupported")
    check_file_size(path, limits)
    with path.open("rb") as handle:
        head = handle.read(8)
    if not head:
        raise IngestError(f"{path.name}: the file is empty (0 bytes)", status="empty")
    if is_ole2(head) and suffix in _OFFICE:
        if ole_encrypted(path):
            raise IngestError(f"{path.name}: the Office document is encrypted with a password", status="encrypted")
        if suffix in _OOXML_LEGACY:  # a legacy binary file renamed to the newer extension
            suffix = "." + _OOXML_LEGACY[suffix]
    if head.startswith(_ZIP_MAGIC) and suffix in _LEGACY_OOXML:  # a newer file under a legacy extension
        suffix = "." + _LEGACY_OOXML[suffix]
    if suffix == ".xls" and not is_ole2(head) and not head.startswith(_ZIP_MAGIC):
        # "Excel" exports of web applications are often an HTML table or tab-separated text.
        suffix = ".html" if head.lstrip(b"\xef\xbb\xbf\xff\xfe\x00 \r\n\t").startswith(b"<") else ".tsv"
    if suffix in ZIPPED:
        check_zip(path, limits)
        doc = ZIPPED[suffix](path, limits)
        return doc if streamed else doc.materialise()
    if suffix in CONVERTED:
        if not is_ole2(head):
            raise IngestError(f"{path.name}: not a legacy Office file (no OLE2 header)")
        target = CONVERTED[suffix]
        with converted(path, target) as modern:
            check_zip(modern, limits)
            doc = ZIPPED[f".{target}"](modern, limits).materialise()  # the converted file goes with the block
        doc.mime = _LEGACY_MIMES[suffix]
        return doc
    doc = PLAIN[suffix](path, limits)
    return doc if streamed else doc.materialise()
