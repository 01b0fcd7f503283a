"""Large sheets to queryable tables: a sheet of at least `table_min_rows` rows is loaded into the
document's duckdb file (`assistant.tables`) and stands in the document as one table-card section;
smaller sheets keep today's row-group sections (`tables.table_sections`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from itertools import chain
from pathlib import Path

from assistant.tables.loading import TableWriter
from ingest.formats.document import Section
from ingest.formats.limits import Limits
from ingest.formats.tables import is_header, table_sections

_HEADER_SEARCH_ROWS = 4  # non-blank rows looked at for the header (a caption row may come first)


class SheetTables:
    """Decides per sheet between a table and row groups, and holds the document's table file.

    Args:
        limits: `table_min_rows` and `tables_path` (None: every sheet as row groups).
        document: the file name, for the cards.
        infer_text_types: type text cells that read as numbers or dates (CSV); see `TableWriter`.
    """

    def __init__(self, limits: Limits, *, document: str, infer_text_types: bool = False):
        self.min_rows = limits.table_min_rows if limits.tables_path is not None else 0
        self.writer = (
            TableWriter(Path(limits.tables_path), document=document, infer_text_types=infer_text_types)
            if self.min_rows else None
        )

    def sections(self, rows: Iterator[tuple[int, list[str]]], *, heading: str) -> Iterator[Section]:
        """The sections of one sheet: its table card, or its row groups when it is small.

        Args:
            rows: (row number, cell texts) of the sheet, as `_RowCounter.rows` yields them.
            heading: the sheet's name ('' for CSV).

        Yields:
            One card section (heading '<sheet> — table <name>') or `table_sections`'s sections.
        """
        if self.writer is None:
            yield from table_sections(rows, heading=heading)
            return
        head: list[tuple[int, list[str]]] = []
        filled = 0
        for item in rows:
            head.append(item)
            filled += bool(item[1])
            if filled >= self.min_rows:
                break
        else:  # the sheet ended first: a small sheet
            yield from table_sections(iter(head), heading=heading)
            return
        filled = 0
        found = None
        for i, (_, cells) in enumerate(head):  # the header: among the first non-blank rows (a caption may come first)
            if cells:
                if is_header(cells):
                    found = i
                    break
                filled += 1
                if filled >= _HEADER_SEARCH_ROWS:
                    break
        width = max(len(cells) for _, cells in head)
        header = head[found][1] if found is not None else []
        after = head[found + 1 :] if found is not None else head
        source = _Lookahead(chain((cells for _, cells in after), (cells for _, cells in rows)))
        name = heading
        while True:
            block = _SubTable(source, self.writer.typed)
            header = list(header) + [""] * (width - len(header))
            table = self.writer.add(heading, header, block.rows(header), name=name)
            yield Section(table.card, heading=f"{heading} — table {table.name}" if heading else f"table {table.name}")
            if block.next_header is None:
                break
            header, width = block.next_header, block.next_width
            name = f"{heading} {block.next_caption}".strip() if block.next_caption else heading

    def close(self) -> None:
        """Finish the table file (when a sheet went into it)."""
        if self.writer is not None:
            self.writer.close()


class _Lookahead:
    """Rows (cell lists, [] for a blank row) with a look at the next few before they are taken."""

    def __init__(self, rows: Iterator[list[str]]):
        self.rows = rows
        self.ahead: deque[list[str]] = deque()

    def peek(self, n: int = 0) -> list[str] | None:
        """The row `n` places ahead (0: the next one), or None past the end."""
        while len(self.ahead) <= n:
            row = next(self.rows, None)
            if row is None:
                return None
            self.ahead.append(row)
        return self.ahead[n]

    def take(self) -> list[str] | None:
        """The next row, or None at the end."""
        return self.ahead.popleft() if self.ahead else next(self.rows, None)


class _SubTable:
    """The rows of one table of a large sheet, up to where the next one starts: after one or more
    blank rows, a header row of its own (labels, none typed, other than the table's header) over a
    row with a number or a date under one of its labels, with an optional caption row (one filled
    cell) directly above it. A sheet of text-only blocks stays one table (a text row after a blank
    row cannot be told from a header).

    Args:
        source: the sheet's rows after the table's header.
        typed: whether a cell reads as a number or a date (`TableWriter.typed`).

    After `rows` is exhausted: `next_header` (None at the end of the sheet), `next_width` (its
    table's width: the header's or its first row's) and `next_caption` ('' without one).
    """

    def __init__(self, source: _Lookahead, typed: Callable[[str], bool]):
        self.source, self.typed = source, typed
        self.next_header: list[str] | None = None
        self.next_width = 0
        self.next_caption = ""

    def rows(self, header: list[str]) -> Iterator[list[str]]:
        """The table's data rows (blank rows included: the writer skips them)."""
        after_blank = False
        while (row := self.source.take()) is not None:
            if not row:
                after_blank = True
                yield row
                continue
            if after_blank and self._starts_table(row, header):
                return
            after_blank = False
            yield row

    def _starts_table(self, row: list[str], header: list[str]) -> bool:
        caption = ""
        candidate, below = row, self.source.peek(0)
        if sum(1 for c in row if c.strip()) == 1 and below and self._header_over(below, self.source.peek(1), header):
            caption, candidate, below = next(c for c in row if c.strip()), below, self.source.peek(1)
            self.source.take()
        elif not self._header_over(candidate, below, header):
            return False
        self.next_header, self.next_caption = candidate, caption
        self.next_width = max(len(candidate), len(below or []))
        return True

    def _header_over(self, row: list[str], below: list[str] | None, header: list[str]) -> bool:
        if not below or not is_header(row) or row == header[: len(row)] or any(self.typed(c) for c in row):
            return False
        return any(label.strip() and i < len(below) and self.typed(below[i]) for i, label in enumerate(row))
