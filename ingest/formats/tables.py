"""Tables (sheets, CSV, document tables) to text: each row as 'Header: value' pairs under its header row."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

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


# A streamed table is cut into sections of about this many characters, each repeating the header
# row: one chunk's worth of rows for the default embedder (254-token chunks; 'Header: value' rows
# with codes and numbers run at 2-3 characters a token), so that the chunker does not cut a row.
GROUP_CHARS = 600
# Rows of a block looked at before it is laid out (caption, header, label block above).
_HEAD_ROWS = 4


def table_sections(
    rows: Iterable[tuple[int, list[str]]], *, heading: str, page: int | None = None, group_chars: int = GROUP_CHARS
) -> Iterator[Section]:
    """Sections for one sheet or CSV file, streamed: each sub-table cut into groups of rows.

    Rows are read one at a time and only the current group is held, so a sheet of any length
    costs the memory of one group (plus the sections the caller keeps). Each group repeats the
    sub-table's header row on its first line and is headed '<heading> — <caption>'; when a
    sub-table needs several groups, each heading adds the sheet rows it holds ('rows 1,201-1,240'),
    so that a chunk from row 150,000 still says which sheet, which columns and which rows it is. A
    short block of labels only (no numbers, at most three rows) directly above a block without its
    own header is taken as that block's header rather than emitted alone.

    Args:
        rows: (row number in the sheet, cell texts with positions kept), in order.
        heading: the sheet name ('' for CSV).
        page: a page number for the sections, if any.
        group_chars: about how many characters of rows one section holds.

    Yields:
        The sections, in sheet order.
    """
    labels: list[tuple[int, list[str]]] | None = None  # a label block that may head the next block
    for head, rest in _blocks(iter(rows)):
        first = head[0][1]
        above = None
        if labels is not None:
            above = [row for _, row in labels] if not is_header(first) else None
            if is_header(first) or _filled(first) <= 1:
                yield from _block_sections(labels, iter(()), None, heading, page, group_chars)
        labels = None
        if len(head) <= 3 and _labels_only([row for _, row in head]):
            labels = head
            continue
        yield from _block_sections(head, rest, above, heading, page, group_chars)
    if labels is not None:
        yield from _block_sections(labels, iter(()), None, heading, page, group_chars)


def _blocks(numbered: Iterator[tuple[int, list[str]]]):
    """Yield (first rows, iterator of the block's other rows) per block of non-blank rows; the
    caller consumes each block's iterator before asking for the next block."""
    numbered = iter(numbered)
    pending: tuple[int, list[str]] | None = None
    while True:
        if pending is None:
            for number, row in numbered:
                if _filled(row):
                    pending = (number, row)
                    break
            else:
                return
        head = [pending]
        pending = None
        ended = False
        for number, row in numbered:
            if not _filled(row):
                ended = True
                break
            head.append((number, row))
            if len(head) == _HEAD_ROWS:
                break
        else:
            ended = True
        rest = iter(()) if ended or len(head) < _HEAD_ROWS else _until_blank(numbered)
        yield head, rest
        for _ in rest:  # a caller that stopped early: skip the rest of the block
            pass


def _until_blank(numbered: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, list[str]]]:
    for number, row in numbered:
        if not _filled(row):
            return
        yield number, row


def _block_sections(
    head: list[tuple[int, list[str]]], rest: Iterator[tuple[int, list[str]]], above: list[list[str]] | None,
    heading: str, page: int | None, group_chars: int,
) -> Iterator[Section]:
    """One sub-table's sections: caption and header found in its first rows, then rows in groups."""
    rows = list(head)
    caption = ""
    if len(rows) > 2 and _filled(rows[0][1]) == 1 and _filled(rows[1][1]) > 1:
        caption = next(c for c in rows[0][1] if c.strip())
        rows = rows[1:]
    lead: list[str] = []
    header: list[str] | None = None
    if len(rows) > 1 and is_header(rows[0][1]):
        header, rows = rows[0][1], rows[1:]
    elif above and is_header(above[-1]):
        lead, header = [_joined(r) for r in above[:-1]], above[-1]
    title = f"{heading} — {caption}" if heading and caption else heading or caption
    top = lead + ([_joined(header)] if header else [])
    group: list[str] = []
    span: list[int] = []
    size = 0
    done: list[tuple[str, int, int]] = []  # one finished group held back: is the block one group?
    emitted = False

    def line(row: list[str]) -> str:
        return _row_line(row, header) if header else _joined(row)

    for number, row in _chain(rows, rest):
        text = line(row)
        if group and size + len(text) > group_chars:
            done.append(("\n".join(group), span[0], span[-1]))
            group, span, size = [], [], 0
            if len(done) > 1:
                emitted = True
                yield _group_section(done.pop(0), title, top, page, numbered=True)
        group.append(text)
        span.append(number)
        size += len(text) + 1
    if group:
        done.append(("\n".join(group), span[0], span[-1]))
    numbered = emitted or len(done) > 1
    for item in done:
        yield _group_section(item, title, top, page, numbered=numbered)
    if not done and top:  # a header without rows
        yield Section("\n".join(top), page=page, heading=title)


def _chain(first: list[tuple[int, list[str]]], rest: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, list[str]]]:
    yield from first
    yield from rest


def _group_section(item: tuple[str, int, int], title: str, top: list[str], page: int | None, *, numbered: bool) -> Section:
    text, first, last = item
    heading = f"{title} — rows {first:,}-{last:,}" if numbered and title else (f"rows {first:,}-{last:,}" if numbered else title)
    return Section("\n".join([*top, text]), page=page, heading=heading)


def _row_line(row: list[str], header: list[str]) -> str:
    """'Header: value; Header: value' (empty cells left out, a cell under no header shown bare)."""
    pairs = []
    for i, value in enumerate(row):
        if not value.strip():
            continue
        name = header[i].strip() if i < len(header) else ""
        pairs.append(f"{name}: {value}" if name and name != value else value)
    return "; ".join(pairs)


def _labels_only(block: list[list[str]]) -> bool:
    return len(block) <= 3 and is_header(block[-1]) and not any(_numeric(c) for row in block for c in row if c.strip())


def _joined(row: list[str]) -> str:
    return " | ".join(c for c in row if c.strip())


def _filled(row: list[str]) -> int:
    return sum(1 for cell in row if cell.strip())
