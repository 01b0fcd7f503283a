"""Workbooks (XLSX, XLS, ODS) and delimited text (CSV, TSV), streamed row by row into sections of rows.

Rows are read one at a time (openpyxl's read-only mode, xlrd on demand, calamine a sheet at a time,
the csv module), cut into
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
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path
from xml.parsers.expat import ExpatError

from assistant.core.errors import IngestError
from assistant.tables.cells import typed_text
from ingest.decoding import decode_text
from ingest.formats.document import ParsedDocument, Section, finished_stream
from ingest.formats.limits import Limits, too_large
from ingest.formats.sheet_tables import SheetTables
from ingest.formats.tables import cell_text, is_header

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLS_MIME = "application/vnd.ms-excel"
ODS_MIME = "application/vnd.oasis.opendocument.spreadsheet"
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

    def sheets() -> Iterator[tuple[str, Iterator[list[str]]]]:
        for sheet in book.worksheets:
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()
            # Typed texts: a large sheet's column types come from the cells' own types.
            rows = ([typed_text(v, cell_text(v)) for v in row] for row in sheet.iter_rows(values_only=True))
            merges = _merged_ranges(book, sheet)
            yield sheet.title, _resolve_merges(rows, merges) if merges else rows

    return _workbook(path, limits, XLSX_MIME, sheets(), close=book.close)


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

    def sheets() -> Iterator[tuple[str, Iterator[list[str]]]]:
        for sheet in book.sheets():
            yield sheet.name, ([_xls_cell(book, c) for c in sheet.row(r)] for r in range(sheet.nrows))

    return _workbook(path, limits, XLS_MIME, sheets(), close=book.release_resources)


def read_ods(path: Path, *, limits: Limits) -> ParsedDocument:
    """Parse an OpenDocument spreadsheet (ODS) with calamine (python-calamine: Rust, about 7x faster
    than openpyxl on the 200,000-row workbook), cached formula results, cells typed as stored.

    Sheets take the same way as an XLSX workbook's: merged ranges spread and a header merged over two
    rows joined (`_resolve_merges`; calamine does not report an ODS file's merges, they are read from
    its content.xml, `ods_merges`), then a small sheet becomes row groups and a large one a table.

    Args:
        path: the file (a zip package; the caller checked its unpacked size).
        limits: `max_sheet_cells`, `max_sheet_rows`, `table_min_rows`.

    Returns:
        The workbook, its sections streamed as `read_xlsx` does (calamine holds one sheet at a time).

    Raises:
        IngestError: `encrypted` (password-protected), `failed` (unreadable); while the stream is
            read, `too_large` (too many cells) or `empty` (no values).
    """
    from python_calamine import CalamineError, CalamineWorkbook

    try:
        with zipfile.ZipFile(path) as archive:
            manifest = archive.read("META-INF/manifest.xml") if "META-INF/manifest.xml" in archive.namelist() else b""
        if b"encryption-data" in manifest:
            raise IngestError(f"{path.name}: the spreadsheet is encrypted with a password", status="encrypted")
        merges = ods_merges(path)
        book = CalamineWorkbook.from_path(str(path))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, ExpatError, CalamineError) as exc:
        raise IngestError(f"{path.name}: the ODS spreadsheet cannot be read ({type(exc).__name__}: {exc})") from exc

    def sheets() -> Iterator[tuple[str, Iterator[list[str]]]]:
        for name in book.sheet_names:
            rows = _calamine_rows(book.get_sheet_by_name(name))
            yield name, _resolve_merges(rows, merges[name]) if merges.get(name) else rows

    return _workbook(path, limits, ODS_MIME, sheets(), close=book.close)


def _workbook(
    path: Path, limits: Limits, mime: str, sheets: Iterator[tuple[str, Iterator[list[str]]]], *,
    close: Callable[[], object],
) -> ParsedDocument:
    """A workbook's document, its sections streamed sheet by sheet (`SheetTables`: a table card or row
    groups each), counted against the limits; `close` releases the workbook once the stream ends."""
    counter = _RowCounter(path.name, limits)
    tables = SheetTables(limits, document=path.name)

    def sections() -> Iterator[Section]:
        try:
            for name, rows in sheets:
                yield from tables.sections(counter.rows(rows), heading=name)
                if counter.truncated:
                    break
        finally:
            close()
            tables.close()

    return ParsedDocument(title=path.stem, mime=mime, notes=counter.notes,
                          stream=finished_stream(sections(), name=path.name))


def _calamine_rows(sheet) -> Iterator[list[str]]:
    """A calamine sheet's rows as typed cell texts, from the sheet's row 1 and column A.

    calamine's rows start at the used range's first column; for an ODS file they start at row 1 (the
    rows above the range come as blank rows), for others at the range's first row: a first row that
    is blank while the range starts lower is the former.
    """
    start = sheet.start
    if start is None:  # an empty sheet
        return
    top, left = start
    pad = [""] * left
    rows = iter(sheet.iter_rows())
    first = next(rows, None)
    if first is None:
        return
    if top and any(v not in ("", None) for v in first):
        for _ in range(top):
            yield []
    for row in chain((first,), rows):
        yield pad + [typed_text(v, cell_text(v)) for v in row]


_SPANNED = re.compile(rb'number-(?:columns|rows)-spanned="0*(?:[2-9]|\d\d+)"')
_TABLE_NS = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"


def ods_merges(path: Path) -> dict[str, list[tuple[int, int, int, int]]]:
    """The merged ranges of an ODS file's sheets, by sheet name, as `_merged_ranges` gives them.

    An ODS cell that spans others says so itself (`table:number-columns-spanned`,
    `table:number-rows-spanned`); rows and cells may stand for several (`...-repeated`). content.xml
    is first scanned as bytes for a span over one cell (1 MiB at a time): a file without one, most of
    them, costs no parse. Otherwise it is read with expat, as a stream, counting rows and columns.

    Args:
        path: the ODS file.

    Returns:
        Sheet name -> its ranges `(first row, first column, last row, last column)`, 1-based, at most
        `_MAX_MERGES` per file; {} when none.
    """
    from xml.parsers import expat

    with zipfile.ZipFile(path) as archive:
        with archive.open("content.xml") as member:
            tail = b""
            while True:
                block = member.read(1 << 20)
                if not block:
                    return {}
                if _SPANNED.search(tail + block):
                    break
                tail = block[-64:]
        found: dict[str, list[tuple[int, int, int, int]]] = {}
        state = {"depth": 0, "sheet": "", "row": 0, "repeat": 1, "col": 0, "count": 0}

        def attr(attrs: dict, name: str) -> int:
            try:
                return max(1, int(attrs.get(f"{_TABLE_NS} {name}", 1)))
            except ValueError:
                return 1

        def start(name: str, attrs: dict) -> None:
            ns, _, local = name.rpartition(" ")
            if ns != _TABLE_NS:
                return
            if local == "table":
                state["depth"] += 1
                if state["depth"] == 1:
                    state.update(sheet=attrs.get(f"{_TABLE_NS} name", ""), row=0)
            elif state["depth"] != 1:
                return
            elif local == "table-row":
                state.update(repeat=attr(attrs, "number-rows-repeated"), col=0)
            elif local in ("table-cell", "covered-table-cell"):
                rows, cols = attr(attrs, "number-rows-spanned"), attr(attrs, "number-columns-spanned")
                if (rows > 1 or cols > 1) and state["count"] < _MAX_MERGES:
                    r, c = state["row"] + 1, state["col"] + 1
                    found.setdefault(state["sheet"], []).append((r, c, r + rows - 1, c + cols - 1))
                    state["count"] += 1
                state["col"] += attr(attrs, "number-columns-repeated")

        def end(name: str) -> None:
            ns, _, local = name.rpartition(" ")
            if ns != _TABLE_NS:
                return
            if local == "table":
                state["depth"] -= 1
            elif local == "table-row" and state["depth"] == 1:
                state["row"] += state["repeat"]

        parser = expat.ParserCreate(namespace_separator=" ")
        parser.StartElementHandler, parser.EndElementHandler = start, end
        with archive.open("content.xml") as member:
            parser.ParseFile(member)
    return found


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
