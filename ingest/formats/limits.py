"""Size limits a file must respect before and while it is parsed (large files, page counts, zip bombs)."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from assistant.core.errors import IngestError
from assistant.core.settings import Settings, get_settings
from ingest.formats.ocr_engines import OcrOptions

# A limit that is exceeded is reported as `too_large`: the file is fine, but this installation
# refuses it; the reason names the setting and both numbers so that an administrator knows which
# knob to turn.
LIMIT_STATUS = "too_large"


@dataclass(frozen=True)
class Limits:
    """What one parse may consume.

    Attributes:
        max_file_size_bytes: largest file read at all (bytes on disk).
        max_pages: most PDF pages or slides in one document.
        max_decompressed_bytes: most bytes all members of a zip-based file (DOCX, XLSX, PPTX, ODT,
            EPUB) may unpack to; guards against zip bombs.
        max_sheet_cells: most spreadsheet or CSV cells read from one file (beyond: `too_large`).
        max_sheet_rows: most spreadsheet or CSV rows indexed from one file; the rows beyond are left
            out and the document's status says so.
        ocr_languages: tesseract language codes joined with '+', e.g. 'eng+chi_sim'.
        ocr_engine: `rapidocr`, `tesseract` or `none` (`ocr_engines.OcrOptions`).
        ocr_page_timeout_s: seconds OCR may spend on one page.
        ocr_threads: ONNX Runtime threads for RapidOCR (0 = its default).
        table_min_rows: a sheet (or CSV file) with at least this many non-blank rows is loaded as a
            queryable table and embedded as one table card (`ingest.formats.sheet_tables`).
        tables_path: the duckdb file this parse writes such tables to (it must not exist; the caller
            moves it into place once the document is indexed); None: every sheet as row groups.
    """

    max_file_size_bytes: int = 100 * 1024 * 1024
    max_pages: int = 5000
    max_decompressed_bytes: int = 1024 * 1024 * 1024
    max_sheet_cells: int = 2_000_000
    max_sheet_rows: int = 1_000_000
    ocr_languages: str = "eng"
    ocr_engine: str = "rapidocr"
    ocr_page_timeout_s: float = 120.0
    ocr_threads: int = 0
    table_min_rows: int = 200
    tables_path: Path | None = None

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Limits:
        """The limits configured in settings.

        Args:
            settings: the settings to read (default: the process-wide settings).

        Returns:
            The limits of the `max_*` and `ocr_languages` fields.
        """
        s = settings or get_settings()
        return cls(
            max_file_size_bytes=s.ingest.max_file_size_bytes,
            max_pages=s.ingest.max_pages,
            max_decompressed_bytes=s.ingest.max_decompressed_bytes,
            max_sheet_cells=s.ingest.max_sheet_cells,
            max_sheet_rows=s.ingest.max_sheet_rows,
            ocr_languages=s.ocr.languages,
            ocr_engine=s.ocr.engine,
            ocr_page_timeout_s=s.ocr.page_timeout_s,
            ocr_threads=s.ocr.threads,
            table_min_rows=s.ingest.table_min_rows,
        )

    def ocr_options(self) -> OcrOptions:
        """The OCR part of the limits.

        Returns:
            Engine, languages, per-page limit and threads.
        """
        return OcrOptions(
            engine=self.ocr_engine, languages=self.ocr_languages, page_timeout_s=self.ocr_page_timeout_s,
            threads=self.ocr_threads,
        )


def too_large(name: str, what: str, value: int, setting: str, limit: int) -> IngestError:
    """Build the error for an exceeded limit.

    Args:
        name: the file name.
        what: what was measured, with its unit ('file size (bytes)').
        value: the measured value.
        setting: the Settings field, e.g. 'max_pages'.
        limit: its value.

    Returns:
        An IngestError(status="too_large") naming the file, the ASSISTANT_* variable and both numbers.
    """
    return IngestError(
        f"{name}: {what} {value:,} exceeds the limit ASSISTANT_{setting.upper()}={limit:,}", status=LIMIT_STATUS
    )


def check_file_size(path: Path, limits: Limits) -> None:
    """Refuse a file larger than `limits.max_file_size_bytes`.

    Args:
        path: the file.
        limits: the limits in force.

    Raises:
        IngestError(status="too_large"): the file is too large.
    """
    size = path.stat().st_size
    if size > limits.max_file_size_bytes:
        raise too_large(path.name, "file size (bytes)", size, "max_file_size_bytes", limits.max_file_size_bytes)


def check_pages(name: str, pages: int, limits: Limits) -> None:
    """Refuse a document of more than `limits.max_pages` pages or slides.

    Args:
        name: the file name.
        pages: its page or slide count.
        limits: the limits in force.

    Raises:
        IngestError(status="too_large"): too many pages.
    """
    if pages > limits.max_pages:
        raise too_large(name, "page count", pages, "max_pages", limits.max_pages)


def check_zip(path: Path, limits: Limits) -> None:
    """Refuse a zip-based file whose members unpack to more than `limits.max_decompressed_bytes`.

    The sizes come from the zip's central directory, which a hostile file can fake; readers that
    stream members (zipfile does) stop at the declared size, so the check holds for what is read.

    Args:
        path: the zip-based file.
        limits: the limits in force.

    Raises:
        IngestError(status="too_large"): the declared unpacked size is over the limit.
        IngestError(status="failed"): the file is not a readable zip archive.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            total = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise IngestError(f"{path.name}: not a readable zip package ({exc})", status="failed") from exc
    if total > limits.max_decompressed_bytes:
        raise too_large(path.name, "unpacked size (bytes)", total, "max_decompressed_bytes", limits.max_decompressed_bytes)
