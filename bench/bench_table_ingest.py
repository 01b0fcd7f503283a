"""Issue 40 figures: the 200,000-row workbook ingested as tables (one card per large sheet) against
today's path (every row in row-group chunks), in the same run on the same file.

The workbook is `bench_scans_and_sheets.write_workbook` (30 sheets: 'Inventory' with `--rows` rows and a
two-row merged header, 29 sheets of 50 rows). Tables: a whole `Ingestor.sync` (parser process: rows into
duckdb and the cards; then embedding and writing the points), timed end to end; the parser process's peak
resident memory (VmHWM) and this process's (ru_maxrss, the embedder loaded). Today's path
(ASSISTANT_TABLE_MIN_ROWS=0): parse and chunk in the parser process as `bench_scans_and_sheets` measures
it, the embedding rate from a 64-chunk sample, and the time the embedding of all its chunks would take at
that rate (it is hours: not run).

Usage: .venv/bin/python bench/bench_table_ingest.py [--rows 200000] [--sheets 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def table_path(path: Path, data_dir: Path) -> dict:
    """Ingest the workbook's folder with large sheets as tables; seconds, chunks, tables, peak RSS."""
    import duckdb

    from assistant.core.settings import Settings
    from assistant.tables.files import tables_file
    from ingest.pipeline import Ingestor, document_id
    from tests.conftest import open_resources

    settings = Settings(_env_file=None, data_dir=data_dir)
    res = open_resources(settings)
    ingestor = Ingestor(res)
    try:
        started = time.perf_counter()
        [outcome] = ingestor.sync(path.parent)
        seconds = time.perf_counter() - started
        with open(f"/proc/{ingestor.parser._proc.pid}/status") as status:
            hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    finally:
        ingestor.close()
    file = tables_file(settings.tables_dir, document_id(outcome.uri))
    with duckdb.connect(str(file), read_only=True) as con:
        tables = con.execute("SELECT table_name, estimated_size FROM duckdb_tables()").fetchall()
    res.close()
    return {
        "status": outcome.status, "seconds": seconds, "chunks": outcome.chunks, "tables": len(tables),
        "table_rows": max(n for _, n in tables) if tables else 0, "tables_file_mb": file.stat().st_size / 1e6,
        "parser_peak_rss_mb": hwm_kb / 1024,
        "this_process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sheets", type=int, default=30)
    args = parser.parse_args()
    from bench_scans_and_sheets import workbook_figures, write_workbook

    from ingest.isolated_parse import PART_CHUNKS

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "docs" / "inventory.xlsx"
        path.parent.mkdir()
        started = time.perf_counter()
        write_workbook(path, args.sheets, args.rows)
        print(f"workbook: {args.sheets} sheets, {args.rows:,} rows, {path.stat().st_size / 1e6:.1f} MB, "
              f"written in {time.perf_counter() - started:.1f} s", flush=True)
        tables = table_path(path, Path(folder) / "var")
        print(f"tables: {tables}", flush=True)
        os.environ["ASSISTANT_TABLE_MIN_ROWS"] = "0"  # the parser process reads it: today's path
        today = workbook_figures(path, args.rows, 64, PART_CHUNKS)
        today["embedding_all_chunks_h"] = today["chunks"] / today["embed_chunks_per_s"] / 3600
        print(f"today: {today}", flush=True)
    print("| figure | tables (issue 40) | today's row groups |\n|---|---|---|")
    for key in ("seconds", "chunks", "parser_peak_rss_mb", "this_process_peak_rss_mb"):
        print(f"| {key} | {tables[key]:,.1f} | {today[key]:,.1f} |")
    print(f"| embedding today's chunks at {today['embed_chunks_per_s']:.2f} chunks/s | - | {today['embedding_all_chunks_h']:.1f} h |")


if __name__ == "__main__":
    main()
