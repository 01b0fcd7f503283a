"""Retrieval ablation on one index of both corpora (issue 42, part 1): each embedding model's dense
ranking alone, the keyword ranking alone, their fusions, two dense channels fused, chunk sizes and the
dictionary expansion, on the development and the held-aside question sets, English and Chinese.

Usage (no index needed: the bench builds its own Qdrant Edge collections in a temporary folder):

    .venv/bin/python bench/bench_retrieval_ablation.py [--no-small-chunks | --e5-only] [--dev2] [--no-reranker]
        [--llm-rerank [--llm-docs 3 5] [--llm-dump out.json]] [--distractors 15] [--json out.json]

Documents: every answer file of both question sets plus a fixed random sample (`--seed`) of
`--distractors` other pages per corpus, the same set for every configuration (the whole corpus is
about 9,000-10,000 chunks a model and chunk size: on 2 shared cores e5 int8 embeds 2-4 chunks a second).
Each file is parsed and chunked by the product's own code (`ingest.readers.parse_file`,
`ingest.chunking.Chunker`) and embedded by the product's embedders; chunk embeddings are cached on
disk per (model, chunk size) under `--cache` (default /work/cache/retrieval), so a second run embeds
nothing. Searches go through `Retriever.search` on Qdrant Edge (the product's path); the fusions
that the product does not make (two dense channels, document-level RRF) are computed here from the
single rankings the retriever returns.

Reranker rows: the built-in English cross-encoder (`retrieval.reranker.BuiltinReranker`) over today's
default hybrid ranking, through `Retriever.search`, for each number of documents (and chunks a document)
reranked and each way of combining its order with the hybrid one; English questions as `builtin-en`
reranks them, Chinese ones as `builtin-all` would, so that the Chinese columns show what it would do
there (`builtin-en` leaves them in the hybrid order). Its scores are cached per (question, passage) in
`--cache`; pairs/s and the seconds it adds to a question are printed. `--dev2` adds the second
development set as columns of its own (its answer pages join the index, the draw of the others is kept).

LLM judge rows (`--llm-rerank`): the chat model as a pointwise judge of today's default hybrid ranking's
first N distinct documents (N in `--llm-docs`): the best chunk of each (its first in the ranking, as
`passages.passage_text` writes it, cut to `LLM_PASSAGE_TOKENS` of the chat model's tokens) is put to the
answering package's "does this passage answer the question" prompt (`judge.answers_messages`, greedy,
YES or NO) with the question as asked; the documents judged YES come first in their hybrid order, then
the others. The model is the configured one, loaded as `bench/ground_answers.py` does (the built-in
Qwen2.5-Coder-1.5B through llama.cpp, 2 threads). Verdicts are cached per (model, question, chunk ID,
passage) in `--cache`; pairs/s and the seconds the judging adds to a question are printed. Pairs are
judged a rank at a time over all questions (splits interleaved), so a run cut short leaves a cache from
which the smaller N can be scored.

Metrics: recall@1/5/10 (any answer file among the first k distinct documents) and nDCG@10, per
language and question set (`assistant.evaluation.metrics`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assistant.core.embedding.embedder import BUILTIN_E5, BUILTIN_MINILM, Embedder  # noqa: E402
from assistant.core.index.passages import passage_text  # noqa: E402
from assistant.core.index.payload import ChunkPayload, chunk_point, document_id  # noqa: E402
from assistant.core.language import document_language  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.vectorstore.edge import EdgeVectorStore  # noqa: E402
from assistant.evaluation.dataset import Question, load_questions  # noqa: E402
from assistant.evaluation.metrics import document_ranking, ranking_metrics  # noqa: E402
from assistant.retrieval.crosslingual import translate  # noqa: E402
from assistant.retrieval.reranker import BuiltinReranker, OnnxCrossEncoder  # noqa: E402
from assistant.retrieval.retriever import Retriever  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
ROOTS = {
    "en": CORPUS / "handbook-en" / "sourcegraph-handbook" / "content",
    "zh": CORPUS / "docs-zh" / "pingcap-docs-cn",
}
DATA = REPO / "tests" / "data"
DEV_SETS = (DATA / "dev_questions.jsonl",)
DEV2_SETS = (DATA / "dev2_questions.jsonl",)  # the second development set (`--dev2`)
HELDOUT_SETS = (DATA / "retrieval_heldout.jsonl",)
DEPTH_DOCS = 10
RRF_K = 60  # Cormack, Clarke & Buettcher, "Reciprocal rank fusion outperforms Condorcet...", SIGIR 2009
# (model, chunk tokens) pairs embedded; 0 is the model's own default.
INDEXES = ((BUILTIN_E5, 0), (BUILTIN_MINILM, 0), (BUILTIN_E5, 128))
# (documents, chunks a document) reranked x how its order combines with the hybrid one.
RERANK_SIZES = ((20, 1), (10, 1), (5, 1), (10, 2), (5, 2))
RERANK_COMBINES = ("reranker", "rrf")
# Chat-model tokens of a passage put to the LLM judge (its best chunk with title and heading): on 2 shared
# cores the prompt is evaluated at 15-35 ms a token, so a passage costs seconds.
LLM_PASSAGE_TOKENS = 200


@dataclass
class Doc:
    """One corpus page as the bench indexes it: `source` is its path under its corpus root."""

    source: str
    path: Path
    root: str


def pick_documents(questions: Sequence[Question], distractors: int, seed: int,
                   extra: Sequence[Question] = ()) -> list[Doc]:
    """Every answer file of `questions` plus `distractors` other Markdown pages per corpus, drawn once
    with `seed`, plus the answer files of `extra` (which leave the draw as it was); sorted, so that
    every configuration indexes the same pages in the same order."""
    added = {f for q in extra for f in q.answer_files}
    wanted = {f for q in questions for f in q.answer_files}
    docs: list[Doc] = []
    rnd = random.Random(seed)
    for root_name, root in ROOTS.items():
        pages = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
        answers = [p for p in pages if p in wanted]
        others = [p for p in pages if p not in wanted]
        drawn = rnd.sample(others, min(distractors, len(others)))
        chosen = sorted(set(answers + drawn) | {p for p in pages if p in added})
        docs += [Doc(source=p, path=root / p, root=root_name) for p in chosen]
    return docs


class VectorCache:
    """Passage embeddings on disk, one `.npz` per (model, chunk size), keyed by SHA-1 of the text."""

    def __init__(self, folder: Path, key: str):
        self.path = folder / f"{key}.npz"
        folder.mkdir(parents=True, exist_ok=True)
        self.vectors: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as data:
                self.vectors = {k: data[k] for k in data.files}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, **self.vectors)
        tmp.replace(self.path)

    def embed(self, embedder: Embedder, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        """`(len(texts), dim)` float32 embeddings of passages, embedding only what the cache lacks
        (saved after every batch, so an interrupted run keeps its work)."""
        todo = sorted({self.key(t): t for t in texts if self.key(t) not in self.vectors}.items())
        started = time.perf_counter()
        for n in range(0, len(todo), batch):
            part = todo[n : n + batch]
            vectors = embedder.embed_passages([t for _k, t in part])
            self.vectors.update({k: v for (k, _t), v in zip(part, vectors)})
            self.save()
            done = n + len(part)
            rate = done / (time.perf_counter() - started)
            print(f"  embedded {done}/{len(todo)} ({rate:.1f}/s)", file=sys.stderr, flush=True)
        return np.stack([self.vectors[self.key(t)] for t in texts])


def build_index(
    docs: Sequence[Doc], embedder: Embedder, chunk_tokens: int, folder: Path, cache_root: Path
) -> EdgeVectorStore:
    """A Qdrant Edge collection of `docs` chunked and embedded as ingestion does (title and heading
    before each chunk's text), readable by everyone."""
    from ingest.chunking import Chunker
    from ingest.readers import parse_file

    size = chunk_tokens or getattr(embedder, "chunk_tokens", 0) or embedder.max_text_tokens
    chunker = Chunker(
        lambda t: embedder.tokenizer.encode(t, add_special_tokens=False),
        max_tokens=embedder.max_text_tokens,
        chunk_tokens=size,
    )
    rows = []
    for doc in docs:
        parsed = parse_file(doc.path)
        chunks = chunker.chunk(parsed)
        lang = document_language(" ".join(c.text for c in chunks[:5]))
        uri = doc.path.as_uri()
        rows += [(doc, parsed.title, lang, uri, c) for c in chunks]
    print(f"{embedder.name} @ {size} tokens: {len(docs)} documents, {len(rows)} chunks", file=sys.stderr, flush=True)
    cache = VectorCache(cache_root, f"{embedder.name.replace(':', '_').replace('/', '_')}-{size}")
    vectors = cache.embed(embedder, [c.embed_text for *_rest, c in rows])
    store = EdgeVectorStore(folder, "chunks", model=embedder.name)
    store.ensure_collection(embedder.dim)
    points = [
        chunk_point(
            ChunkPayload(
                doc_id=document_id(uri), chunk_index=c.position, text=c.text, title=title, heading=c.heading,
                page=c.page, source=doc.source, uri=uri, acl=["everyone"], lang=lang,
            ),
            dense=vector.tolist(),
            passage=c.embed_text,
        )
        for (doc, title, lang, uri, c), vector in zip(rows, vectors)
    ]
    for n in range(0, len(points), 256):
        store.upsert(points[n : n + 256])
    return store


class CachedCrossEncoder:
    """The built-in cross-encoder with its scores kept per (question, passage) in a JSON file, so that
    the reranker configurations after the first (and a second run) score nothing again; `pairs` and
    `seconds` count only the pairs the model scored."""

    def __init__(self, folder: Path):
        self.model = OnnxCrossEncoder()
        self.path = folder / "reranker_en-256.json"
        folder.mkdir(parents=True, exist_ok=True)
        self.scores: dict[str, float] = json.loads(self.path.read_text()) if self.path.exists() else {}

    @property
    def pairs(self) -> int:
        return self.model.pairs

    @property
    def seconds(self) -> float:
        return self.model.seconds

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(f"{query}\0{p}".encode()).hexdigest() for p in passages]
        todo = [n for n, k in enumerate(keys) if k not in self.scores]
        if todo:
            fresh = self.model.score(query, [passages[n] for n in todo])
            self.scores.update({keys[n]: float(v) for n, v in zip(todo, fresh)})
            self.path.write_text(json.dumps(self.scores))
        return np.array([self.scores[k] for k in keys], dtype=np.float32)


def rankings(retriever: Retriever, questions: Sequence[Question]) -> dict[str, list[str]]:
    """Question ID -> distinct documents (sources), best first, at most `DEPTH_DOCS`."""
    out = {}
    for q in questions:
        chunks = retriever.search(q.question, principal=ANONYMOUS, top_k=DEPTH_DOCS, evidence=False).chunks
        out[q.id] = document_ranking((c.source for c in chunks), depth=DEPTH_DOCS)
    return out


def ungrouped_rankings(retriever: Retriever, questions: Sequence[Question], chunks: int = 30) -> dict[str, list[str]]:
    """Like `rankings`, the way `assistant eval` ranked documents before results were grouped by
    document: the first `chunks` chunks of the store's ranking, each document at its best chunk."""
    out = {}
    for q in questions:
        vector = retriever.embedder.embed_query(q.question)
        hits = retriever.store.query(dense=vector.tolist(), sparse=None, acl_any=["everyone"], limit=chunks, mode="dense")
        out[q.id] = document_ranking((h.payload["source"] for h in hits), depth=DEPTH_DOCS)
    return out


def rrf(lists: Sequence[Sequence[str]], weights: Sequence[float] | None = None, k: int = RRF_K) -> list[str]:
    """Weighted reciprocal rank fusion of document rankings (Cormack et al., SIGIR 2009)."""
    scores: dict[str, float] = {}
    for ranking, w in zip(lists, weights or [1.0] * len(lists)):
        for rank, doc in enumerate(ranking):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank + 1)
    return sorted(scores, key=lambda d: -scores[d])[:DEPTH_DOCS]


def score(run: dict[str, list[str]], questions: Sequence[Question]) -> dict[str, dict[str, float]]:
    """Language -> metric -> mean over the answerable questions of that language."""
    per = ranking_metrics(run, {q.id: q.answer_files for q in questions})
    out = {}
    for lang in ("en", "zh"):
        ids = [q.id for q in questions if q.lang == lang and q.answerable]
        out[lang] = {m: float(np.mean([per[i][m] for i in ids])) for m in ("recall@1", "recall@5", "recall@10", "ndcg@10")}
        out[lang]["n"] = len(ids)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--distractors", type=int, default=15, help="random non-answer pages per corpus")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/retrieval"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-small-chunks", action="store_true", help="skip the e5 index of 128-token chunks")
    parser.add_argument("--e5-only", action="store_true",
                        help="embed only the e5 index of default chunks (skip the MiniLM and 128-token indexes and their rows)")
    parser.add_argument("--no-reranker", action="store_true", help="skip the built-in reranker rows")
    parser.add_argument("--dev2", action="store_true",
                        help="also measure the second development set (its answer pages join the index)")
    parser.add_argument("--llm-rerank", action="store_true",
                        help="add rows of the chat model judging whether each of the first documents answers the question")
    parser.add_argument("--llm-docs", type=int, nargs="+", default=[3, 5],
                        help="numbers of first documents judged by the chat model (--llm-rerank)")
    parser.add_argument("--llm-splits", nargs="+",
                        help="splits the chat model judges (default: all measured); the others' LLM rows are left out")
    parser.add_argument("--llm-dump", type=Path,
                        help="with --llm-rerank: write each question's default ranking and judged passages (JSON) and judge nothing")
    parser.add_argument("--llm-score", type=Path,
                        help="score the LLM rows from a --llm-dump file and the cached verdicts (questions whose first N are "
                             "all judged) and stop: no index, no model")
    parser.add_argument("--embed-only", choices=["e5", "e5-128", "minilm"], help="fill the cache of one model's chunks and stop")
    parser.add_argument("--show-misses", action="store_true", help="print the development set's misses at 5")
    args = parser.parse_args()
    if args.llm_score:
        return score_llm_dump(args.llm_score, args.cache, args.llm_docs)

    dev = [q for path in DEV_SETS for q in load_questions(path)]
    held = [q for path in HELDOUT_SETS for q in load_questions(path)]
    dev2 = [q for path in DEV2_SETS for q in load_questions(path)] if args.dev2 else []
    docs = pick_documents(dev + held, args.distractors, args.seed, extra=dev2)
    runs: dict[str, dict[str, dict[str, list[str]]]] = {}  # config -> split -> qid -> docs
    splits = {"dev": dev, **({"dev2": dev2} if dev2 else {}), "heldout": held}

    def record(label: str, make: Callable[[list[Question]], dict[str, list[str]]]) -> None:
        runs[label] = {name: make(qs) for name, qs in splits.items()}

    with tempfile.TemporaryDirectory(prefix="ablation-") as tmp:
        embedders: dict[str, Embedder] = {}
        stores = {}
        for model, size in INDEXES:
            if (size == 128 and args.no_small_chunks) or (args.e5_only and (model, size) != (BUILTIN_E5, 0)):
                continue
            if args.embed_only and (model, size) != {"e5": (BUILTIN_E5, 0), "e5-128": (BUILTIN_E5, 128),
                                                     "minilm": (BUILTIN_MINILM, 0)}[args.embed_only]:
                continue
            embedder = embedders.setdefault(model, Embedder(model))
            stores[(model, size)] = build_index(
                docs, embedder, size, Path(tmp) / f"{model.split(':')[-1]}-{size}", args.cache
            )
        if args.embed_only:
            return

        def retr(model: str, size: int, **kw) -> Retriever:
            kw.setdefault("interleave_depth", 0)
            return Retriever(store=stores[(model, size)], embedder=embedders[model], **kw)

        record("e5 dense", lambda qs: rankings(retr(BUILTIN_E5, 0, mode="dense"), qs))
        record("e5 dense, first 30 chunks ungrouped (the old eval)",
               lambda qs: ungrouped_rankings(retr(BUILTIN_E5, 0, mode="dense"), qs))
        small = (BUILTIN_E5, 128) in stores
        if small:
            record("e5 dense, 128-token chunks", lambda qs: rankings(retr(BUILTIN_E5, 128, mode="dense"), qs))
        minilm = (BUILTIN_MINILM, 0) in stores
        if minilm:
            record("MiniLM dense", lambda qs: rankings(retr(BUILTIN_MINILM, 0, mode="dense"), qs))
        record("sparse", lambda qs: rankings(retr(BUILTIN_E5, 0, mode="sparse"), qs))
        record("sparse + dictionary", lambda qs: rankings(retr(BUILTIN_E5, 0, mode="sparse", translate=translate), qs))
        record("e5 + sparse, DBSF (today's default, no dictionary)", lambda qs: rankings(retr(BUILTIN_E5, 0), qs))
        record("e5 + sparse + dictionary, DBSF (today's default)",
               lambda qs: rankings(retr(BUILTIN_E5, 0, translate=translate), qs))
        record("e5 + sparse + dictionary, RRF 2:1",
               lambda qs: rankings(retr(BUILTIN_E5, 0, translate=translate, fusion="rrf"), qs))
        record("e5 + sparse + dictionary, DBSF, interleave 5",
               lambda qs: rankings(retr(BUILTIN_E5, 0, translate=translate, interleave_depth=5), qs))
        record("e5 + sparse + dictionary at weight 0.5, DBSF",
               lambda qs: rankings(retr(BUILTIN_E5, 0, translate=translate, translation_weight=0.5), qs))
        if small:
            record("e5 128 + sparse + dictionary, DBSF",
                   lambda qs: rankings(retr(BUILTIN_E5, 128, translate=translate), qs))
        if minilm:
            record("MiniLM + sparse + dictionary, DBSF (before e5)",
                   lambda qs: rankings(retr(BUILTIN_MINILM, 0, translate=translate, interleave_depth=5), qs))
        if not args.no_reranker:
            rerank_rows(record, retr, splits, args.cache)
        if args.llm_rerank:
            llm_rows(runs, retr(BUILTIN_E5, 0, translate=translate),
                     {k: v for k, v in splits.items() if not args.llm_splits or k in args.llm_splits},
                     args.llm_docs, args.cache, dump=args.llm_dump)
        # Document-level fusions of the single rankings above.
        measured = list(runs)
        for name in splits:
            single = {label: runs[label][name] for label in measured if name in runs[label]}
            ids = list(single["e5 dense"])
            fused = {
                "RRF e5 + sparse+dict": lambda i: rrf([single["e5 dense"][i], single["sparse + dictionary"][i]]),
            }
            if minilm:
                fused["RRF MiniLM + e5 + sparse+dict"] = lambda i: rrf(
                    [single["MiniLM dense"][i], single["e5 dense"][i], single["sparse + dictionary"][i]])
            if small and minilm:
                fused["RRF MiniLM + e5 + e5-128 + sparse+dict"] = lambda i: rrf(
                    [single["MiniLM dense"][i], single["e5 dense"][i], single["e5 dense, 128-token chunks"][i],
                     single["sparse + dictionary"][i]])
            for label, fuse in fused.items():
                runs.setdefault(label, {})[name] = {i: fuse(i) for i in ids}
        # MiniLM only for English questions (it knows no Chinese): language-routed two dense channels.
        for name, qs in (splits.items() if minilm else ()):
            base = runs["RRF MiniLM + e5 + sparse+dict"][name]
            alt = runs["RRF e5 + sparse+dict"][name]
            runs.setdefault("RRF (MiniLM for en) + e5 + sparse+dict", {})[name] = {
                q.id: (base[q.id] if q.lang == "en" else alt[q.id]) for q in qs
            }
        for store in stores.values():
            store.close()

    table = {label: {name: score(run, splits[name]) for name, run in by_split.items()} for label, by_split in runs.items()}
    print_table(table, n_docs=len(docs))
    if args.show_misses:
        show_misses(runs, dev)
    if args.json:
        args.json.write_text(json.dumps({"documents": len(docs), "table": table, "runs": runs}, ensure_ascii=False, indent=1))


def rerank_rows(record: Callable, retr: Callable[..., Retriever], splits: dict[str, list[Question]], cache: Path) -> None:
    """Rows of the built-in reranker over today's default (e5 + keywords + dictionary, DBSF) for each
    number of documents and chunks a document (`RERANK_SIZES`) and combination (`RERANK_COMBINES`).
    English questions are reranked as `builtin-en` does (English pages only); Chinese ones as
    `builtin-all` does (pages of both languages), to show what it would do there. Then
    the seconds it adds to a question, timed uncached on the held-aside English questions with the
    default configuration (`BuiltinReranker()`), against the same search without it."""
    model = CachedCrossEncoder(cache)
    questions = sum(len(qs) for qs in splits.values())

    def reranked(documents: int, combine: str, passages: int) -> Callable[[list[Question]], dict[str, list[str]]]:
        by_lang = {lang: retr(BUILTIN_E5, 0, translate=translate, reranker=BuiltinReranker(
            model, languages=langs, documents=documents, combine=combine, passages=passages))
            for lang, langs in (("en", ("en",)), ("zh", ("en", "zh")))}
        return lambda qs: {k: v for lang, r in by_lang.items() for k, v in rankings(r, [q for q in qs if q.lang == lang]).items()}

    for documents, passages in RERANK_SIZES:
        for combine in RERANK_COMBINES:
            how = "RRF with the hybrid rank" if combine == "rrf" else "reranker order"
            label = f"default + reranker, first {documents} documents{f' x {passages} chunks' if passages > 1 else ''}, {how}"
            record(label, reranked(documents, combine, passages))
    if model.pairs:
        print(f"reranker: {model.pairs} pairs scored in {model.seconds:.1f} s ({model.pairs / model.seconds:.1f} pairs/s, "
              f"{questions} questions, the configurations above)", file=sys.stderr, flush=True)
    timed = [q for q in splits["heldout"] if q.lang == "en"]
    fresh = BuiltinReranker(OnnxCrossEncoder(), languages=("en",))
    plain, with_reranker = retr(BUILTIN_E5, 0, translate=translate), retr(BUILTIN_E5, 0, translate=translate, reranker=fresh)
    seconds = {}
    for label, retriever in (("without", plain), ("with", with_reranker)):
        started = time.perf_counter()
        rankings(retriever, timed)
        seconds[label] = (time.perf_counter() - started) / len(timed)
    print(f"reranker timing ({len(timed)} held-aside English questions, first {fresh.documents} documents, "
          f"{fresh.combine}): {fresh.model.pairs / fresh.model.seconds:.1f} pairs/s, "
          f"{1000 * fresh.model.seconds / len(timed):.0f} ms scoring a question; search "
          f"{1000 * seconds['without']:.0f} ms without, {1000 * seconds['with']:.0f} ms with "
          f"(+{1000 * (seconds['with'] - seconds['without']):.0f} ms)", flush=True)


class CachedAnswerJudge:
    """The chat model asked whether a passage answers a question (`judge.EvidenceJudge.answers`), with its
    verdicts kept in a JSON file keyed by SHA-1 of (model, question, chunk ID, passage); `pairs` and
    `seconds` count only the pairs the model judged in this run."""

    def __init__(self, folder: Path):
        from assistant.answering.judge import EvidenceJudge
        from assistant.core.llm.llama_cpp import LlamaCppLLM

        self.llm = LlamaCppLLM(threads=2)
        self.judge = EvidenceJudge(self.llm)
        self.path = folder / "llm_answers_judge.json"
        folder.mkdir(parents=True, exist_ok=True)
        self.verdicts: dict[str, bool] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.pairs = 0
        self.seconds = 0.0

    def key(self, question: str, chunk_id: str, passage: str) -> str:
        return hashlib.sha1("\0".join((self.llm.name, question, chunk_id, passage)).encode("utf-8")).hexdigest()

    def known(self, question: str, chunk_id: str, passage: str) -> bool | None:
        return self.verdicts.get(self.key(question, chunk_id, passage))

    def answers(self, question: str, chunk_id: str, passage: str) -> bool:
        """True when the model says YES, the passage answers the question (cached; saved at once)."""
        key = self.key(question, chunk_id, passage)
        if key not in self.verdicts:
            import asyncio

            started = time.perf_counter()
            self.verdicts[key] = asyncio.run(self.judge.answers(question, passage))
            self.seconds += time.perf_counter() - started
            self.pairs += 1
            self.path.write_text(json.dumps(self.verdicts))
        return self.verdicts[key]

    def cap(self, text: str, tokens: int = LLM_PASSAGE_TOKENS) -> str:
        """`text` cut to its first `tokens` chat-model tokens (whole text when shorter)."""
        ids = self.llm._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(ids) <= tokens:
            return text
        return self.llm._llama.detokenize(ids[:tokens]).decode("utf-8", errors="ignore")


def llm_rows(runs: dict, retriever: Retriever, splits: dict[str, list[Question]], sizes: Sequence[int], cache: Path,
             dump: Path | None = None) -> None:
    """Rows "default + LLM judge, first N documents" for each N in `sizes` (see the module docstring):
    today's default ranking with the documents among its first N that the chat model judged to answer the
    question moved before the others (each group in hybrid order). Judged a rank at a time, the splits'
    questions interleaved; printed: pairs/s and seconds added to a question (N pairs at that rate)."""
    judge = CachedAnswerJudge(cache)
    depth = max(sizes)
    searched: dict[str, tuple[Question, list[str], list[tuple[str, str]]]] = {}  # qid -> (q, docs, (chunk id, passage))
    splits = {name: [q for q in qs if q.answerable] for name, qs in splits.items()}  # the others score nothing
    for qs in splits.values():
        for q in qs:
            chunks = retriever.search(q.question, principal=ANONYMOUS, top_k=DEPTH_DOCS, evidence=False).chunks
            docs = document_ranking((c.source for c in chunks), depth=DEPTH_DOCS)
            best = {}
            for c in chunks:
                best.setdefault(c.source, (c.chunk_id, judge.cap(passage_text(c.title, c.heading, c.text))))
            searched[q.id] = (q, docs, [best[d] for d in docs[:depth]])
    if dump:
        dump.write_text(json.dumps({qid: {"question": q.question, "lang": q.lang, "answer_files": list(q.answer_files),
                                          "split": next(k for k, qs in splits.items() if q in qs), "documents": docs,
                                          "judged": heads, "keys": [judge.key(q.question, *h) for h in heads]}
                                    for qid, (q, docs, heads) in searched.items()}, ensure_ascii=False))
        return
    order = [qid for group in zip(*[[q.id for q in qs] for qs in splits.values()]) for qid in group]
    order += [q.id for qs in splits.values() for q in qs if q.id not in order]
    started = time.perf_counter()
    for rank in range(depth):
        for qid in order:
            q, _docs, heads = searched[qid]
            if rank < len(heads):
                judge.answers(q.question, *heads[rank])
        print(f"LLM judge: rank {rank + 1} judged for {len(order)} questions ({judge.pairs} pairs new, "
              f"{time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    for n in sizes:
        for how in ("YES first", "first YES first"):
            label = f"default + LLM judge (Qwen2.5-Coder-1.5B), first {n} documents, {how}"
            moved = 0
            for name, qs in splits.items():
                run = {}
                for q in qs:
                    _q, docs, heads = searched[q.id]
                    yes = [d for d, h in zip(docs[:n], heads) if judge.known(q.question, *h)]
                    yes = yes if how == "YES first" else yes[:1]
                    run[q.id] = yes + [d for d in docs if d not in yes]
                    moved += run[q.id][:1] != docs[:1]
                runs.setdefault(label, {})[name] = run
            print(f"LLM judge, first {n}, {how}: first document changed for {moved} of {len(searched)} questions",
                  file=sys.stderr)
    if judge.pairs:
        rate = judge.pairs / judge.seconds
        print(f"LLM judge: {judge.pairs} pairs judged in {judge.seconds:.0f} s ({rate:.2f} pairs/s, 2 threads); "
              + ", ".join(f"+{n / rate:.1f} s a question at N={n}" for n in sizes), flush=True)


def score_llm_dump(dump_path: Path, cache: Path, sizes: Sequence[int]) -> None:
    """Print R@1 / R@5 / nDCG@10 per split and language of the default ranking and of the LLM rows for each
    N in `sizes`, from a `--llm-dump` file and the verdicts cached so far, over the questions whose first N
    documents are all judged (their count is printed: a run cut short scores what it judged)."""
    dump = json.loads(dump_path.read_text())
    verdicts = json.loads((cache / "llm_answers_judge.json").read_text())
    splits = sorted({d["split"] for d in dump.values()}, key=lambda s: (s == "heldout", s))
    print(f"| configuration | {' | '.join(f'{s} {l}' for s in splits for l in ('en', 'zh'))} |\n|---|" + "---|" * 2 * len(splits))
    for n in sizes:
        rows: dict[str, list[str]] = {}
        for split in splits:
            for lang in ("en", "zh"):
                ids = [i for i, d in dump.items() if d["split"] == split and d["lang"] == lang]
                full = [i for i in ids if all(k in verdicts for k in dump[i]["keys"][:n])]
                runs = {"default": {}, "YES first": {}, "first YES first": {}}
                for i in full:
                    docs = dump[i]["documents"]
                    yes = [d for d, k in zip(docs[:n], dump[i]["keys"][:n]) if verdicts[k]]
                    runs["default"][i] = docs
                    runs["YES first"][i] = yes + [d for d in docs if d not in yes]
                    runs["first YES first"][i] = yes[:1] + [d for d in docs if d not in yes[:1]]
                for how, run in runs.items():
                    per = ranking_metrics(run, {i: dump[i]["answer_files"] for i in full})
                    cell = " / ".join(f"{np.mean([per[i][m] for i in full]):.2f}" if full else "-"
                                      for m in ("recall@1", "recall@5", "ndcg@10"))
                    rows.setdefault(how, []).append(f"{cell} ({len(full)}/{len(ids)})")
        for how, cells in rows.items():
            print(f"| {how}, first {n} judged | {' | '.join(cells)} |")


def print_table(table: dict, *, n_docs: int) -> None:
    """Markdown table: one row per configuration, R@1 / R@5 / nDCG@10 per split and language."""
    first = next(iter(table.values()))
    cols = [(s, l) for s in first for l in ("en", "zh")]
    head = " | ".join(f"{s} {l} (n={first[s][l]['n']}) R@1 / R@5 / R@10 / nDCG@10" for s, l in cols)
    print(f"\n{n_docs} documents in one index\n\n| configuration | {head} |\n|---|" + "---|" * len(cols))
    for label, by in table.items():
        cells = " | ".join(
            f"{by[s][l]['recall@1']:.2f} / {by[s][l]['recall@5']:.2f} / {by[s][l]['recall@10']:.2f} / {by[s][l]['ndcg@10']:.2f}"
            if s in by else "-" for s, l in cols
        )
        print(f"| {label} | {cells} |")


def show_misses(runs: dict, dev: Sequence[Question]) -> None:
    """The development questions whose answer file is not in the first 5 of the e5 and MiniLM dense
    rankings (held-aside misses are never shown: nothing is fitted on them)."""
    for q in dev:
        for label in ("e5 dense", "MiniLM dense", "e5 + sparse + dictionary, DBSF (today's default)"):
            if label not in runs:
                continue
            top = runs[label]["dev"][q.id][:5]
            if q.answer_files and not set(q.answer_files) & set(top):
                print(f"{q.id} [{label}] {q.question}\n   want {q.answer_files[0]}\n   got {top[:3]}")


if __name__ == "__main__":
    main()
