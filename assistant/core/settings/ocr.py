"""OCR of scanned pages and images."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class OcrSettings(BaseModel):
    """OCR of scanned pages and images.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    engine: Literal["rapidocr", "tesseract", "none"] = Field(
        default="rapidocr",
        description="OCR of scanned pages and images: rapidocr (PP-OCR models inside its package, Chinese and "
        "English), tesseract (if installed; languages from ocr_languages) or none",
    )
    languages: str = Field(default="eng", description="tesseract languages, e.g. 'eng+chi_sim'")
    page_timeout_s: float = Field(default=120.0, ge=0, description="seconds OCR may spend on one page; 0 = no limit")
    threads: int = Field(default=0, ge=0, description="ONNX Runtime threads of the OCR models; 0 = all cores")
