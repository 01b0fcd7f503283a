"""PDF to text per page with pypdf: form-field values, embedded files as attachments, OCR for scans."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from pypdf import PageObject, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError, PyPdfError

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, Section, finish, real_title
from ingest.formats.limits import Limits, check_pages
from ingest.formats.ocr import recognise_pages
from ingest.formats.ocr_engines import engine_unavailable

log = logging.getLogger(__name__)
MIME = "application/pdf"
_LIGATURES = {0xFB00: "ff", 0xFB01: "fi", 0xFB02: "fl", 0xFB03: "ffi", 0xFB04: "ffl", 0xFB05: "st", 0xFB06: "st"}
_SPACES = re.compile(r"[ \t\u00a0]+")


def read_pdf(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse a PDF, one section per page with text (1-based page numbers).

    A PDF whose only password is the owner's (copy/print restrictions) opens with the empty user
    password and is indexed: who may read it is decided by the ACL, not by the file's flags. pypdf
    recovers broken cross-reference tables and streams in its lenient mode.

    Args:
        path: the file.
        limits: page limit and OCR languages.

    Returns:
        The pages' text, AcroForm field values on their pages, embedded files as `attachments`;
        scanned pages (no text layer, an image drawn) recognised by OCR one at a time, their
        sections marked `ocr`, and a note saying how many were recognised.

    Raises:
        IngestError: `encrypted` (a user password is needed), `needs_ocr` (only scanned pages and
            no OCR engine), `too_large` (too many pages), `failed` (unreadable), `empty`.
    """
    name = path.name
    try:
        reader = PdfReader(str(path), strict=False)
        _open(reader, name)
        pages = reader.pages
        page_count = len(pages)
        check_pages(name, page_count, limits)
        sections, textless = [], []
        for number, page in enumerate(pages, start=1):
            text = "\n".join(t for t in (_page_text(page, name, number), _form_text(page)) if t)
            if text.strip():
                sections.append(Section(text, page=number))
            else:
                textless.append((number, page))
        title = _title(reader) or path.stem
        attachments = _attachments(reader, name)
    except FileNotDecryptedError as exc:
        raise IngestError(f"{name}: the PDF is encrypted with a password", status="encrypted") from exc
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise IngestError(f"{name}: the PDF is malformed ({type(exc).__name__}: {exc})", status="failed") from exc
    notes: list[str] = []
    scanned = [(number, page) for number, page in textless if _has_images([(number, page)])]
    missing = engine_unavailable(limits.ocr_options()) if scanned else ""
    if scanned and not missing:
        report = recognise_pages(((n, _page_images(p)) for n, p in scanned), options=limits.ocr_options())
        if not sections and not report.sections:
            detail = f" ({'; '.join(report.problems[:3])})" if report.problems else ""
            raise IngestError(f"{name}: {len(scanned)} scanned page(s) in which OCR recognised no text{detail}", status="empty")
        sections = sorted(sections + report.sections, key=lambda s: s.page or 0)
        notes.append(report.note())
    elif scanned and sections:
        log.warning("%s: %d scanned page(s) skipped: %s", name, len(scanned), missing)
        notes.append(f"{len(scanned)} scanned page(s) not indexed: {missing}")
    elif scanned:
        raise IngestError(f"{name}: {page_count} page(s) without a text layer (scanned?); {missing}", status="needs_ocr")
    doc = ParsedDocument(
        title=title, mime=MIME, sections=sections, page_count=page_count, attachments=attachments, notes=notes
    )
    return finish(doc, name=name)


def _open(reader: PdfReader, name: str) -> None:
    if not reader.is_encrypted:
        return
    try:
        opened = reader.decrypt("")
    except NotImplementedError as exc:  # an unknown security handler
        raise IngestError(f"{name}: the PDF is encrypted ({exc})", status="encrypted") from exc
    except DependencyError as exc:  # pragma: no cover - cryptography is a dependency of ours
        raise IngestError(f"{name}: the PDF is AES-encrypted and no AES backend is installed ({exc})", status="encrypted") from exc
    if not opened:
        raise IngestError(f"{name}: the PDF is encrypted with a user password", status="encrypted")


def _page_text(page: PageObject, name: str, number: int) -> str:
    # One bad page (odd colour space, broken font) must not lose the others.
    try:
        text = page.extract_text() or ""
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds on malformed content
        log.warning("%s: page %d text could not be extracted: %s", name, number, exc)
        return ""
    # Typeset ligatures (ﬁ, ﬂ) would hide words from keyword search; some producers space words
    # with tabs (Korean forms) - both are layout, not content.
    text = text.translate(_LIGATURES)
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines())


def _form_text(page: PageObject) -> str:
    """'Field name: value' for each filled AcroForm widget on the page (values are not in the page text)."""
    lines = []
    try:
        annots = page.get("/Annots")
        annots = annots.get_object() if annots is not None else []
    except Exception:  # noqa: BLE001 - a broken annotation array only loses the form values
        return ""
    for ref in annots:
        try:
            annot = ref.get_object()
            if annot.get("/Subtype") != "/Widget":
                continue
            field = annot if "/T" in annot or "/V" in annot else annot.get("/Parent", {}).get_object()
            value = field.get("/V")
            if value is None and "/Parent" in annot:
                value = annot["/Parent"].get_object().get("/V")
            value = str(value).lstrip("/") if value is not None else ""
            if not value.strip() or value == "Off":
                continue
            label = field.get("/T") or field.get("/TU") or ""
            lines.append(f"{label}: {value}" if label else value)
        except Exception:  # noqa: BLE001 - a broken annotation is skipped, not fatal
            continue
    return "\n".join(lines)


def _title(reader: PdfReader) -> str:
    """The info dictionary's title, unless it is a producer's placeholder ('Title', 'scan.jpg')."""
    try:
        meta = reader.metadata
        return real_title(meta.title if meta else "")
    except Exception:  # noqa: BLE001 - a broken info dictionary only costs the title
        return ""


def _attachments(reader: PdfReader, name: str) -> list[tuple[str, bytes]]:
    try:
        return [(file_name, data) for file_name, blobs in reader.attachments.items() for data in blobs]
    except Exception as exc:  # noqa: BLE001 - a broken name tree only loses the attachments
        log.warning("%s: embedded files could not be read: %s", name, exc)
        return []


def _has_images(pages: list[tuple[int, PageObject]]) -> bool:
    """True when some text-less page draws an image (scanned), False for truly blank pages."""
    for _, page in pages:
        try:
            resources = page.get("/Resources") or {}
            xobjects = resources.get_object().get("/XObject") or {}
            if any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.get_object().values()):
                return True
            contents = page.get_contents()
            if contents is not None and b" Do" in contents.get_data():  # a form XObject may wrap the scan
                return True
        except Exception:  # noqa: BLE001 - unreadable resources: assume a scan rather than blank
            return True
    return False


def _page_images(page: PageObject):
    """A callable giving the page's images as PIL images (decoded only when OCR reaches the page)."""

    def load() -> list:
        return [image.image for image in page.images]

    return load
