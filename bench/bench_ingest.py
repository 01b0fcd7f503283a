"""Issue 3 figures: ingesting the PostgreSQL 15 manual (Debian's postgresql-doc-15, HTML) with 1 and 2
worker processes: pages/s, chunks/s, peak RSS, and chunks/s as a fraction of the default embedder's
raw `embed_passages` throughput on the same chunks, measured in the same run. Prints Markdown.

The package is fetched with `apt-get download` into a cache folder and unpacked with `dpkg-deb -x`.
Each worker process ingests its share of the pages (round robin) into its own data folder, with
`cores / workers` embedding threads, after a one-page warm-up (model load and parser start-up are not
timed). Raw throughput: one process, every core, one `embed_passages` call over all chunks.

Usage: .venv/bin/python bench/bench_ingest.py [--pages N] [--workers 1 2] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PACKAGE = "postgresql-doc-15"
HTML_DIR = Path("usr/share/doc/postgresql-doc-15/html")


def fetch_manual(cache: Path) -> list[Path]:
    """The manual's HTML pages (sorted), downloaded and unpacked into `cache` on first use.

    Raises:
        subprocess.CalledProcessError: apt-get or dpkg-deb failed.
    """
    root = cache / "root"
    if not (root / HTML_DIR).is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        if not list(cache.glob(f"{PACKAGE}_*.deb")):
            subprocess.run(["apt-get", "download", PACKAGE], cwd=cache, check=True, capture_output=True)
        deb = sorted(cache.glob(f"{PACKAGE}_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return sorted((root / HTML_DIR).glob("*.html"))


def pick(pages: list[Path], n: int) -> list[Path]:
    """`n` pages spread evenly over the manual (all of them when n <= 0 or n >= len)."""
    if n <= 0 or n >= len(pages):
        return pages
    step = len(pages) / n
    return [pages[int(i * step)] for i in range(n)]


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _settings(data_dir: Path, threads: int):
    from assistant.core.settings import Settings

    return Settings(_env_file=None, data_dir=data_dir, embedding_threads=threads)


def child(folder: Path, warmup: Path, data_dir: Path, threads: int) -> None:
    """One worker process: warm up on one page, then time the sync of `folder`; prints JSON."""
    from sqlalchemy import select

    from assistant.core.db.models import Job
    from assistant.core.resources import Resources
    from ingest.pipeline import Ingestor

    res = Resources.open(_settings(data_dir, threads))
    ingestor = Ingestor(res)
    ingestor.sync(warmup)
    started = time.time()
    outcomes = ingestor.sync(folder)
    finished = time.time()
    ingestor.close()
    with res.db.session() as session:
        totals = session.scalars(select(Job).order_by(Job.id.desc())).first().totals
    res.close()
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o.status] = statuses.get(o.status, 0) + 1
    print(json.dumps({
        "started": started, "finished": finished, "pages": len(outcomes),
        "chunks": sum(o.chunks for o in outcomes if o.status == "done"), "statuses": statuses,
        "embed_s": totals.get("embed_s", 0.0), "parse_s": totals.get("parse_s", 0.0), "store_s": totals.get("store_s", 0.0),
    }), flush=True)


def run_workers(pages: list[Path], workers: int, scratch: Path) -> dict:
    """Ingest `pages` with `workers` processes; returns wall seconds, totals and peak RSS (bytes)."""
    threads = max(1, (os.cpu_count() or 1) // workers)
    procs = []
    for w in range(workers):
        folder, warm = scratch / f"w{workers}-{w}" / "pages", scratch / f"w{workers}-{w}" / "warmup"
        folder.mkdir(parents=True)
        warm.mkdir()
        for page in pages[w::workers]:
            _link_or_copy(page, folder / page.name)
        _link_or_copy(pages[0], warm / "warmup.html")
        cmd = [sys.executable, __file__, "--child", str(folder), str(warm), str(folder.parent / "var"), str(threads)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    peak = 0
    while any(p.poll() is None for p in procs):
        total = 0
        for p in procs:
            try:
                tree = [psutil.Process(p.pid)] + psutil.Process(p.pid).children(recursive=True)
                total += sum(q.memory_info().rss for q in tree)
            except psutil.NoSuchProcess:
                pass
        peak = max(peak, total)
        time.sleep(0.2)
    reports = []
    for p in procs:
        out = p.stdout.read().strip().splitlines()
        if p.returncode != 0 or not out:
            raise RuntimeError(f"worker process failed with status {p.returncode}")
        reports.append(json.loads(out[-1]))
    statuses: dict[str, int] = {}
    for r in reports:
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    wall = max(r["finished"] for r in reports) - min(r["started"] for r in reports)
    # Where each worker's time went: the embedding thread's busy time, the parser process's (both
    # overlap the rest), and the main thread's point writes.
    busy = {k: sum(r[k] for r in reports) / sum(r["finished"] - r["started"] for r in reports) for k in ("embed_s", "parse_s", "store_s")}
    return {
        "busy": busy,
        "workers": workers, "threads": threads, "wall_s": wall, "pages": sum(r["pages"] for r in reports),
        "chunks": sum(r["chunks"] for r in reports), "statuses": statuses, "peak_rss": peak,
    }


def raw_throughput(pages: list[Path]) -> tuple[int, float]:
    """Chunks of `pages` (parsed and cut as the pipeline does) and raw encode chunks/s over them."""
    from assistant.core.embedding.embedder import Embedder
    from assistant.core.errors import IngestError
    from ingest.chunking import Chunker
    from ingest.readers import parse_file

    settings = _settings(Path(tempfile.gettempdir()), 0)
    embedder = Embedder(settings.embedding.model, batch_size=settings.embedding.batch_size)
    chunker = Chunker(
        lambda t: embedder.tokenizer.encode(t, add_special_tokens=False), max_tokens=embedder.max_text_tokens,
        chunk_tokens=settings.ingest.chunk_size_tokens or getattr(embedder, "chunk_tokens", 0),
        overlap_tokens=settings.ingest.chunk_overlap_tokens,
    )
    texts = []
    for page in pages:
        try:
            texts += [c.embed_text for c in chunker.chunk(parse_file(page))]
        except IngestError:
            pass
    started = time.perf_counter()
    embedder.embed_passages(texts)
    return len(texts), len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=0, help="pages spread over the manual (0 = all 1,169)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "assistant-bench")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        folder, warm, data_dir, threads = args.child
        child(Path(folder), Path(warm), Path(data_dir), int(threads))
        return

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    all_pages = fetch_manual(args.cache)
    pages = pick(all_pages, args.pages)
    print(f"# PostgreSQL 15 manual: {len(pages)} of {len(all_pages)} HTML pages, {os.cpu_count()} cores, "
          f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    n_raw, raw_before = raw_throughput(pages)
    print(f"raw encode (before): {n_raw} chunks, {raw_before:.1f} chunks/s", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as scratch:
        for workers in args.workers:
            r = run_workers(pages, workers, Path(scratch))
            results.append(r)
            print(f"{workers} worker(s): {r}", flush=True)
    _, raw_after = raw_throughput(pages)
    raw = (raw_before + raw_after) / 2
    print(f"raw encode (after): {raw_after:.1f} chunks/s; reference = mean {raw:.1f} chunks/s; "
          f"load average at end {os.getloadavg()[0]:.1f}\n")
    print("| workers | torch threads each | pages | chunks | wall s | pages/s | chunks/s | chunks/s ÷ raw encode "
          "| share of time in embed / parse / store calls | peak RSS (MiB, all processes) | outcomes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        cps = r["chunks"] / r["wall_s"]
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        shares = " / ".join(f"{r['busy'][k]:.2f}" for k in ("embed_s", "parse_s", "store_s"))
        print(f"| {r['workers']} | {r['threads']} | {r['pages']} | {r['chunks']} | {r['wall_s']:.0f} | "
              f"{r['pages'] / r['wall_s']:.2f} | {cps:.1f} | {cps / raw:.2f} | "
              f"{shares} | "
              f"{r['peak_rss'] / 2**20:.0f} | {outcomes} |")


if __name__ == "__main__":
    main()
