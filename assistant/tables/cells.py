"""Cell texts that remember their spreadsheet type, so that a table's column types come from the cells' own types."""

from __future__ import annotations

import datetime as dt


class NumberText(str):
    """The text of a cell stored as a number; `value` is the number itself (int or float)."""

    value: int | float

    def __new__(cls, text: str, value: int | float) -> NumberText:
        cell = super().__new__(cls, text)
        cell.value = value
        return cell


class DateText(str):
    """The text of a cell stored as a date or a date-time (ISO 8601); `value` is the date itself."""

    value: dt.date

    def __new__(cls, text: str, value: dt.date) -> DateText:
        cell = super().__new__(cls, text)
        cell.value = value
        return cell


def typed_text(value: object, text: str) -> str:
    """`text` (a cell's display text) tagged with its cell type when `value` is a number or a date.

    Args:
        value: what the spreadsheet library returned for the cell (int, float, date, str, bool...).
        text: the cell's text as ingestion shows it (`ingest.formats.tables.cell_text`).

    Returns:
        A `NumberText` for an int or float (booleans excluded), a `DateText` for a date or
        date-time, else `text` unchanged.
    """
    if isinstance(value, bool) or not text:
        return text
    if isinstance(value, (int, float)):
        return NumberText(text, int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 1e15 else value)
    if isinstance(value, dt.date):
        return DateText(text, value)
    return text
