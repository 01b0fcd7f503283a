"""Generated workbooks for the tests of large sheets as tables (issue 40): XLSX (openpyxl) and ODS
(written here: an ODS file is a zip of a `mimetype`, a manifest and `content.xml`)."""

from __future__ import annotations

import datetime as dt
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr


def write_sheet(path: Path, title: str, header: list[str], rows: Iterable[Iterable[object]]) -> Path:
    """Write a one-sheet XLSX workbook: `header`, then `rows` (numbers stay number cells); returns `path`."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = title
    sheet.append(header)
    for row in rows:
        sheet.append(list(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    book.save(path)
    return path


ODS_MIME = "application/vnd.oasis.opendocument.spreadsheet"
_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"'
)
_MANIFEST = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
    f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{ODS_MIME}"/>'
    '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
    "</manifest:manifest>"
)


def write_ods(
    path: Path,
    sheets: Mapping[str, Iterable[Sequence[object]]],
    *,
    spans: Mapping[str, Mapping[tuple[int, int], tuple[int, int]]] | None = None,
) -> Path:
    """Write an ODS workbook as LibreOffice Calc stores one; returns `path`.

    Args:
        path: the file to write.
        sheets: sheet name -> its rows; a cell is a str (string cell), an int or float (float cell),
            a date or datetime (date cell), a bool (boolean cell) or None (empty); [] is a blank row.
        spans: sheet name -> {(row, column) of a merged range's first cell, 0-based: (rows, columns)
            it spans}; the cells it covers are written as covered cells (their values are ignored).
    """
    body = []
    for name, rows in sheets.items():
        merged = dict((spans or {}).get(name, {}))
        covered = {(r + i, c + j) for (r, c), (h, w) in merged.items() for i in range(h) for j in range(w)} - set(
            merged
        )
        body.append(f"<table:table table:name={quoteattr(name)}>")
        for r, row in enumerate(rows):
            cells = []
            for c, value in enumerate(row):
                if (r, c) in covered:
                    cells.append("<table:covered-table-cell/>")
                    continue
                span = merged.get((r, c))
                extra = (
                    f' table:number-rows-spanned="{span[0]}" table:number-columns-spanned="{span[1]}"' if span else ""
                )
                cells.append(_ods_cell(value, extra))
            body.append("<table:table-row>" + "".join(cells or ["<table:table-cell/>"]) + "</table:table-row>")
        body.append("</table:table>")
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content {_NS}><office:body><office:spreadsheet>'
        + "".join(body)
        + "</office:spreadsheet></office:body></office:document-content>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), ODS_MIME, compress_type=zipfile.ZIP_STORED)  # first, unpacked
        archive.writestr("META-INF/manifest.xml", _MANIFEST, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
    return path


def _ods_cell(value: object, extra: str) -> str:
    if value is None or value == "":
        return f"<table:table-cell{extra}/>"
    if isinstance(value, bool):
        attrs, text = f'office:value-type="boolean" office:boolean-value="{str(value).lower()}"', str(value).upper()
    elif isinstance(value, (int, float)):
        attrs, text = f'office:value-type="float" office:value="{value!r}"', str(value)
    elif isinstance(value, (dt.date, dt.datetime)):
        attrs, text = f'office:value-type="date" office:date-value="{value.isoformat()}"', value.isoformat()
    else:
        attrs, text = 'office:value-type="string"', str(value)
    return f"<table:table-cell {attrs}{extra}><text:p>{escape(text)}</text:p></table:table-cell>"
