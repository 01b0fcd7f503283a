"""Sheets streamed into a duckdb file, one table per sheet (or per table of a sheet), with snake_case columns
typed from the cells' own types."""

from __future__ import annotations

import csv
import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from assistant.tables.card import table_card
from assistant.tables.cells import DateText, NumberText

# A CSV cell (no cell types) is taken as a number only when it is written as one without a
# leading zero ('007' is a code) and without a trailing zero after the point ('1.10' is a room).
_INTEGER = re.compile(r"-?(?:0|[1-9]\d{0,17})")
_DECIMAL = re.compile(r"-?(?:0|[1-9]\d*)\.\d*[1-9]")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_WIDEN = {frozenset({"BIGINT", "DOUBLE"}): "DOUBLE", frozenset({"DATE", "TIMESTAMP"}): "TIMESTAMP"}


@dataclass(frozen=True)
class LoadedTable:
    """One sheet loaded as a table.

    Attributes:
        name: the table's name in its file (snake_case, unique in the document).
        sheet: the sheet's name ('' for a CSV file).
        rows: data rows loaded (header rows not counted).
        card: the table card, the text embedded in the table's place (`card.table_card`).
    """

    name: str
    sheet: str
    rows: int
    card: str


def snake_name(text: str, used: set[str], *, fallback: str) -> str:
    """`text` as a lower-case snake_case identifier not in `used` (which gets it).

    Letters of any script are kept ('部门' stays), everything else becomes '_'; a name that starts
    with a digit gets `fallback`'s first letter and '_' in front; repeats get '_2', '_3'...

    Args:
        text: a sheet name or a column header.
        used: names taken so far, compared in lower case; updated.
        fallback: the name for a text without letters or digits ('column_3').

    Returns:
        The identifier.
    """
    base = re.sub(r"\W+", "_", text.strip().lower()).strip("_") or fallback
    if base[0].isdigit():
        base = f"{fallback[0]}_{base}"
    name, n = base, 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    used.add(name)
    return name


class TableWriter:
    """Loads the large sheets of one document into one duckdb file (created on the first sheet).

    Args:
        path: the duckdb file to write (it must not exist yet; the caller moves it into place).
        document: the document's file name, for the cards.
        infer_text_types: also type plain text cells that read as numbers or ISO dates (CSV, which
            has no cell types); False: only `NumberText`/`DateText` cells give a column a type.
    """

    def __init__(self, path: Path, *, document: str, infer_text_types: bool = False):
        self.path, self.document, self.infer_text_types = path, document, infer_text_types
        self.tables: list[LoadedTable] = []
        self._names: set[str] = set()
        self._con = None

    def add(self, sheet: str, header: list[str], rows: Iterable[list[str]], *, name: str | None = None) -> LoadedTable:
        """Load one sheet, or one table of a sheet, as a table.

        Args:
            sheet: the sheet's name ('' for CSV: the table is named after the document).
            name: what to name the table after instead of the sheet (a sheet's second table: its
                caption, or the sheet's name again, which gets '_2'); None: the sheet.
            header: the header row's cell texts ('' for an unnamed column); its width is the
                table's (cells beyond are dropped).
            rows: the data rows' cell texts (`NumberText`/`DateText` for typed cells); blank rows
                and rows that repeat the header are skipped.

        Returns:
            The table, with its card.
        """
        import duckdb  # noqa: PLC0415 - loaded by the parser process only when a sheet is large

        if self._con is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._con = duckdb.connect(str(self.path))
            # Bounded: the parser process runs under an address-space limit (RLIMIT_AS).
            self._con.execute("SET threads=2")
            self._con.execute("SET memory_limit='256MB'")
        stem = name or sheet or Path(self.document).stem
        name = snake_name(stem, self._names, fallback="table")
        used: set[str] = set()
        columns = [snake_name(h, used, fallback=f"column_{i + 1}") for i, h in enumerate(header)]
        width = len(columns)
        kinds: list[str | None] = [None] * width
        scratch = self.path.with_name(f"{self.path.name}.{name}.csv")
        count = 0
        with scratch.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            for cells in rows:
                cells = cells[:width]
                if not any(cells) or cells == header[: len(cells)]:
                    continue
                values = []
                for i, cell in enumerate(cells):
                    kind, value = self._kind(cell)
                    if kind is not None:
                        previous = kinds[i]
                        kinds[i] = kind if previous in (None, kind) else _WIDEN.get(frozenset({previous, kind}), "VARCHAR")
                    values.append(value)
                writer.writerow(values + [""] * (width - len(values)))
                count += 1
        types = {c: k or "VARCHAR" for c, k in zip(columns, kinds)}
        spec = "{" + ", ".join(f"{_literal(c)}: {_literal(t)}" for c, t in types.items()) + "}"
        try:
            self._con.execute(
                f"CREATE TABLE {quote(name)} AS SELECT * FROM read_csv(?, header=false, columns={spec}, "
                "nullstr='', quote='\"', escape='\"', auto_detect=false, parallel=false)",
                [str(scratch)],
            )
        finally:
            scratch.unlink(missing_ok=True)
        headers = dict(zip(columns, (" ".join(h.split()) for h in header)))
        # The sheet's own names travel with the table, for the card the query side builds again.
        self._con.execute(f"COMMENT ON TABLE {quote(name)} IS {_literal(sheet)}")
        for column, text in headers.items():
            self._con.execute(f"COMMENT ON COLUMN {quote(name)}.{quote(column)} IS {_literal(text)}")
        table = LoadedTable(name, sheet, count, table_card(
            self._con, name, sheet=sheet, document=self.document, headers=headers,
        ))
        self.tables.append(table)
        return table

    def close(self) -> None:
        """Write everything to the file and close it (nothing is written when no sheet was added)."""
        if self._con is not None:
            self._con.execute("CHECKPOINT")
            self._con.close()
            self._con = None

    def typed(self, cell: str) -> bool:
        """Whether `cell` would give its column a number or date type (a typed cell; with
        `infer_text_types`, text written as a number or an ISO date)."""
        return self._kind(cell)[0] not in (None, "VARCHAR")

    def _kind(self, cell: str) -> tuple[str | None, str]:
        if not cell:
            return None, ""
        if isinstance(cell, NumberText):
            return ("BIGINT" if isinstance(cell.value, int) else "DOUBLE"), repr(cell.value)
        if isinstance(cell, DateText):
            value = cell.value
            if isinstance(value, dt.datetime) and value.time() != dt.time():
                return "TIMESTAMP", value.isoformat(sep=" ")
            return "DATE", (value.date() if isinstance(value, dt.datetime) else value).isoformat()
        if self.infer_text_types:
            plain = cell.replace(",", "") if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", cell) else cell
            if _INTEGER.fullmatch(plain):
                return "BIGINT", plain
            if _DECIMAL.fullmatch(plain):
                return "DOUBLE", plain
            if _ISO_DATE.fullmatch(cell):
                return "DATE", cell
        return "VARCHAR", str(cell)


def quote(identifier: str) -> str:
    """`identifier` double-quoted for SQL (inner quotes doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
