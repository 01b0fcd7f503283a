"""What the prompt's sources hold (issue 42): the answerer's own retrieval and context packing
(`Answerer.prepare`: search, abstention, `pack_context` with the question-focused sources that llama.cpp
gets) run for every question of the development and held-aside splits, without generating an answer.

Usage:

    nice .venv/bin/python bench/bench_context_recall.py [--keep DIR] [--variants settings margin-5 ...] [--json out.json]
        [--splits dev] [--dev2 --splits dev dev2 --keep DIR2]

Tune with `--splits dev` (and `--dev2`, which indexes dev2_questions.jsonl's answer pages too, into another
`--keep` folder); measure the held-aside split once per final configuration.

The index is `bench_retrieval_ablation.py`'s e5 index of both corpora (its documents, chunking and vector
cache: `--cache`, default /work/cache/retrieval); with `--keep DIR` it is built once into DIR and reused.
The retriever and answerer are configured as `assistant.composition` configures them from the default
settings (dictionary expansion, interleaving, abstention, the llama.cpp window and source focus); each
variant sets the documents retrieved (`top_k`), chunks a document and the chunks' tie margin
(`Retriever`'s `chunk_tie_margin`). Chinese questions are searched with the chat model's translation
(`rewrite.translate_question`, as the answerer does); translations are cached in `--cache`
(`translations.json`), so a second run generates nothing. The chat model is loaded for its token counter
(the budget is counted in its tokens).

Per split and language: "file" = an answer file among the packed sources; "fact" = any of the question's
`must_contain_any` strings (case-insensitive) in the packed source texts as the prompt shows them;
"declined" = no prompt (abstention or no source fits); "tokens" = mean prompt tokens (message contents, the
chat template's markers not counted), over the questions with a prompt.

Focus by meaning (sentence windows embedded with e5 and scored against the question) was measured with
this bench on 7 December 2026 and left out of the product (no gain on the development splits, 155-237 ms
of CPU a chat): its variants are in commit 1b26672 (docs/notes/retrieval-investigations.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_retrieval_ablation import DEV2_SETS, DEV_SETS, HELDOUT_SETS, build_index, pick_documents  # noqa: E402

from assistant.answering.answerer import REFIT_SOURCES, Answerer  # noqa: E402
from assistant.answering.rewrite import translate_question  # noqa: E402
from assistant.core.embedding.embedder import BUILTIN_E5, Embedder  # noqa: E402
from assistant.core.language import question_language  # noqa: E402
from assistant.core.llm.factory import open_llm  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from assistant.core.vectorstore.edge import EdgeVectorStore  # noqa: E402
from assistant.evaluation.dataset import Question, load_questions  # noqa: E402
from assistant.retrieval import crosslingual  # noqa: E402
from assistant.retrieval.abstention import AbstentionRule  # noqa: E402
from assistant.retrieval.retriever import Retriever, default_interleave_depth  # noqa: E402


@dataclass(frozen=True)
class Variant:
    """One configuration: documents retrieved (`top_k`), most chunks of a document, and the tie margin within
    which a document's further chunks are kept (None: up to the count whatever their scores)."""

    top_k: int = 5
    chunks_per_document: int = 1
    tie_margin: float | None = None
    source_tokens: int | None = None  # None: the setting's (`llm_cpu_source_tokens`)
    one_source: bool = False  # a document's chunks joined into one (focused) source (`Answerer`)
    refit: bool = False  # a source that does not fit is focused again to the room left (`Answerer(refit_sources=)`)


# "1-per-doc" is the configuration before issue 42's context work (top_k 5, one chunk a document);
# "joined-margin-10" the default since (`--variants settings` measures the configured one).
VARIANTS = {
    "1-per-doc": Variant(),
    "top3": Variant(top_k=3),
    "top8": Variant(top_k=8),
    "2-per-doc": Variant(chunks_per_document=2),
    "3-per-doc": Variant(chunks_per_document=3),
    **{f"margin-{m}": Variant(chunks_per_document=3, tie_margin=m / 100) for m in (1, 2, 5, 10, 20)},
    **{f"top3-margin-{m}": Variant(top_k=3, chunks_per_document=3, tie_margin=m / 100) for m in (5, 10)},
    **{f"joined-margin-{m}": Variant(chunks_per_document=3, tie_margin=m / 100, one_source=True)
       for m in (5, 10, 20, 30)},
    "joined-2-per-doc": Variant(chunks_per_document=2, one_source=True),
    "joined-3-per-doc": Variant(chunks_per_document=3, one_source=True),
    **{f"src{n}": Variant(source_tokens=n) for n in (70, 150)},
    **{f"src70-margin-{m}": Variant(chunks_per_document=3, tie_margin=m / 100, source_tokens=70) for m in (5, 10)},
    # Issue 42: a source that does not fit is focused again to the room left (`pack_context`'s `refit`).
    "refit": Variant(chunks_per_document=3, tie_margin=0.1, one_source=True, refit=True),
    **{f"refit-src{t}": Variant(chunks_per_document=3, tie_margin=0.1, one_source=True, refit=True, source_tokens=t)
       for t in (80, 120)},
}


def translations(questions: Sequence[Question], llm, cache: Path, timeout_s: float) -> dict[str, str | None]:
    """Question -> the chat model's English translation (Chinese questions; None: none), cached in `cache`."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    known: dict[str, str | None] = json.loads(cache.read_text()) if cache.exists() else {}
    for q in questions:
        if question_language(q.question) != "zh" or q.question in known:
            continue
        known[q.question] = asyncio.run(translate_question(q.question, llm=llm, timeout_s=timeout_s))
        cache.write_text(json.dumps(known, ensure_ascii=False, indent=0))
        print(f"  translated {q.id}: {known[q.question]}", file=sys.stderr, flush=True)
    return known


def measure(answerer: Answerer, questions: Sequence[Question], translated: dict[str, str | None]) -> dict:
    """Per language: questions, answer file packed, key fact packed, declined, mean prompt tokens."""
    out: dict[str, dict] = {}
    for q in questions:
        sources, messages = answerer.prepare(q.question, principal=ANONYMOUS, translation=translated.get(q.question))
        row = out.setdefault(q.lang, {"n": 0, "file": 0, "fact": 0, "declined": 0, "tokens": 0, "misses": []})
        row["n"] += 1
        if messages is None:
            row["declined"] += 1
            row["misses"].append(q.id)
            continue
        row["tokens"] += sum(answerer.llm.count_tokens(m["content"]) for m in messages)
        text = "\n".join(s.text for s in sources).lower()
        row["file"] += any(s.source in q.answer_files for s in sources)
        fact = any(k.lower() in text for k in q.must_contain_any)
        row["fact"] += fact
        if not fact:
            row["misses"].append(q.id)
    for row in out.values():
        answered = row["n"] - row["declined"]
        row["tokens"] = row["tokens"] / answered if answered else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="build the index into DIR once and reuse it (default: a temporary one)")
    parser.add_argument("--distractors", type=int, default=15, help="random non-answer pages per corpus (as the ablation)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/retrieval"))
    parser.add_argument("--variants", nargs="+", default=["settings", *VARIANTS], choices=["settings", *VARIANTS],
                        help="configurations to measure; settings: the product's (ASSISTANT_* environment)")
    parser.add_argument("--no-translation", action="store_true", help="search Chinese questions alone")
    parser.add_argument("--show-misses", action="store_true", help="print the IDs of questions whose fact was not packed")
    parser.add_argument("--splits", nargs="+", default=["dev", "heldout"], choices=["dev", "dev2", "heldout"],
                        help="question splits to measure (tune on dev and dev2 alone)")
    parser.add_argument("--dev2", action="store_true", help="index dev2_questions.jsonl's answer pages too (the "
                        "ablation's --dev2; a different index: --keep another DIR) and allow the dev2 split")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    settings = Settings()
    dev = [q for path in DEV_SETS for q in load_questions(path)]
    held = [q for path in HELDOUT_SETS for q in load_questions(path)]
    dev2 = [q for path in DEV2_SETS for q in load_questions(path)] if args.dev2 else []
    splits = {"dev": [q for q in dev if q.answerable], "dev2": [q for q in dev2 if q.answerable],
              "heldout": [q for q in held if q.answerable]}
    splits = {name: qs for name, qs in splits.items() if name in args.splits and qs}
    docs = pick_documents(dev + held, args.distractors, args.seed, extra=dev2)
    embedder = Embedder(BUILTIN_E5)
    llm = open_llm(settings)
    translated: dict[str, str | None] = {}
    if not args.no_translation and settings.retrieval.question_translation:
        translated = translations(
            [q for qs in splits.values() for q in qs], llm, args.cache / "translations.json",
            settings.retrieval.question_translation_timeout_s,
        )
    crosslingual.preload()

    with tempfile.TemporaryDirectory(prefix="context-recall-") as tmp:
        folder = (args.keep or Path(tmp)) / "e5-0"
        if args.keep and (folder / "chunks").exists():
            store = EdgeVectorStore(folder, "chunks", model=embedder.name)
        else:
            store = build_index(docs, embedder, 0, folder, args.cache)
        results: dict[str, dict] = {}
        depth = settings.retrieval.interleave_depth
        if depth is None:
            depth = default_interleave_depth(settings.embedding.model)
        for name in args.variants:
            v = VARIANTS[name] if name != "settings" else Variant(
                top_k=settings.retrieval.top_k, chunks_per_document=settings.retrieval.chunks_per_document,
                tie_margin=settings.retrieval.chunk_tie_margin, one_source=bool(settings.llm.cpu_source_tokens),
                refit=REFIT_SOURCES,
            )
            retriever = Retriever(
                store=store, embedder=embedder, prefetch_k=settings.retrieval.prefetch_k, fusion=settings.retrieval.fusion,
                interleave_depth=depth, translate=crosslingual.translate if settings.retrieval.query_translation else None,
                chunks_per_document=v.chunks_per_document, chunk_tie_margin=v.tie_margin,
            )
            answerer = Answerer(
                retriever=retriever, llm=llm, top_k=v.top_k,
                abstention=AbstentionRule.for_model(settings.embedding.model, min_relevance=settings.retrieval.min_relevance),
                source_tokens=v.source_tokens or settings.llm.cpu_source_tokens or None, one_source_per_document=v.one_source,
                refit_sources=v.refit,
            )
            started = time.perf_counter()
            results[name] = {split: measure(answerer, qs, translated) for split, qs in splits.items()}
            print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        store.close()

    print(f"window {llm.context_tokens} tokens, {settings.llm.cpu_source_tokens} tokens a source; "
          f"{len(docs)} documents; answerable questions: " + ", ".join(f"{s} {len(qs)}" for s, qs in splits.items()))
    header = "| variant | " + " | ".join(
        f"{s} {lang} {m}" for s in splits for lang in ("en", "zh") for m in ("file", "fact", "tokens")
    ) + " |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, res in results.items():
        cells = []
        for s in splits:
            for lang in ("en", "zh"):
                row = res[s].get(lang, {"n": 0})
                n = row["n"] or 1
                cells += [f"{row.get('file', 0) / n:.2f}", f"{row.get('fact', 0) / n:.2f}", f"{row.get('tokens', 0):.0f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.show_misses:
        for name, res in results.items():
            for s in splits:
                for lang, row in res[s].items():
                    print(f"{name} {s} {lang} fact missed: {' '.join(row['misses'])}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
