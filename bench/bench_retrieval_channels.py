"""Fusion and document-scoring variants on the ablation's index (issue 42, part 1): a second dense
channel (all-MiniLM-L6-v2 over the same chunks' passage text, English pages only, used for English
questions), document scores from several chunks instead of the best one, channel weights and prefetch
depth, fitted on the development splits and reported on the held-aside split.

Usage:

    nice .venv/bin/python bench/bench_retrieval_channels.py [--distractors 15] [--json out.json]

Documents, chunks and e5 vectors are those of `bench_retrieval_ablation.py` (`--dev2`: of its `--dev2`; same draw, same
cache: `--cache`, default /work/cache/retrieval); MiniLM vectors of the e5 chunks are cached beside them
(`minilm-on-e5-chunks.npz`). Each question's single rankings are computed once: e5 and MiniLM dense by
exact cosine over the chunk matrix (the store's dense query over a collection this size is exact), the
keyword ranking (with the CC-CEDICT expansion, as the product plans it) by the product's store query.
Fusion is Qdrant's distribution-based score fusion (DBSF) re-computed here (each list's scores mapped
from [mean - 3 sd, mean + 3 sd] to [0, 1], summed per chunk, optionally weighted), so that a third
channel and document-level scores can be tried without building the product's query for each; the row
"DBSF e5 + sparse+dict (recomputed)" is checked against the product's own search (`Retriever.search`,
first row), question by question (the count of differing rankings is printed).

Metrics: R@1 / R@5 / nDCG@10 of distinct documents per split and language (`assistant.evaluation.metrics`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_retrieval_ablation import (  # noqa: E402
    DEPTH_DOCS,
    DEV2_SETS,
    DEV_SETS,
    HELDOUT_SETS,
    VectorCache,
    pick_documents,
    rankings,
    score,
)

from assistant.core.embedding.embedder import BUILTIN_E5, BUILTIN_MINILM, Embedder  # noqa: E402
from assistant.core.index.payload import ChunkPayload, chunk_point, document_id  # noqa: E402
from assistant.core.language import document_language  # noqa: E402
from assistant.core.vectorstore.edge import EdgeVectorStore  # noqa: E402
from assistant.evaluation.dataset import Question, load_questions  # noqa: E402
from assistant.retrieval.crosslingual import translate  # noqa: E402
from assistant.retrieval.retriever import Retriever  # noqa: E402

DEPTH = 200  # chunks of each single ranking kept per question


def bigram_terms(text: str) -> list[str]:
    """The product's index terms (`sparse.terms`) plus every pair of adjacent CJK characters of the text
    (overlapping character bigrams, the classic Chinese IR unit: they match when word segmentation of a
    question and of a page disagree)."""
    from assistant.core.index import sparse
    from assistant.core.language import CJK_RUN

    out = sparse.terms(text)
    for run in CJK_RUN.finditer(text):
        chars = run.group()
        out += ["\u0002" + chars[n : n + 2] for n in range(len(chars) - 1)]
    return out


class PyBM25:
    """BM25 over the chunks' passage texts in Python, weighted as the product's sparse vectors are
    (`sparse.encode_document`: saturated term frequency, fixed average length; IDF as Qdrant's modifier,
    ln(1 + (N - df + 0.5) / (df + 0.5))), so that another tokenizer can be compared with the product's."""

    def __init__(self, texts: Sequence[str], tokenize: Callable[[str], list[str]]):
        from collections import Counter

        from assistant.core.index.sparse import AVG_CHUNK_TERMS, K1, B

        self.tokenize = tokenize
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for n, text in enumerate(texts):
            counts = Counter(tokenize(text))
            norm = K1 * (1 - B + B * (sum(counts.values()) or 1) / AVG_CHUNK_TERMS)
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((n, tf * (K1 + 1) / (tf + norm)))
        self.n = len(texts)

    def search(self, weights: dict[str, float], depth: int) -> tuple[np.ndarray, np.ndarray]:
        scores: dict[int, float] = {}
        for term, w in weights.items():
            post = self.postings.get(term)
            if not post:
                continue
            idf = float(np.log(1 + (self.n - len(post) + 0.5) / (len(post) + 0.5)))
            for n, v in post:
                scores[n] = scores.get(n, 0.0) + w * idf * v
        top = sorted(scores.items(), key=lambda kv: -kv[1])[:depth]
        return np.array([n for n, _ in top], dtype=int), np.array([v for _, v in top], dtype=np.float32)

    def query_weights(self, question: str, translation, translation_weight: float) -> dict[str, float]:
        """Weight 1 per distinct term of the question, the dictionary translation's terms (each source
        word's translations sharing `translation_weight`) tokenized the same way, as `encode_query`."""
        out: dict[str, float] = {}
        if translation:
            for term, w in translation.weights().items():
                for t in set(self.tokenize(term)) or {term}:
                    out[t] = max(out.get(t, 0.0), w * translation_weight)
        out.update((t, 1.0) for t in self.tokenize(question))
        return out


def dbsf(lists: Sequence[tuple[np.ndarray, np.ndarray]], weights: Sequence[float], prefetch: int) -> dict[int, float]:
    """Chunk index -> fused score: each (indices, scores) list cut to its first `prefetch`, its scores
    mapped from [mean - 3 sd, mean + 3 sd] to [0, 1] (Qdrant's DBSF), times its weight, summed."""
    out: dict[int, float] = {}
    for (idx, sc), w in zip(lists, weights):
        idx, sc = idx[:prefetch], sc[:prefetch]
        if len(sc) == 0 or w == 0:
            continue
        mean, sd = float(np.mean(sc)), float(np.std(sc, ddof=1)) if len(sc) > 1 else 0.0
        low, high = mean - 3 * sd, mean + 3 * sd
        norm = (sc - low) / (high - low) if high > low else np.ones_like(sc)
        for i, v in zip(idx.tolist(), norm.tolist()):
            out[i] = out.get(i, 0.0) + w * v
    return out


def doc_ranking(
    chunk_scores: dict[int, float],
    doc_of: Sequence[str],
    *,
    limit: int,
    second: float = 0.0,
    third: float = 0.0,
    doc_bonus: dict[str, float] | None = None,
) -> list[str]:
    """Documents best first from fused chunk scores: the first `limit` chunks (the product's fetch), each
    document scored by its best chunk plus `second` x its second and `third` x its third best."""
    top = sorted(chunk_scores.items(), key=lambda kv: -kv[1])[:limit]
    per: dict[str, list[float]] = {}
    for i, s in top:
        per.setdefault(doc_of[i], []).append(s)

    def agg(scores: list[float]) -> float:
        scores = scores + [0.0, 0.0]
        return scores[0] + second * scores[1] + third * scores[2]

    bonus = doc_bonus or {}
    return sorted(per, key=lambda d: -(agg(per[d]) + bonus.get(d, 0.0)))[:DEPTH_DOCS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--distractors", type=int, default=15)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/retrieval"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--smoke", type=int, default=0, help="check the bench on this many pages only")
    parser.add_argument(
        "--dev2", action="store_true", help="also measure the second development set (its answer pages join the index)"
    )
    parser.add_argument("--no-minilm", action="store_true", help="skip the MiniLM channel (no second embedding)")
    parser.add_argument(
        "--minilm-only",
        action="store_true",
        help="fill the cache of the MiniLM vectors and stop (may run beside a run that embeds e5)",
    )
    args = parser.parse_args()

    dev = [q for p in DEV_SETS for q in load_questions(p)]
    dev2 = [q for p in DEV2_SETS for q in load_questions(p)] if args.dev2 else []
    held = [q for p in HELDOUT_SETS for q in load_questions(p)]
    docs = pick_documents(dev + held, args.distractors, args.seed, extra=dev2)
    if args.smoke:  # a quick check of the bench itself: a few pages and the questions they answer
        docs = docs[:: max(1, len(docs) // args.smoke)][: args.smoke]
        kept = {d.source for d in docs}
        dev, dev2, held = ([q for q in qs if set(q.answer_files) & kept] for qs in (dev, dev2, held))
    splits = {"dev": dev, **({"dev2": dev2} if dev2 else {}), "heldout": held}
    questions = [q for qs in splits.values() for q in qs if q.answerable]

    from ingest.chunking import Chunker
    from ingest.readers import parse_file

    e5 = Embedder(BUILTIN_E5)
    chunker = Chunker(
        lambda t: e5.tokenizer.encode(t, add_special_tokens=False),
        max_tokens=e5.max_text_tokens,
        chunk_tokens=getattr(e5, "chunk_tokens", 0) or e5.max_text_tokens,
    )
    rows = []
    for doc in docs:
        parsed = parse_file(doc.path)
        chunks = chunker.chunk(parsed)
        lang = document_language(" ".join(c.text for c in chunks[:5]))
        rows += [(doc, parsed.title, lang, doc.path.as_uri(), c) for c in chunks]
    size = chunker.chunk_tokens
    print(f"{len(docs)} documents, {len(rows)} chunks ({size} tokens)", file=sys.stderr, flush=True)
    cache_e5 = VectorCache(args.cache, f"{e5.name.replace(':', '_').replace('/', '_')}-{size}")
    started = time.perf_counter()
    E = None if args.minilm_only else cache_e5.embed(e5, [c.embed_text for *_r, c in rows])
    en_rows = [n for n, r in enumerate(rows) if r[2] == "en"]
    M = None
    minilm = None
    if not args.no_minilm:
        minilm = Embedder(BUILTIN_MINILM)
        cache_m = VectorCache(args.cache, "minilm-on-e5-chunks")
        t0 = time.perf_counter()
        before = len(cache_m.vectors)
        M = cache_m.embed(minilm, [rows[n][4].embed_text for n in en_rows])
        fresh = len(cache_m.vectors) - before
        if fresh:
            rate = fresh / (time.perf_counter() - t0)
            print(f"MiniLM second vector: {fresh} English chunks at {rate:.1f} chunks/s", flush=True)
    print(f"embedding done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    if E is None:
        return

    doc_of = [r[0].source for r in rows]
    titles: dict[str, str] = {}
    for doc, title, *_r in rows:
        titles.setdefault(doc.source, title or Path(doc.source).stem)
    title_docs = sorted(titles)
    T = cache_e5.embed(e5, [titles[d] for d in title_docs])
    title_scores: dict[str, tuple[list[str], np.ndarray]] = {}
    with tempfile.TemporaryDirectory(prefix="channels-") as tmp:
        store = EdgeVectorStore(Path(tmp) / "e5", "chunks", model=e5.name)
        store.ensure_collection(e5.dim)
        points = [
            chunk_point(
                ChunkPayload(
                    doc_id=document_id(uri),
                    chunk_index=c.position,
                    text=c.text,
                    title=title,
                    heading=c.heading,
                    page=c.page,
                    source=doc.source,
                    uri=uri,
                    acl=["everyone"],
                    lang=lang,
                ),
                dense=v.tolist(),
                passage=c.embed_text,
            )
            for (doc, title, lang, uri, c), v in zip(rows, E)
        ]
        for n in range(0, len(points), 256):
            store.upsert(points[n : n + 256])
        index_of = {p.id: n for n, p in enumerate(points)}
        product = Retriever(store=store, embedder=e5, translate=translate, interleave_depth=0)
        runs: dict[str, dict[str, dict[str, list[str]]]] = {}
        runs["today's default (product search)"] = {name: rankings(product, qs) for name, qs in splits.items()}
        for w in (0.25, 0.5):
            weighted = Retriever(store=store, embedder=e5, translate=translate, interleave_depth=0, next_chunk_weight=w)
            runs[f"product search, next_chunk_weight {w}"] = {
                name: rankings(weighted, qs) for name, qs in splits.items()
            }

        single: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {"e5": {}, "minilm": {}, "kw": {}, "kw0": {}}
        plain = Retriever(store=store, embedder=e5, interleave_depth=0)
        for q in questions:
            qv = e5.embed_query(q.question)
            tc = T @ qv
            to = np.argsort(-tc)
            title_scores[q.id] = ([title_docs[n] for n in to], tc[to])
            cos = E @ qv
            order = np.argsort(-cos)[:DEPTH]
            single["e5"][q.id] = (order, cos[order])
            if M is not None and minilm is not None:
                mv = minilm.embed_query(q.question)
                mc = M @ mv
                mo = np.argsort(-mc)[:DEPTH]
                single["minilm"][q.id] = (np.asarray(en_rows)[mo], mc[mo])
            for key, retr in (("kw", product), ("kw0", plain)):
                plan = retr._plan(q.question, DEPTH_DOCS)
                hits = (
                    store.query(dense=None, sparse=plan.keywords, acl_any=["everyone"], limit=DEPTH, mode="sparse")
                    if plan.keywords.indices
                    else []
                )
                single[key][q.id] = (
                    np.array([index_of[h.id] for h in hits], dtype=int),
                    np.array([h.score for h in hits], dtype=np.float32),
                )
        store.close()

    from assistant.retrieval.retriever import DEFAULT_TRANSLATION_WEIGHT

    texts = [r[4].embed_text for r in rows]
    for key, tok in (("pykw", None), ("bigram", bigram_terms)):
        from assistant.core.index import sparse as sparse_mod

        bm25 = PyBM25(texts, tok or sparse_mod.terms)
        single[key] = {}
        for q in questions:
            tr = translate(q.question)
            single[key][q.id] = bm25.search(bm25.query_weights(q.question, tr, DEFAULT_TRANSLATION_WEIGHT), DEPTH)

    def record(label: str, make: Callable[[Question], list[str]]) -> None:
        runs[label] = {name: {q.id: make(q) for q in qs if q.answerable} for name, qs in splits.items()}

    def fused(
        q: Question,
        channels: Sequence[tuple[str, float]],
        prefetch: int = 40,
        limit: int = 40,
        second: float = 0.0,
        third: float = 0.0,
        title: float = 0.0,
    ) -> list[str]:
        lists = [(single[c][q.id], w) for c, w in channels if q.id in single[c]]
        bonus = None
        if title:
            names, sc = title_scores[q.id]
            sc = sc[:prefetch]
            mean, sd = float(np.mean(sc)), float(np.std(sc, ddof=1))
            bonus = {d: title * float((v - mean + 3 * sd) / (6 * sd)) for d, v in zip(names, sc)}
        return doc_ranking(
            dbsf([x for x, _w in lists], [w for _x, w in lists], prefetch),
            doc_of,
            limit=limit,
            second=second,
            third=third,
            doc_bonus=bonus,
        )

    base = (("e5", 1.0), ("kw", 1.0))
    record("DBSF e5 + sparse+dict (recomputed)", lambda q: fused(q, base))
    differ = sum(
        runs["DBSF e5 + sparse+dict (recomputed)"][s][i][:5] != runs["today's default (product search)"][s][i][:5]
        for s in splits
        for i in runs["DBSF e5 + sparse+dict (recomputed)"][s]
    )
    print(
        f"recomputed DBSF: first 5 documents differ from the product's for {differ} of {len(questions)} questions",
        flush=True,
    )
    record("DBSF e5 + sparse+dict (Python BM25)", lambda q: fused(q, (("e5", 1.0), ("pykw", 1.0))))
    record("DBSF e5 + sparse+dict, CJK bigrams added", lambda q: fused(q, (("e5", 1.0), ("bigram", 1.0))))
    record("sparse+dict alone", lambda q: fused(q, (("kw", 1.0),)))
    record("sparse+dict alone, CJK bigrams added", lambda q: fused(q, (("bigram", 1.0),)))
    record("e5 dense alone", lambda q: fused(q, (("e5", 1.0),)))
    for p in (20, 80):
        record(f"DBSF e5 + sparse+dict, prefetch {p}", lambda q, p=p: fused(q, base, prefetch=p, limit=max(40, p)))
    for w in (0.5, 0.75, 1.5, 2.0):
        record(f"DBSF e5 x{w} + sparse+dict", lambda q, w=w: fused(q, (("e5", w), ("kw", 1.0))))
    for second, third in ((0.1, 0.0), (0.25, 0.0), (0.5, 0.0), (0.25, 0.1), (0.5, 0.25)):
        record(
            f"DBSF e5 + sparse+dict, document = best + {second} x 2nd + {third} x 3rd",
            lambda q, s=second, t=third: fused(q, base, second=s, third=t),
        )
    for t in (0.25, 0.5, 1.0):
        record(
            f"DBSF e5 + sparse+dict, + {t} x title cosine (DBSF-normalised, document level)",
            lambda q, t=t: fused(q, base, title=t),
        )
    if M is not None:

        def routed(channels_en, **kw):
            return lambda q: fused(q, channels_en if q.lang == "en" else base, **kw)

        for wm in (0.5, 1.0, 1.5):
            record(
                f"DBSF e5 + MiniLM x{wm} + sparse+dict (MiniLM for en)",
                routed((("e5", 1.0), ("minilm", wm), ("kw", 1.0))),
            )
        record("DBSF MiniLM + sparse+dict for en (e5 for zh)", routed((("minilm", 1.0), ("kw", 1.0))))
        for second in (0.25, 0.5):
            record(
                f"DBSF e5 + MiniLM + sparse+dict (MiniLM for en), document = best + {second} x 2nd",
                routed((("e5", 1.0), ("minilm", 1.0), ("kw", 1.0)), second=second),
            )

    table = {label: {name: score(run, splits[name]) for name, run in by.items()} for label, by in runs.items()}
    cols = [(s, l) for s in splits for l in ("en", "zh")]
    print(f"\n{len(docs)} documents, {len(rows)} chunks\n")
    print(
        "| configuration | "
        + " | ".join(f"{s} {l} ({table[next(iter(table))][s][l]['n']})" for s, l in cols)
        + " |\n|---|"
        + "---|" * len(cols)
    )
    for label, by in table.items():
        print(
            f"| {label} | "
            + " | ".join(
                f"{by[s][l]['recall@1']:.2f} / {by[s][l]['recall@5']:.2f} / {by[s][l]['ndcg@10']:.2f}" for s, l in cols
            )
            + " |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"documents": len(docs), "chunks": len(rows), "table": table, "runs": runs},
                ensure_ascii=False,
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
