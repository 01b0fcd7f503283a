"""Issue 2 figures on the handbook: ingestion throughput against raw embedding, search latency, answer
time to first token and tokens/s, peak RSS. Prints a Markdown table.

Usage: .venv/bin/python bench/bench_handbook.py [--files N] [--queries N]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assistant.answering.events import Token  # noqa: E402
from assistant.composition import Assistant  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from ingest.chunking import Chunker  # noqa: E402
from ingest.pipeline import Ingestor, iter_files  # noqa: E402
from ingest.readers import parse_file  # noqa: E402

HANDBOOK = REPO.parent / "shared" / "corpus" / "handbook-en" / "sourcegraph-handbook" / "content"
QUESTIONS = [
    "What do I have to set up on my laptop before I access company data?",
    "How long should my passwords be, and may I use the browser's password autofill?",
    "How do I request access to an application I didn't get at onboarding?",
    "What is the screen lock timeout?",
    "How do I submit an expense report?",
    "Who approves time off?",
    "What should I do if my laptop is stolen?",
    "How are on-call incidents handled?",
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=0, help="limit to the first N files (0 = all)")
    parser.add_argument("--queries", type=int, default=200, help="search queries timed")
    parser.add_argument("--answers", type=int, default=4, help="answers timed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(_env_file=None, data_dir=Path(tmp) / "var")
        res = Resources.open(settings)
        ingestor = Ingestor(res)  # loads the embedder
        source = HANDBOOK
        if args.files:
            source = Path(tmp) / "subset"
            for f in list(iter_files(HANDBOOK))[: args.files]:
                target = source / f.relative_to(HANDBOOK)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(f.read_bytes())

        t0 = time.perf_counter()
        outcomes = ingestor.sync(source)
        ingest_s = time.perf_counter() - t0
        n_chunks = sum(o.chunks for o in outcomes)
        n_files = len(outcomes)

        # Baseline in the same process: the same chunk texts through SentenceTransformer.encode alone.
        embedder = res.embedder
        chunker = Chunker(
            lambda t: embedder.tokenizer.encode(t, add_special_tokens=False),
            max_tokens=embedder.max_text_tokens,
            chunk_tokens=settings.ingest.chunk_size_tokens,
            overlap_tokens=settings.ingest.chunk_overlap_tokens,
        )
        texts = [c.embed_text for f in iter_files(source) for c in chunker.chunk(parse_file(f))]
        model = res.embedder.model
        t0 = time.perf_counter()
        model.encode(texts, batch_size=settings.embedding.batch_size, normalize_embeddings=True, show_progress_bar=False)
        raw_s = time.perf_counter() - t0

        assistant = Assistant.build(res)
        latencies = []
        for i in range(args.queries):
            q = QUESTIONS[i % len(QUESTIONS)] + ("" if i < len(QUESTIONS) else f" ({i})")
            t0 = time.perf_counter()
            assistant.retriever.retrieve(q, principal=ANONYMOUS, top_k=5)
            latencies.append((time.perf_counter() - t0) * 1000)

        ttfts, rates = [], []

        async def one(question: str) -> None:
            t0 = time.perf_counter()
            first = None
            tokens = 0
            async for event in assistant.answerer.stream(question, principal=ANONYMOUS):
                if isinstance(event, Token):
                    tokens += 1
                    first = first or time.perf_counter()
            end = time.perf_counter()
            if first:
                ttfts.append(first - t0)
                if tokens > 1 and end > first:
                    rates.append((tokens - 1) / (end - first))

        asyncio.run(one(QUESTIONS[0]))  # warm-up: loads the model
        ttfts.clear()
        rates.clear()
        for q in QUESTIONS[: args.answers]:
            asyncio.run(one(q))
        res.close()

    ours = n_chunks / ingest_s
    raw = len(texts) / raw_s
    print("| figure | value |")
    print("|---|---|")
    print(f"| files, chunks | {n_files}, {n_chunks} |")
    print(f"| ingestion wall time | {ingest_s:.1f} s |")
    print(f"| ingestion chunks/s (ours) | {ours:.1f} |")
    print(f"| raw SentenceTransformer.encode chunks/s, same chunks | {raw:.1f} |")
    print(f"| ratio ours / raw | {ours / raw:.2f} |")
    print(f"| search latency p50 / p95 (query embedding included, {args.queries} queries) | {statistics.median(latencies):.1f} ms / {pct(latencies, 95):.1f} ms |")
    if ttfts:
        print(f"| ask: time to first token p50 (retrieval + prompt + llama.cpp) | {statistics.median(ttfts):.2f} s |")
        print(f"| ask: generation rate (stream events/s) p50 | {statistics.median(rates):.1f} tokens/s |")
    print(f"| peak RSS | {peak_rss_mib():.0f} MiB |")


if __name__ == "__main__":
    main()
