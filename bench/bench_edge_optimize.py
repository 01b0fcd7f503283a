"""Does `EdgeShard.optimize()` pay off for the collections the embedded default holds? Prints figures.

Builds a Qdrant Edge collection of N random unit 384-d points (one sparse vector each, the keyword
`acl` payload index, two thirds of the points open to `everyone`), then times filtered hybrid queries
(top 10, as the retriever sends them) before and after `optimize()`, and the optimisation itself.

Usage: .venv/bin/python bench/bench_edge_optimize.py [--points 20000] [--queries 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.core.vectorstore.base import ChunkPoint, SparseEmbedding  # noqa: E402
from assistant.core.vectorstore.edge import EdgeVectorStore  # noqa: E402

DIM = 384


def _latencies_ms(store: EdgeVectorStore, rng: np.random.Generator, n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        q = rng.standard_normal(DIM).astype(np.float32)
        started = time.perf_counter()
        store.query(dense=q.tolist(), sparse=SparseEmbedding(indices=[7], values=[1.0]), acl_any=["everyone"], limit=10)
        times.append((time.perf_counter() - started) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        store = EdgeVectorStore(Path(folder), "probe")
        store.ensure_collection(DIM)
        started = time.perf_counter()
        for start in range(0, args.points, 256):
            batch = []
            for i in range(start, min(start + 256, args.points)):
                v = rng.standard_normal(DIM).astype(np.float32)
                batch.append(ChunkPoint(
                    str(uuid.uuid4()), v / np.linalg.norm(v), SparseEmbedding(indices=[i % 5000, 7], values=[1.0, 1.0]),
                    {"doc_id": f"d{i // 10}", "acl": ["everyone"] if i % 3 else ["group:x"], "text": "t"},
                ))
            store.upsert(batch)
        upsert_s = time.perf_counter() - started
        before = _latencies_ms(store, rng, args.queries)
        started = time.perf_counter()
        store.shard.optimize()
        optimize_s = time.perf_counter() - started
        after = _latencies_ms(store, rng, args.queries)
        store.close()
    print(f"# Qdrant Edge, {args.points} points, {args.queries} filtered hybrid queries, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| stage | p50 ms | p95 ms |\n|---|---|---|")
    print(f"| before optimize | {before[0]:.2f} | {before[1]:.2f} |")
    print(f"| after optimize | {after[0]:.2f} | {after[1]:.2f} |")
    print(f"upsert {upsert_s:.1f} s; optimize {optimize_s:.1f} s; ratio p50 after/before {after[0] / before[0]:.2f}")


if __name__ == "__main__":
    main()
