"""Issue 20 figures: what operating the service costs.

1. Per-request cost of the observability middleware (request ID, latency histogram, one log event):
   the same trivial route served in-process (httpx's ASGI transport) with and without it, in
   interleaved rounds; CPU microseconds of this process per request (client included), so that other
   processes' load on a shared machine counts as little as it can.
2. One `/metrics` exposition (recorded metrics plus the SQL, Redis and breaker figures) on the index below.
3. Backup and restore of an embedded deployment (Qdrant Edge + SQLite) of `--files` handbook pages:
   seconds and bytes.

Usage: .venv/bin/python bench/bench_operations.py [--files 60] [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assistant.core.settings import Settings  # noqa: E402
from tests.corpus import HANDBOOK  # noqa: E402


def _app(with_middleware: bool):
    from fastapi import FastAPI

    from assistant.api.observability import RequestObservabilityMiddleware

    app = FastAPI()

    @app.get("/api/items/{item_id}")
    def item(item_id: str) -> dict:
        return {"id": item_id}

    if with_middleware:
        app.add_middleware(RequestObservabilityMiddleware)
    return app


async def _per_request_us(app, n: int) -> float:
    import httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
        started = time.process_time()  # CPU seconds of this process: other processes' load does not count
        for i in range(n):
            await client.get(f"/api/items/{i}")
        return (time.process_time() - started) / n * 1e6


def middleware_cost(requests: int, rounds: int) -> tuple[float, float]:
    """Median microseconds per request without and with the middleware."""
    logging.getLogger("assistant.api.requests").setLevel(logging.INFO)
    logging.getLogger("assistant.api.requests").addHandler(logging.NullHandler())
    logging.getLogger("assistant.api.requests").propagate = False
    plain, observed = _app(False), _app(True)
    without, with_ = [], []
    for _ in range(rounds):
        without.append(asyncio.run(_per_request_us(plain, requests)))
        with_.append(asyncio.run(_per_request_us(observed, requests)))
    return statistics.median(without), statistics.median(with_)


def _size(path: Path) -> int:
    """Bytes on disk (allocated blocks: Qdrant's preallocated files are mostly holes)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    without, with_ = middleware_cost(args.requests, args.rounds)
    print("| in-process request | CPU µs per request (median of rounds) |\n|---|---:|")
    print(f"| without the middleware | {without:.0f} |\n| with it | {with_:.0f} |\n| added | {with_ - without:.0f} |\n")

    from assistant.core.resources import Resources
    from assistant.operations.backup import restore_backup, take_backup
    from assistant.operations.metrics import OperationsCollector, adapter_in_use, exposition
    from assistant.operations.store import operations_counts
    from ingest.pipeline import Ingestor

    with tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        root = Path(tmp)
        folder = root / "docs"
        for path in sorted(HANDBOOK.rglob("*.md"))[: args.files]:
            target = folder / path.relative_to(HANDBOOK)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
        res = Resources.open(Settings(_env_file=None, data_dir=root / "var", embedding_model="builtin:all-MiniLM-L6-v2"))
        Ingestor(res).sync(folder)
        chunks = res.store.count()

        collector = OperationsCollector(
            adapter=lambda: adapter_in_use(res.db), admission_queued=lambda: 0, breaker_state=res.llm_breaker_state,
            sql_figures=lambda: operations_counts(res.db), queue_depth=lambda: None,
        )
        started = time.perf_counter()
        for _ in range(20):
            body, _ = exposition(collector, None)
        scrape_ms = (time.perf_counter() - started) / 20 * 1000

        started = time.perf_counter()
        take_backup(res, root / "backup")
        backup_s = time.perf_counter() - started
        res.close()
        started = time.perf_counter()
        restore_backup(root / "backup", Settings(_env_file=None, data_dir=root / "restored"))
        restore_s = time.perf_counter() - started
        print(f"| index | chunks | /metrics exposition (ms) | backup (s) | backup on disk (MiB) | restore (s) |\n"
              f"|---|---:|---:|---:|---:|---:|\n"
              f"| {args.files} handbook pages, Edge + SQLite | {chunks} | {scrape_ms:.1f} | {backup_s:.2f} | "
              f"{_size(root / 'backup') / 2**20:.1f} | {restore_s:.2f} |")


if __name__ == "__main__":
    main()
