"""Large sheets to queryable tables: a sheet of at least `table_min_rows` rows is loaded into the
document's duckdb file (`assistant.tables`) and stands in the document as one table-card section;
smaller sheets keep today's row-group sections (`tables.table_sections`)."""

from __future__ import annotations

from collections.abc import Iterator
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
        filled_rows = [cells for _, cells in head if cells]
        width = max(len(cells) for cells in filled_rows)
        found = next((i for i, cells in enumerate(filled_rows[:_HEADER_SEARCH_ROWS]) if is_header(cells)), None)
        header = filled_rows[found] if found is not None else []
        data = filled_rows[found + 1:] if found is not None else filled_rows
        header = list(header) + [""] * (width - len(header))
        table = self.writer.add(heading, header, chain(data, (cells for _, cells in rows)))
        yield Section(table.card, heading=f"{heading} — table {table.name}" if heading else f"table {table.name}")

    def close(self) -> None:
        """Finish the table file (when a sheet went into it)."""
        if self.writer is not None:
            self.writer.close()
