"""Optical character recognition with the tesseract command, when it is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, Section, finish

IMAGE_MIMES = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".tif": "image/tiff",
    ".tiff": "image/tiff", ".bmp": "image/bmp", ".gif": "image/gif", ".webp": "image/webp",
}
_TIMEOUT_S = 120


def tesseract_available() -> bool:
    """Tell whether OCR can run here.

    Returns:
        True when the `tesseract` command is on PATH.
    """
    return shutil.which("tesseract") is not None


@lru_cache(maxsize=1)
def _installed_languages() -> frozenset[str]:
    run = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=30)
    return frozenset(line.strip() for line in run.stdout.splitlines()[1:] if line.strip())


def ocr_image(data: bytes, *, languages: str) -> str:
    """Recognise the text of one image.

    Args:
        data: an encoded image (PNG, JPEG, TIFF, ...).
        languages: tesseract language codes joined with '+'; those not installed are left out.

    Returns:
        The recognised text ('' when none).

    Raises:
        subprocess.CalledProcessError, subprocess.TimeoutExpired: tesseract failed on the image.
    """
    installed = _installed_languages()
    wanted = [lang for lang in languages.split("+") if lang in installed] or ["eng"]
    # Page segmentation mode 1 detects the orientation first (scans are often upside down or
    # sideways); it needs the 'osd' model, without which the default mode 3 is used.
    mode = ["--psm", "1"] if "osd" in installed else []
    run = subprocess.run(
        ["tesseract", "stdin", "stdout", "-l", "+".join(wanted), *mode],
        input=data, capture_output=True, timeout=_TIMEOUT_S, check=True,
        # OpenMP threads inside one tesseract fight each other: one thread is 2-3x faster per image.
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
    )
    return run.stdout.decode("utf-8", errors="strict").replace("\f", "\n").strip()


def read_image(path: Path, *, languages: str) -> ParsedDocument:
    """OCR an image file.

    Args:
        path: the image.
        languages: tesseract languages, e.g. 'eng+chi_sim'.

    Returns:
        One section with the recognised text.

    Raises:
        IngestError(status="needs_ocr"): tesseract is not installed.
        IngestError(status="failed"): tesseract could not read the image.
        IngestError(status="empty"): no text was recognised.
    """
    if not tesseract_available():
        raise IngestError(f"{path.name}: an image; its text needs OCR and tesseract is not installed", status="needs_ocr")
    try:
        text = ocr_image(path.read_bytes(), languages=languages)
    except (subprocess.SubprocessError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path.name}: OCR failed ({exc})", status="failed") from exc
    if not text.strip():
        raise IngestError(f"{path.name}: an image in which OCR recognised no text", status="empty")
    doc = ParsedDocument(title=path.stem, mime=IMAGE_MIMES.get(path.suffix.lower(), "image"), sections=[Section(text, page=1)], page_count=1)
    return finish(doc, name=path.name)
