"""Generated workbooks for the tests of large sheets as tables (issue 40)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def write_sheet(path: Path, title: str, header: list[str], rows: Iterable[Iterable[object]]) -> Path:
    """Write a one-sheet XLSX workbook: `header`, then `rows` (numbers stay number cells); returns `path`."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = title
    sheet.append(header)
    for row in rows:
        sheet.append(list(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    book.save(path)
    return path
