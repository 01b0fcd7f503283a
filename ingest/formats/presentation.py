"""Slide decks (PPTX) to one section per slide with python-pptx: text boxes, tables, charts, speaker notes."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.formats.document import ParsedDocument, Section, finish, real_title
from ingest.formats.limits import Limits, check_pages

log = logging.getLogger(__name__)
MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def read_pptx(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse a PPTX deck; `page` of each section is the slide number (1-based).

    Shapes are read top-to-bottom, then left-to-right; group shapes are opened; tables come out one
    row per line; charts give their title, categories and series values; speaker notes follow the
    slide's text under 'Speaker notes:'. A shape that cannot be read is skipped with a warning.

    Args:
        path: the file (a zip package; the caller checked its unpacked size).
        limits: `max_pages` applies to slides.

    Returns:
        The deck; its title from the core properties, else the first slide title, else the stem.

    Raises:
        IngestError: `failed` (unreadable package), `unsupported` (too many slides), `empty` (no
            slides or no text).
    """
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        deck = Presentation(str(path))
        slides = list(deck.slides)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, AttributeError) as exc:
        raise IngestError(f"{path.name}: the PPTX file cannot be read ({type(exc).__name__}: {exc})") from exc
    check_pages(path.name, len(slides), limits)
    sections, first_title = [], ""
    for number, slide in enumerate(slides, start=1):
        title = _slide_title(slide)
        first_title = first_title or title
        lines = [text for shape in _reading_order(slide.shapes) if (text := _shape_text(shape, path.name, number))]
        notes = _notes(slide)
        if notes:
            lines.append(f"Speaker notes: {notes}")
        sections.append(Section("\n".join(lines), page=number, heading=title))
    if not slides:
        raise IngestError(f"{path.name}: the deck has no slides", status="empty")
    title = real_title(deck.core_properties.title) or real_title(first_title) or path.stem
    doc = ParsedDocument(title=title, mime=MIME, sections=sections, page_count=len(slides))
    return finish(doc, name=path.name)


def _reading_order(shapes) -> list:
    def key(shape):
        try:
            return (shape.top or 0, shape.left or 0)
        except (KeyError, ValueError, AttributeError):
            return (0, 0)

    return sorted(shapes, key=key)


def _slide_title(slide) -> str:
    try:
        title = slide.shapes.title
        return " ".join(title.text_frame.text.split()) if title is not None and title.has_text_frame else ""
    except (KeyError, ValueError, AttributeError):
        return ""


def _shape_text(shape, name: str, number: int) -> str:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    try:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            return "\n".join(t for s in _reading_order(shape.shapes) if (t := _shape_text(s, name, number)))
        if getattr(shape, "has_table", False) and shape.has_table:
            rows = []
            for row in shape.table.rows:
                cells = [" ".join(c.text.split()) for c in row.cells]
                if any(cells):
                    rows.append(" | ".join(c for c in cells if c))
            return "\n".join(rows)
        if getattr(shape, "has_chart", False) and shape.has_chart:
            return _chart_text(shape.chart)
        if shape.has_text_frame:
            return "\n".join(p for p in (" ".join(para.text.split()) for para in shape.text_frame.paragraphs) if p)
    except Exception as exc:  # noqa: BLE001 - malformed shape XML loses that shape only
        log.warning("%s: slide %d: a shape could not be read: %s", name, number, exc)
    return ""


def _chart_text(chart) -> str:
    lines = []
    if chart.has_title and chart.chart_title.has_text_frame:
        lines.append(f"Chart: {chart.chart_title.text_frame.text}")
    for plot in chart.plots:
        categories = [str(c) for c in plot.categories]
        for series in plot.series:
            values = list(series.values)
            if categories and len(categories) == len(values):
                pairs = "; ".join(f"{c}: {v}" for c, v in zip(categories, values))
            else:
                pairs = ", ".join(str(v) for v in values)
            lines.append(f"{series.name}: {pairs}" if series.name else pairs)
    return "\n".join(lines)


def _notes(slide) -> str:
    try:
        if not slide.has_notes_slide:
            return ""
        frame = slide.notes_slide.notes_text_frame
        return " ".join(frame.text.split()) if frame is not None else ""
    except (KeyError, ValueError, AttributeError):
        return ""
