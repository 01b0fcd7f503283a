"""`make bench`: the quick runs of the benchmarks in bench/, one after the other, each printing its figures.

Each benchmark runs as its own process (they load models and start servers of their own) with small
arguments, so that the whole takes minutes, not hours; the full runs behind docs/benchmarks.md are in
each script's docstring. A failed benchmark is reported and the next one runs; the exit status is 1
when any failed.

Usage: .venv/bin/python bench/run_all.py [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# name -> (script, quick arguments). Left out: bench_ingest (downloads the PostgreSQL manual with apt),
# bench_retrieval (needs an index built beforehand, see its docstring), the calibration and training scripts.
QUICK_RUNS: dict[str, tuple[str, list[str]]] = {
    "embedders": ("bench_embedders.py", ["--every", "100", "--chunks", "100", "--rounds", "1", "--no-pipeline"]),
    "handbook": ("bench_handbook.py", ["--files", "40", "--queries", "50", "--answers", "2"]),
    "llm": ("bench_llm.py", ["--models", "smollm2", "--raw-prompts", "1", "--raw-tokens", "16"]),
    "load": ("bench_load.py", ["--streams", "20", "--duration-s", "15", "--ramp-s", "5"]),
    "helpdesk": ("bench_helpdesk.py", ["--limit", "4", "--distractors", "5"]),
    "operations": ("bench_operations.py", ["--files", "20", "--requests", "500", "--rounds", "3"]),
}


def run(name: str) -> tuple[int, float]:
    """Run one quick benchmark with this interpreter, its output passed through.

    Returns:
        `(exit status, seconds)`.
    """
    script, args = QUICK_RUNS[name]
    print(f"\n## {name}: {script} {' '.join(args)}\n", flush=True)
    started = time.perf_counter()
    status = subprocess.call([sys.executable, str(BENCH / script), *args], cwd=BENCH.parent)
    return status, time.perf_counter() - started


def main() -> None:
    """Run the selected quick benchmarks and print a summary table (Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(QUICK_RUNS), help="run these only")
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    args = parser.parse_args()
    if args.list:
        for name, (script, quick) in QUICK_RUNS.items():
            print(f"{name}: {script} {' '.join(quick)}")
        return
    results = {name: run(name) for name in (args.only or QUICK_RUNS)}
    print("\n| benchmark | exit status | seconds |\n|---|---:|---:|")
    for name, (status, seconds) in results.items():
        print(f"| {name} | {status} | {seconds:.0f} |")
    sys.exit(1 if any(status for status, _ in results.values()) else 0)


if __name__ == "__main__":
    main()
