"""Workbooks (XLSX, XLS) and delimited text (CSV, TSV) to one section per sheet sub-table."""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.decoding import decode_text
from ingest.formats.document import ParsedDocument, Section, finish
from ingest.formats.limits import Limits, too_large
from ingest.formats.tables import cell_text, table_sections

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLS_MIME = "application/vnd.ms-excel"
_DELIMITERS = ",;\t|"


def read_xlsx(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse an XLSX workbook (cached formula results, not formulas).

    Args:
        path: the file (a zip package; the caller checked its unpacked size).
        limits: `max_sheet_cells`.

    Returns:
        One section per sub-table of each sheet, headed with the sheet name.

    Raises:
        IngestError: `failed` (unreadable), `unsupported` (too many cells), `empty` (no values).
    """
    from openpyxl import load_workbook

    try:
        # read_only streams rows; reset_dimensions ignores a missing or wrong <dimension> tag, which
        # would otherwise make openpyxl stop early or report max_row=None.
        book = load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise IngestError(f"{path.name}: the XLSX workbook cannot be read ({type(exc).__name__}: {exc})") from exc
    sections: list[Section] = []
    counter = _CellCounter(path.name, limits)
    try:
        for sheet in book.worksheets:
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()
            rows = (counter.row([cell_text(v) for v in row]) for row in sheet.iter_rows(values_only=True))
            sections += table_sections(rows, heading=sheet.title)
    finally:
        book.close()
    return finish(ParsedDocument(title=path.stem, mime=XLSX_MIME, sections=sections), name=path.name)


def read_xls(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse a legacy Excel 97-2003 (BIFF) workbook with xlrd.

    Args:
        path: the file.
        limits: `max_sheet_cells`.

    Returns:
        One section per sub-table of each sheet, headed with the sheet name.

    Raises:
        IngestError: `encrypted` (password-protected), `failed` (unreadable), `unsupported` (too
            many cells), `empty` (no values).
    """
    import xlrd

    try:
        book = xlrd.open_workbook(str(path), on_demand=True)
    except xlrd.XLRDError as exc:
        status = "encrypted" if "encrypt" in str(exc).lower() else "failed"
        raise IngestError(f"{path.name}: the XLS workbook cannot be read ({exc})", status=status) from exc
    sections: list[Section] = []
    counter = _CellCounter(path.name, limits)
    try:
        for sheet in book.sheets():
            rows = (counter.row([_xls_cell(book, c) for c in sheet.row(r)]) for r in range(sheet.nrows))
            sections += table_sections(rows, heading=sheet.name)
    finally:
        book.release_resources()
    return finish(ParsedDocument(title=path.stem, mime=XLS_MIME, sections=sections), name=path.name)


def read_delimited(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse CSV/TSV in any common encoding, sniffing the delimiter (',', ';', tab or '|').

    Quoted fields follow RFC 4180 (commas and line breaks inside quotes stay in the field).

    Args:
        path: the file.
        limits: `max_sheet_cells`.

    Returns:
        One section per sub-table (blank rows separate them).

    Raises:
        IngestError: `unsupported` (not text, or too many cells), `empty` (no values).
    """
    text = decode_text(path.read_bytes(), name=path.name)
    counter = _CellCounter(path.name, limits)
    reader = csv.reader(io.StringIO(text, newline=""), dialect=_sniff(text, path.suffix.lower()))
    sections = table_sections((counter.row([" ".join(c.split()) for c in row]) for row in reader), heading="")
    mime = "text/tab-separated-values" if path.suffix.lower() == ".tsv" else "text/csv"
    return finish(ParsedDocument(title=path.stem, mime=mime, sections=sections), name=path.name)


def _sniff(text: str, suffix: str) -> type[csv.Dialect] | str:
    sample = text[:64 * 1024]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        # The sniffer gives up on very wide or irregular files; the most frequent delimiter outside
        # quotes is then the best guess.
        counts = {d: _count_unquoted(sample, d) for d in _DELIMITERS}
        best = max(counts, key=counts.get)
        if counts[best] == 0:
            best = "\t" if suffix == ".tsv" else ","
        return _dialect(best)


def _dialect(delimiter: str) -> type[csv.Dialect]:
    class Sniffed(csv.excel):
        pass

    Sniffed.delimiter = delimiter
    return Sniffed


def _count_unquoted(sample: str, delimiter: str) -> int:
    return sum(part.count(delimiter) for i, part in enumerate(sample.split('"')) if i % 2 == 0)


def _xls_cell(book, cell) -> str:
    import xlrd

    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return cell_text(xlrd.xldate.xldate_as_datetime(cell.value, book.datemode))
        except (xlrd.xldate.XLDateError, OverflowError):
            return cell_text(cell.value)
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return cell_text(bool(cell.value))
    return cell_text(cell.value)


class _CellCounter:
    """Counts cells as rows stream by and stops the file at `limits.max_sheet_cells`."""

    def __init__(self, name: str, limits: Limits):
        self.name, self.limit, self.cells = name, limits.max_sheet_cells, 0

    def row(self, cells: list[str]) -> list[str]:
        # Trailing empty cells (formatting reaching column XFD) are not content.
        while cells and not cells[-1]:
            cells.pop()
        self.cells += len(cells)
        if self.cells > self.limit:
            raise too_large(self.name, "cell count (at least)", self.cells, "max_sheet_cells", self.limit)
        return cells
