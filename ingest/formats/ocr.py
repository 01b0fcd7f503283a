"""Scanned pages and images to text, page by page, with the configured OCR engine (`ocr_engines`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, Section, finish
from ingest.formats.limits import Limits, check_pages
from ingest.formats.ocr_engines import (
    OcrOptions,
    OcrTimeout,
    PageClock,
    engine_unavailable,
    get_engine,
    page_time_limit,
)

IMAGE_MIMES = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".tif": "image/tiff",
    ".tiff": "image/tiff", ".bmp": "image/bmp", ".gif": "image/gif", ".webp": "image/webp",
}
# Called with (page number, pages recognised so far) after each page: the parser process tells its
# parent that it is still making progress (so the per-file limit does not count OCR time twice).
_page_listener: Callable[[int, int], None] | None = None


def set_page_listener(listener: Callable[[int, int], None] | None) -> None:
    """Have `listener(page, recognised)` called after each page that OCR has worked on in this process.

    Args:
        listener: the callable, or None to stop.
    """
    global _page_listener
    _page_listener = listener


@dataclass
class OcrReport:
    """What OCR made of a document's scanned pages.

    Attributes:
        engine: the engine's name.
        sections: one per page with recognised text, `ocr=True`.
        attempted: pages OCR ran on.
        problems: 'page N: ...' for each page that timed out or failed.
    """

    engine: str
    sections: list[Section] = field(default_factory=list)
    attempted: int = 0
    problems: list[str] = field(default_factory=list)

    def note(self) -> str:
        """One sentence for the document's status: pages recognised, of how many, and what went wrong."""
        text = f"OCR ({self.engine}) recognised text on {len(self.sections)} of {self.attempted} scanned page(s)"
        if self.problems:
            shown = "; ".join(self.problems[:5]) + ("; ..." if len(self.problems) > 5 else "")
            text += f"; {shown}"
        return text


def recognise_pages(pages: Iterable[tuple[int, Callable[[], list]]], *, options: OcrOptions) -> OcrReport:
    """OCR pages one at a time, each under the per-page time limit.

    Args:
        pages: (1-based page number, a callable returning that page's PIL images) pairs; images are
            made only when their page's turn comes, so that one page at a time is in memory.
        options: the engine and limits (the engine must be available: `engine_unavailable`).

    Returns:
        The report; a page that times out or fails is named in `problems` and the others go on.
    """
    engine = get_engine(options)
    report = OcrReport(engine.name)
    for number, images in pages:
        report.attempted += 1
        texts: list[str] = []
        clock = PageClock(options.page_timeout_s)
        try:
            with page_time_limit(options.page_timeout_s) as clock:
                texts = [engine.recognise(image) for image in images()]
            if clock.expired:  # the engine caught the timeout itself and returned what it had so far
                raise clock.timeout()
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - one unreadable image costs its page, not the document
            texts = []
            if isinstance(exc, OcrTimeout) or clock.expired:  # the engine may wrap the timeout in its own error
                report.problems.append(f"page {number}: OCR stopped {clock.timeout()} (ASSISTANT_OCR_PAGE_TIMEOUT_S)")
            else:
                report.problems.append(f"page {number}: OCR failed ({type(exc).__name__}: {exc})")
        text = "\n".join(t for t in texts if t.strip())
        if text:
            report.sections.append(Section(text, page=number, ocr=True))
        if _page_listener is not None:
            _page_listener(number, len(report.sections))
    return report


def read_image(path: Path, *, limits: Limits) -> ParsedDocument:
    """OCR an image file, one page per frame (a multi-page TIFF is a scanned document).

    Args:
        path: the image (PNG, JPEG, TIFF, BMP, GIF, WebP); EXIF orientation is applied.
        limits: OCR options and `max_pages` (frames).

    Returns:
        One section per frame with text, `page` its 1-based frame number; `notes` says how many
        frames were recognised.

    Raises:
        IngestError(status="needs_ocr"): no OCR engine can run here.
        IngestError(status="failed"): the image cannot be decoded.
        IngestError(status="too_large"): more frames than `max_pages`.
        IngestError(status="empty"): no text was recognised.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    options = limits.ocr_options()
    missing = engine_unavailable(options)
    if missing:
        raise IngestError(f"{path.name}: an image; its text needs OCR and {missing}", status="needs_ocr")
    try:
        image = Image.open(path)
        frames = getattr(image, "n_frames", 1)
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise IngestError(f"{path.name}: the image cannot be decoded ({exc})", status="failed") from exc
    check_pages(path.name, frames, limits)

    def frame(index: int) -> Callable[[], list]:
        def load() -> list:
            image.seek(index)
            return [ImageOps.exif_transpose(image.copy())]
        return load

    with image:
        report = recognise_pages(((i + 1, frame(i)) for i in range(frames)), options=options)
    if not report.sections:
        detail = f" ({'; '.join(report.problems[:3])})" if report.problems else ""
        raise IngestError(f"{path.name}: an image in which OCR recognised no text{detail}", status="empty")
    doc = ParsedDocument(
        title=path.stem, mime=IMAGE_MIMES.get(path.suffix.lower(), "image"), sections=report.sections,
        page_count=frames, notes=[report.note()],
    )
    return finish(doc, name=path.name)
