"""Issue 41 figure: how long `assistant search` takes, handed to a running server and in process.

A server (uvicorn in this process, the embedded store, MiniLM) serves `--files` handbook pages; the
command runs as a fresh process, as a user types it, `--runs` times each way: with the server (the
call is handed to it) and, after the server stops, in process (it loads the embedding model itself).
Wall seconds per command, process start and imports included; English queries (no translation).
The hand-off imports only the standard library (`server_queries.hand_off`); see also
`python -X importtime -m assistant.cli.main search QUERY --json` with a server running.

Usage: .venv/bin/python bench/bench_cli_search.py [--files 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.api.live_server import LiveServer  # noqa: E402
from tests.conftest import CORPUS_MODEL, make_settings, open_resources  # noqa: E402
from tests.corpus import HANDBOOK  # noqa: E402

QUERIES = ["how long must a password be", "who approves application access", "laptop standards"]


def _timed(env: dict, runs: int) -> list[float]:
    seconds = []
    for i in range(runs):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "assistant.cli.main", "search", QUERIES[i % len(QUERIES)], "--json"],
                              env=env, cwd=REPO, capture_output=True, text=True)
        seconds.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from ingest.pipeline import Ingestor

    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for n, page in enumerate(sorted(HANDBOOK.rglob("*.md"))[: args.files]):
            (docs / f"{n:03d}-{page.name}").write_bytes(page.read_bytes())
        settings = make_settings(Path(tmp) / "var", embedding_model=CORPUS_MODEL)
        res = open_resources(settings)
        Ingestor(res).sync(docs)
        res.prepare_query_runtime()
        server = LiveServer(settings, res).start()
        env = {**os.environ, "PYTHONPATH": str(REPO), "ASSISTANT_DATA_DIR": str(Path(tmp) / "var"),
               "ASSISTANT_PORT": str(server.port), "ASSISTANT_EMBEDDING_MODEL": CORPUS_MODEL}
        try:
            handed = _timed(env, args.runs)
        finally:
            server.stop()
            res.close()
        alone = _timed(env, args.runs)
    def p95(seconds: list[float]) -> float:
        return statistics.quantiles(seconds, n=20, method="inclusive")[-1]

    print(f"assistant search, {args.files} pages, {args.runs} runs each, wall seconds per command (median, p95, max):")
    for name, seconds in (("handed to the running server", handed), ("in process (no server)", alone)):
        print(f"  {name + ':':30s} {statistics.median(seconds):.2f} s, {p95(seconds):.2f} s, {max(seconds):.2f} s")


if __name__ == "__main__":
    main()
