"""ODS against XLSX: the 30-sheet, 200,000-row workbook (`bench_scans_and_sheets.write_workbook`, merged
two-row header) parsed into tables and cards (`parse_file` with a tables file, as the parser process
runs it: rows into duckdb, the cards, the 29 small sheets as row groups), the same sheets written as
ODS (`tests/workbooks.write_ods`, the same merged ranges), each parsed in a fresh process: seconds and
peak memory growth of each, and the loaded tables compared (row count, column types, one sum).

Usage: PYTHONPATH=. .venv/bin/python bench/bench_ods_tables.py [--rows 200000] [--sheets 30]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def as_ods(xlsx: Path, ods: Path) -> None:
    """The workbook's cells as stored (numbers, text) and its merged header, written as ODS."""
    from python_calamine import CalamineWorkbook

    from tests.workbooks import write_ods

    book = CalamineWorkbook.from_path(str(xlsx))
    sheets = {name: book.get_sheet_by_name(name).to_python(skip_empty_area=False) for name in book.sheet_names}
    spans = {"Inventory": {(0, 0): (2, 1), (0, 1): (1, 2), (0, 3): (2, 1), (0, 4): (2, 1), (0, 5): (2, 1)}}
    write_ods(ods, sheets, spans=spans)


def parse(path: Path, tables: Path) -> dict:
    """Parse in a fresh process (as the parser process does), for its own peak memory."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_parse, (path, tables))


def _parse(path: Path, tables: Path) -> dict:
    import duckdb

    from ingest.formats.limits import Limits
    from ingest.readers import parse_file

    before = _hwm_mb()
    started = time.perf_counter()
    doc = parse_file(path, limits=replace(Limits(), table_min_rows=200, tables_path=tables), streamed=True)
    sections = list(doc.all_sections())
    seconds = time.perf_counter() - started
    grown = _hwm_mb() - before
    with duckdb.connect(str(tables), read_only=True) as con:
        types = con.execute("SELECT column_name, data_type FROM information_schema.columns ORDER BY ordinal_position").fetchall()
        count, total = con.execute('SELECT count(*), sum("value_eur") FROM inventory').fetchone()
    return {"seconds": seconds, "peak_growth_mb": grown, "sections": len(sections), "rows": count, "sum": total, "types": types}


def _hwm_mb() -> float:
    """This process's peak resident memory (VmHWM), MB: unlike ru_maxrss, not carried over from the
    parent through exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sheets", type=int, default=30)
    args = parser.parse_args()
    from bench_scans_and_sheets import write_workbook

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        xlsx, ods = root / "inventory.xlsx", root / "inventory.ods"
        write_workbook(xlsx, args.sheets, args.rows)
        as_ods(xlsx, ods)
        print(f"files: XLSX {xlsx.stat().st_size / 1e6:.1f} MB, ODS {ods.stat().st_size / 1e6:.1f} MB", flush=True)
        xlsx_figures = parse(xlsx, root / "xlsx.duckdb")
        ods_figures = parse(ods, root / "ods.duckdb")
    print("\n| file | parse into tables | peak RSS growth of the parsing process (the readers' imports included) | sections | Inventory rows | sum(value_eur) |\n|---|---|---|---|---|---|")
    for name, f in (("XLSX (openpyxl)", xlsx_figures), ("ODS (calamine)", ods_figures)):
        print(f"| {name} | {f['seconds']:.1f} s | {f['peak_growth_mb']:.0f} MB | {f['sections']} | {f['rows']:,} | {f['sum']:,} |")
    print(f"ratio ODS/XLSX time: {ods_figures['seconds'] / xlsx_figures['seconds']:.2f}; "
          f"same column types: {ods_figures['types'] == xlsx_figures['types']}")


if __name__ == "__main__":
    main()
