"""The table card: the one text embedded for a table (its name, sheet, columns with types and examples, a few rows)."""

from __future__ import annotations

_RANGED = ("BIGINT", "DOUBLE", "DATE", "TIMESTAMP")
CARD_EXAMPLES = 3  # most frequent values shown per column
CARD_ROWS = 2  # sample rows shown (reservoir sample, fixed seed: the same card for the same table)


def table_card(con, table: str, *, sheet: str, document: str, headers: dict[str, str]) -> str:
    """Describe a loaded table for retrieval and for the model that writes its SQL.

    Args:
        con: an open duckdb connection holding `table`.
        table: the table's name.
        sheet: its sheet's name ('' for CSV).
        document: the document's file name.
        headers: the sheet's own header per column name (shown when it differs from the name).

    Returns:
        Lines: 'Table <name>: sheet ... of <document>, N rows.', one line per column
        ('name (header 'Original'; TYPE; range lo to hi; e.g. a, b, c)'), then sample rows.
    """
    q = _quote(table)
    n = con.execute(f"SELECT count(*) FROM {q}").fetchone()[0]
    where = f"sheet '{sheet}' of " if sheet else ""
    lines = [f"Table {table}: {where}{document}, {n:,} rows. Columns:"]
    for column, kind, *_ in con.execute(f"DESCRIBE {q}").fetchall():
        c = _quote(column)
        parts = []
        header = headers.get(column, "")
        if header and header != column:
            parts.append(f"header '{header}'")
        parts.append(kind)
        if kind in _RANGED:
            lo, hi = con.execute(f"SELECT min({c}), max({c}) FROM {q}").fetchone()
            parts.append(f"{lo} to {hi}")
        else:
            examples = [str(r[0]) for r in con.execute(
                f"SELECT {c} FROM {q} WHERE {c} IS NOT NULL GROUP BY {c} ORDER BY count(*) DESC, {c} LIMIT {CARD_EXAMPLES}"
            ).fetchall()]
            if examples:
                parts.append("e.g. " + ", ".join(examples))
        lines.append(f"- {column} ({'; '.join(parts)})")
    sample = con.execute(f"SELECT * FROM {q} USING SAMPLE reservoir({CARD_ROWS} ROWS) REPEATABLE (42)").fetchall()
    if sample:
        lines.append("Rows: " + " / ".join(" | ".join("" if v is None else str(v) for v in row) for row in sample))
    return "\n".join(lines)


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
