"""Tables (sheets, CSV, document tables) to text: each row as 'Header: value' pairs under its header row."""

from __future__ import annotations

import datetime as dt
from typing import Iterable

from ingest.formats.document import Section


def cell_text(value: object) -> str:
    """A cell value as text.

    Args:
        value: what the spreadsheet library returned (str, int, float, bool, date, time, None).

    Returns:
        Integral floats without '.0', dates in ISO 8601, booleans as TRUE/FALSE, None as '';
        whitespace collapsed.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.10g}"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return " ".join(str(value).split())


def split_blocks(rows: Iterable[list[str]]) -> list[list[list[str]]]:
    """Cut rows into sub-tables at blank rows (a sheet often holds several tables one under another).

    Args:
        rows: rows of cell texts.

    Returns:
        The non-blank rows, grouped into blocks in order.
    """
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    for row in rows:
        if any(cell.strip() for cell in row):
            current.append(row)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def block_text(block: list[list[str]], *, above: list[list[str]] | None = None) -> tuple[str, str]:
    """One sub-table as text.

    The header is the first row when it looks like one (`is_header`), else the last row of
    `above`: a block of labels that a blank row separates from its data, as report-style sheets
    often have. A first row with a single filled cell above a fuller row is a caption. Every data
    row becomes one line of 'Header: value; Header: value' (empty cells left out, a cell under no
    header shown bare), so that a chunk cut from a long table still says what each value is. A
    block without a header comes out as ' | '-joined rows.

    Args:
        block: rows of cell texts, positions kept (empty strings for empty cells).
        above: the label rows just above this block, if any.

    Returns:
        (caption, text); caption is '' when the block has none.
    """
    rows = list(block)
    caption = ""
    if len(rows) > 2 and _filled(rows[0]) == 1 and _filled(rows[1]) > 1:
        caption = next(c for c in rows[0] if c.strip())
        rows = rows[1:]
    lead: list[list[str]] = []
    if len(rows) > 1 and is_header(rows[0]):
        header, body = rows[0], rows[1:]
    elif above and is_header(above[-1]):
        lead, header, body = above[:-1], above[-1], rows
    else:
        return caption, "\n".join(_joined(row) for row in rows)
    lines = [_joined(row) for row in lead] + [_joined(header)]
    for row in body:
        pairs = []
        for i, value in enumerate(row):
            if not value.strip():
                continue
            name = header[i].strip() if i < len(header) else ""
            pairs.append(f"{name}: {value}" if name and name != value else value)
        lines.append("; ".join(pairs))
    return caption, "\n".join(lines)


def is_header(row: list[str]) -> bool:
    """Tell a header row from a data row.

    Args:
        row: cell texts.

    Returns:
        True for at least two distinct filled cells, none of them a number.
    """
    labels = [c.strip() for c in row if c.strip()]
    return len(labels) >= 2 and len(set(labels)) == len(labels) and not any(_numeric(c) for c in labels)


def _numeric(text: str) -> bool:
    try:
        float(text.replace(",", "").replace("%", "").replace("—", "").strip() or "x")
    except ValueError:
        return False
    return True


def table_sections(rows: Iterable[list[str]], *, heading: str, page: int | None = None) -> list[Section]:
    """Sections for one sheet or CSV file: one per sub-table, headed '<heading> — <caption>'.

    A short block of labels only (no numbers, at most three rows) directly above a block without
    its own header is taken as that block's header rather than emitted alone.

    Args:
        rows: rows of cell texts, positions kept.
        heading: the sheet name ('' for CSV).
        page: a page number for the sections, if any.

    Returns:
        The sections, in sheet order.
    """
    sections = []
    blocks = split_blocks(rows)
    for i, block in enumerate(blocks):
        follower = blocks[i + 1] if i + 1 < len(blocks) else None
        if _labels_only(block) and follower is not None and not is_header(follower[0]) and _filled(follower[0]) > 1:
            continue  # emitted as the header of the next block
        above = blocks[i - 1] if i > 0 and _labels_only(blocks[i - 1]) and not is_header(block[0]) else None
        caption, text = block_text(block, above=above)
        title = f"{heading} — {caption}" if heading and caption else heading or caption
        sections.append(Section(text, page=page, heading=title))
    return sections


def _labels_only(block: list[list[str]]) -> bool:
    return len(block) <= 3 and is_header(block[-1]) and not any(_numeric(c) for row in block for c in row if c.strip())


def _joined(row: list[str]) -> str:
    return " | ".join(c for c in row if c.strip())


def _filled(row: list[str]) -> int:
    return sum(1 for cell in row if cell.strip())
