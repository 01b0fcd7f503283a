"""OCR engines: RapidOCR with the PP-OCR models inside its wheel (the default), tesseract when installed.

RapidOCR (Apache-2.0) runs PP-OCRv6's text detector and recogniser (Chinese and English in one
model) and a 0/180-degree line classifier on ONNX Runtime. The model files are passed by path, so
that the package never reaches for its download URLs: an installation without network access
recognises text exactly as one with it.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

ENGINES = ("rapidocr", "tesseract", "none")


class OcrTimeout(Exception):
    """One page took longer than the per-page limit."""


@dataclass(frozen=True)
class OcrOptions:
    """How pages are recognised.

    Attributes:
        engine: `rapidocr` (default, bundled models), `tesseract` (the command must be installed)
            or `none` (scanned pages end as `needs_ocr`).
        languages: tesseract language codes joined with '+' (RapidOCR's model reads Chinese and
            English without being told).
        page_timeout_s: wall-clock seconds one page may take; 0 = no limit.
        threads: ONNX Runtime threads for RapidOCR; 0 = its default (all cores).
    """

    engine: str = "rapidocr"
    languages: str = "eng+chi_sim"
    page_timeout_s: float = 120.0
    threads: int = 0


class OcrEngine(Protocol):
    """Something that turns one page image into text."""

    name: str

    def recognise(self, image) -> str:
        """The text of `image` (a PIL image), lines in reading order joined by newlines."""


class RapidOcrEngine:
    """RapidOCR on ONNX Runtime with the models bundled in the `rapidocr` wheel.

    Args:
        threads: intra-op threads of each ONNX Runtime session; 0 = ONNX Runtime's default.
    """

    name = "rapidocr"
    DETECTOR = "PP-OCRv6_det_small.onnx"
    RECOGNISER = "PP-OCRv6_rec_small.onnx"
    CLASSIFIER = "ch_ppocr_mobile_v2.0_cls_mobile.onnx"

    def __init__(self, *, threads: int = 0):
        import logging

        import rapidocr
        from rapidocr import RapidOCR

        models = Path(rapidocr.__file__).parent / "models"
        params = {
            "Global.log_level": "error",
            "Det.model_path": str(models / self.DETECTOR),
            "Rec.model_path": str(models / self.RECOGNISER),
            "Cls.model_path": str(models / self.CLASSIFIER),
        }
        if threads:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
        self._ocr = RapidOCR(params=params)
        # RapidOCR logs each model it loads at INFO through its own handler: that is log noise.
        logging.getLogger("RapidOCR").setLevel(logging.ERROR)

    def recognise(self, image) -> str:
        """Recognise one page.

        Args:
            image: a PIL image of any mode (converted to RGB).

        Returns:
            The recognised lines, top to bottom, joined by newlines ('' when none).
        """
        result = self._ocr(image.convert("RGB"))
        return "\n".join(t for t in (result.txts or ()) if t and t.strip())


class TesseractEngine:
    """The `tesseract` command, one subprocess per page.

    Args:
        languages: tesseract language codes joined with '+'; those not installed are left out.
        timeout_s: seconds one page may take (0 = 120).
    """

    name = "tesseract"

    def __init__(self, *, languages: str, timeout_s: float = 0):
        self.languages = languages
        self.timeout_s = timeout_s or 120.0

    def recognise(self, image) -> str:
        """Recognise one page.

        Args:
            image: a PIL image.

        Returns:
            The recognised text ('' when none).

        Raises:
            OcrTimeout: tesseract ran past the time limit.
            subprocess.CalledProcessError: tesseract failed on the image.
        """
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        installed = _tesseract_languages()
        wanted = [lang for lang in self.languages.split("+") if lang in installed] or ["eng"]
        # Page segmentation mode 1 detects the orientation first (scans are often upside down or
        # sideways); it needs the 'osd' model, without which the default mode 3 is used.
        mode = ["--psm", "1"] if "osd" in installed else []
        try:
            run = subprocess.run(
                ["tesseract", "stdin", "stdout", "-l", "+".join(wanted), *mode],
                input=buffer.getvalue(), capture_output=True, timeout=self.timeout_s, check=True,
                # OpenMP threads inside one tesseract fight each other: one thread is 2-3x faster per image.
                env={**os.environ, "OMP_THREAD_LIMIT": "1"},
            )
        except subprocess.TimeoutExpired as exc:
            raise OcrTimeout(f"tesseract ran past {self.timeout_s:g} s") from exc
        return run.stdout.decode("utf-8", errors="replace").replace("\f", "\n").strip()


def tesseract_available() -> bool:
    """Tell whether the optional tesseract engine can run here.

    Returns:
        True when the `tesseract` command is on PATH.
    """
    return shutil.which("tesseract") is not None


@lru_cache(maxsize=1)
def _tesseract_languages() -> frozenset[str]:
    run = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=30)
    return frozenset(line.strip() for line in run.stdout.splitlines()[1:] if line.strip())


def engine_unavailable(options: OcrOptions) -> str:
    """Why the configured engine cannot run, or '' when it can.

    Args:
        options: the OCR options in force.

    Returns:
        A sentence naming the engine and what is missing ('' when OCR can run).
    """
    if options.engine == "none":
        return "OCR is switched off (ASSISTANT_OCR_ENGINE=none)"
    if options.engine == "tesseract" and not tesseract_available():
        return "the OCR engine is tesseract (ASSISTANT_OCR_ENGINE=tesseract), which is not installed"
    if options.engine == "rapidocr":
        try:
            import rapidocr  # noqa: F401
        except ImportError:
            return "the OCR engine rapidocr (ASSISTANT_OCR_ENGINE=rapidocr) is not installed"
    return ""


_ENGINES: dict[tuple, OcrEngine] = {}
_ENGINES_LOCK = threading.Lock()


def get_engine(options: OcrOptions) -> OcrEngine:
    """The engine of `options`, built once per process (RapidOCR loads its models in about a second).

    Args:
        options: the OCR options; call `engine_unavailable` first.

    Returns:
        The engine.
    """
    key = (options.engine, options.languages, options.page_timeout_s, options.threads)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            if options.engine == "tesseract":
                _ENGINES[key] = TesseractEngine(languages=options.languages, timeout_s=options.page_timeout_s)
            else:
                _ENGINES[key] = RapidOcrEngine(threads=options.threads)
        return _ENGINES[key]


class PageClock:
    """The state of one page's time limit: `expired` once the limit has passed."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False

    def timeout(self) -> OcrTimeout:
        """The error that says which limit was passed."""
        return OcrTimeout(f"past the per-page limit of {self.seconds:g} s")


@contextmanager
def page_time_limit(seconds: float) -> Iterator[PageClock]:
    """Raise `OcrTimeout` in the block once `seconds` have passed (a per-page limit).

    The limit is a SIGALRM timer, so it holds only on the main thread of the process (the parser
    process runs its pages there); Python delivers the signal between two ONNX Runtime steps, so a
    page stops within one model step of its limit. An engine may wrap the error in its own (RapidOCR
    does): the yielded clock's `expired` tells the caller that the limit was the cause. Elsewhere (a
    thread) the block runs unlimited and the parser process's per-file limit applies.

    Args:
        seconds: the limit; 0 or less = none.

    Yields:
        The page's `PageClock`.

    Raises:
        OcrTimeout: the block ran past the limit.
    """
    clock = PageClock(seconds)
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield clock
        return

    def expire(signum, frame):
        clock.expired = True
        raise clock.timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield clock
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
