"""Workbooks (XLSX, XLS) and delimited text (CSV, TSV), streamed row by row into sections of rows.

Rows are read one at a time (openpyxl's read-only mode, xlrd on demand, the csv module), cut into
sections of about a chunk's worth of rows that repeat the sheet name and the header row
(`tables.table_sections`), and counted against the cell limit (past it: `too_large`) and the row
limit (past it: the rows so far are indexed and the document's notes say where it stopped).

The readers return the sections as a stream (`ParsedDocument.stream`), read as they are consumed:
the parser process chunks them and hands the chunks over a part at a time, so that neither side
holds a whole workbook (`ingest.isolated_parse`). The limits' errors and the notes come while the
stream is read.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from assistant.core.errors import IngestError
from assistant.tables.cells import typed_text
from ingest.decoding import decode_text
from ingest.formats.document import ParsedDocument, Section, finished_stream
from ingest.formats.limits import Limits, too_large
from ingest.formats.sheet_tables import SheetTables
from ingest.formats.tables import cell_text, is_header

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLS_MIME = "application/vnd.ms-excel"
_DELIMITERS = ",;\t|"


def read_xlsx(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse an XLSX workbook (cached formula results, not formulas).

    Args:
        path: the file (a zip package; the caller checked its unpacked size).
        limits: `max_sheet_cells`.

    Returns:
        The workbook, its sections streamed (one per group of rows of each sub-table of each sheet,
        headed with the sheet name); the workbook stays open until the stream is read or dropped.

    Raises:
        IngestError: `failed` (unreadable); while the stream is read, `too_large` (too many cells)
            or `empty` (no values).
    """
    from openpyxl import load_workbook

    try:
        # read_only streams rows; reset_dimensions ignores a missing or wrong <dimension> tag, which
        # would otherwise make openpyxl stop early or report max_row=None.
        book = load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise IngestError(f"{path.name}: the XLSX workbook cannot be read ({type(exc).__name__}: {exc})") from exc
    counter = _RowCounter(path.name, limits)
    tables = SheetTables(limits, document=path.name)

    def sections() -> Iterator[Section]:
        try:
            for sheet in book.worksheets:
                if counter.truncated:
                    break
                if hasattr(sheet, "reset_dimensions"):
                    sheet.reset_dimensions()
                # Typed texts: a large sheet's column types come from the cells' own types.
                rows = ([typed_text(v, cell_text(v)) for v in row] for row in sheet.iter_rows(values_only=True))
                merges = _merged_ranges(book, sheet)
                if merges:
                    rows = _resolve_merges(rows, merges)
                yield from tables.sections(counter.rows(rows), heading=sheet.title)
        finally:
            book.close()
            tables.close()

    return ParsedDocument(title=path.stem, mime=XLSX_MIME, notes=counter.notes,
                          stream=finished_stream(sections(), name=path.name))


def read_xls(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse a legacy Excel 97-2003 (BIFF) workbook with xlrd.

    Args:
        path: the file.
        limits: `max_sheet_cells`.

    Returns:
        The workbook, its sections streamed as `read_xlsx` does.

    Raises:
        IngestError: `encrypted` (password-protected), `failed` (unreadable); while the stream is
            read, `too_large` (too many cells) or `empty` (no values).
    """
    import xlrd

    try:
        book = xlrd.open_workbook(str(path), on_demand=True)
    except xlrd.XLRDError as exc:
        status = "encrypted" if "encrypt" in str(exc).lower() else "failed"
        raise IngestError(f"{path.name}: the XLS workbook cannot be read ({exc})", status=status) from exc
    counter = _RowCounter(path.name, limits)
    tables = SheetTables(limits, document=path.name)

    def sections() -> Iterator[Section]:
        try:
            for sheet in book.sheets():
                if counter.truncated:
                    break
                rows = ([_xls_cell(book, c) for c in sheet.row(r)] for r in range(sheet.nrows))
                yield from tables.sections(counter.rows(rows), heading=sheet.name)
        finally:
            book.release_resources()
            tables.close()

    return ParsedDocument(title=path.stem, mime=XLS_MIME, notes=counter.notes,
                          stream=finished_stream(sections(), name=path.name))


def read_delimited(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse CSV/TSV in any common encoding, sniffing the delimiter (',', ';', tab or '|').

    Quoted fields follow RFC 4180 (commas and line breaks inside quotes stay in the field).

    Args:
        path: the file.
        limits: `max_sheet_cells`.

    Returns:
        The file, its sections streamed (one per group of rows of each sub-table; blank rows
        separate sub-tables).

    Raises:
        IngestError: `unsupported` (not text); while the stream is read, `too_large` (too many
            cells) or `empty` (no values).
    """
    text = decode_text(path.read_bytes(), name=path.name)
    counter = _RowCounter(path.name, limits)
    reader = csv.reader(io.StringIO(text, newline=""), dialect=_sniff(text, path.suffix.lower()))
    del text  # the reader holds its own copy; one is enough
    tables = SheetTables(limits, document=path.name, infer_text_types=True)

    def sections() -> Iterator[Section]:
        try:
            yield from tables.sections(counter.rows([" ".join(c.split()) for c in row] for row in reader), heading="")
        finally:
            tables.close()

    mime = "text/tab-separated-values" if path.suffix.lower() == ".tsv" else "text/csv"
    return ParsedDocument(title=path.stem, mime=mime, notes=counter.notes, stream=finished_stream(sections(), name=path.name))


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
            value = xlrd.xldate.xldate_as_datetime(cell.value, book.datemode)
            return typed_text(value, cell_text(value))
        except (xlrd.xldate.XLDateError, OverflowError):
            return cell_text(cell.value)
    if cell.ctype == xlrd.XL_CELL_NUMBER:
        return typed_text(cell.value, cell_text(cell.value))
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return cell_text(bool(cell.value))
    return cell_text(cell.value)


class _RowCounter:
    """Numbers rows as they stream by, stops the file at `max_sheet_cells` (an error) and stops
    reading at `max_sheet_rows` non-blank rows (the rows so far are kept; `notes`, the document's
    own list, gets the sentence that says so when that happens)."""

    def __init__(self, name: str, limits: Limits):
        self.name, self.limits = name, limits
        self.cells = self.filled_rows = 0
        self.truncated = False
        self.notes: list[str] = []

    def rows(self, rows: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        """(1-based row number, cells) for each row, trailing empty cells dropped.

        Raises:
            IngestError(status="too_large"): the file has more cells than `max_sheet_cells`.
        """
        limit = self.limits.max_sheet_rows
        for number, cells in enumerate(rows, start=1):
            # Trailing empty cells (formatting reaching column XFD) are not content.
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                if self.filled_rows >= limit:
                    self.truncated = True
                    self.notes.append(
                        f"indexed the first {limit:,} rows only: the file has more (limit ASSISTANT_MAX_SHEET_ROWS={limit:,})"
                    )
                    return
                self.filled_rows += 1
            self.cells += len(cells)
            if self.cells > self.limits.max_sheet_cells:
                raise too_large(self.name, "cell count (at least)", self.cells, "max_sheet_cells", self.limits.max_sheet_cells)
            yield number, cells


_MERGE = re.compile(rb'<(?:\w+:)?mergeCell ref="([A-Z]+)(\d+):([A-Z]+)(\d+)"')
_MAX_MERGES = 10_000


def _merged_ranges(book, sheet) -> list[tuple[int, int, int, int]]:
    """The sheet's merged ranges as (first row, first column, last row, last column), 1-based.

    Read-only worksheets do not expose them: they sit after the rows in the sheet's XML, which is
    scanned here as a byte stream (1 MiB at a time), so that it costs no memory for a large sheet.
    """
    from openpyxl.utils.cell import column_index_from_string

    path = getattr(sheet, "_worksheet_path", None)
    archive = getattr(book, "_archive", None)
    if path is None or archive is None:
        return []
    found: list[tuple[int, int, int, int]] = []
    tail = b""
    with archive.open(path) as member:
        while len(found) < _MAX_MERGES:
            block = member.read(1 << 20)
            if not block:
                break
            data = tail + block
            end = 0
            for match in _MERGE.finditer(data):
                c1, r1, c2, r2 = match.groups()
                found.append((int(r1), column_index_from_string(c1.decode()), int(r2), column_index_from_string(c2.decode())))
                end = match.end()
            tail = data[max(end, len(data) - 256):]
    return found[:_MAX_MERGES]


def _resolve_merges(rows: Iterable[list[str]], merges: list[tuple[int, int, int, int]]) -> Iterator[list[str]]:
    """Rows with each merged range's value in all its cells; a two-row header whose top row is merged
    across columns ('Location' over 'Building' and 'Room') becomes one header row ('Location
    Building', 'Location Room') in the lower row's place, the top row's place left blank (row
    numbers stay those of the sheet).

    Args:
        rows: the sheet's rows of cell texts, from row 1.
        merges: the merged ranges, `(first row, first column, last row, last column)`, 1-based.

    Yields:
        The rows, one per sheet row.
    """
    by_row: dict[int, list[tuple[int, int, int, int]]] = {}
    for merge in merges:
        for r in range(merge[0], min(merge[2], merge[0] + 1000) + 1):
            by_row.setdefault(r, []).append(merge)
    values: dict[tuple[int, int], str] = {}
    held: list[str] | None = None  # a top header row with horizontal merges, waiting for the row below
    for number, cells in enumerate(rows, start=1):
        spread = False
        for r1, c1, _r2, c2 in by_row.get(number, ()):
            if number == r1:
                values[(r1, c1)] = cells[c1 - 1] if c1 - 1 < len(cells) else ""
            value = values.get((r1, c1), "")
            if c2 > len(cells):
                cells.extend([""] * (c2 - len(cells)))
            for c in range(c1, c2 + 1):
                cells[c - 1] = value
            spread = spread or (c2 > c1 and number == r1)
        if held is not None:
            if is_header(cells):
                width = max(len(held), len(cells))
                top = held + [""] * (width - len(held))
                cells = cells + [""] * (width - len(cells))
                cells = [f"{t} {b}".strip() if t and t != b else b or t for t, b in zip(top, cells)]
                yield []  # the top row's place: the block starts at the joined row
            else:
                yield held
            held = None
        if spread and not is_header(cells) and any(cells):
            held = cells
            continue
        yield cells
    if held is not None:
        yield held
