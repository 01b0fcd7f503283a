"""Chinese questions searched with the chat model's English translation (issue 22): retrieval by
direction against the question searched alone, in one process on one index.

Each judged question is grouped by direction, its language against its answering page's (en->en,
en->zh, zh->zh, zh->en). Chinese questions are translated once by the configured chat model
(`rewrite.translate_question`, timed), then every variant searches every question:
- `question alone`: the baseline (`ASSISTANT_QUESTION_TRANSLATION=false`);
- `translation alone`: the English translation instead of the question;
- `one text`: question and translation as one query text (one embedding of both);
- `mean of embeddings, fused order`: `Retriever.search(translation=...)` with `other_language_at=0`:
  the keyword query of both texts, the dense query the normalised mean of the two embeddings;
- `mean of embeddings`: the product: the same, with the best English chunk moved up to the second place
  when one Chinese page holds the first two (`retriever.other_language_at`).
English questions are searched as asked in every variant. Printed: recall@1/5 and nDCG@10 per
direction (R@2 as well: the 768-token CPU window holds about two sources), the abstention gate (answerable let through, no-answer stopped), translation time and
search latency p50/p95 with the ratio against the baseline (variants timed in turn, question by question).

Usage (the e5 index that `bench/bench_embedders.py --keep DIR` builds, reused; the chat model as configured):

    nice -n 5 .venv/bin/python bench/bench_embedders.py --every 10 --answer-files --models e5 \\
        --chunks 20 --rounds 1 --keep /tmp/bench-embedders    # builds the e5 index once (2-10 minutes)
    .venv/bin/python bench/bench_question_translation.py --keep /tmp/bench-embedders [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_embedders import E5, QUESTION_SETS, ROOTS, load, open_index  # noqa: E402

from assistant.answering.rewrite import translate_question  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.evaluation.dataset import load_questions  # noqa: E402
from assistant.evaluation.metrics import document_ranking, percentile_ms, ranking_metrics  # noqa: E402

DIRECTIONS = ("en->en", "en->zh", "zh->zh", "zh->en")
VARIANTS = ("question alone", "translation alone", "one text", "mean of embeddings, fused order", "mean of embeddings")


def direction(question) -> str:
    """`<question language>-><answering page's language>` (a handbook page is English, a docs-zh page
    Chinese); "" for a question without an answer."""
    if not question.answer_files:
        return ""
    page = "en" if (ROOTS[0] / question.answer_files[0]).is_file() else "zh"
    return f"{question.lang}->{page}"


def search_args(variant: str, question: str, translation: str | None) -> dict:
    """`Retriever.search` arguments of `variant` for one question (its translation None: as asked)."""
    if translation is None or variant == "question alone":
        return {"query": question}
    if variant == "translation alone":
        return {"query": translation}
    if variant == "one text":
        return {"query": f"{question} {translation}"}
    return {"query": question, "translation": translation}


def searched(retriever, variant: str, **kwargs):
    """`retriever.search(**kwargs)` as `variant` searches: the fused order alone for `…, fused order`."""
    product = retriever.other_language_at
    retriever.other_language_at = 0 if variant.endswith("fused order") else product
    try:
        return retriever.search(principal=ANONYMOUS, **kwargs)
    finally:
        retriever.other_language_at = product


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, required=True, help="bench_embedders' --keep folder (its e5 index)")
    parser.add_argument("--rounds", type=int, default=2, help="latency rounds over every question")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    res, assistant = open_index(E5, args.keep / E5.split(":")[-1])
    retriever, rule = assistant.retriever, assistant.answerer.abstention
    questions = [q for path, _role in QUESTION_SETS.values() for q in load_questions(path)]
    out: dict = {"load": [load()], "translations": {}, "variants": {}, "latency": {}}

    # Translation: the product's request to the configured chat model, each Chinese question once.
    translate_s = []
    for q in questions:
        if q.lang == "zh" and q.question not in out["translations"]:
            started = time.perf_counter()
            out["translations"][q.question] = asyncio.run(translate_question(q.question, llm=res.llm))
            translate_s.append(time.perf_counter() - started)
    out["translate_ms"] = {"p50": percentile_ms(translate_s, 50), "p95": percentile_ms(translate_s, 95),
                           "failed": sum(1 for t in out["translations"].values() if t is None)}
    out["load"].append(load())

    for variant in VARIANTS:
        rankings, gates = {}, {}
        for i, q in enumerate(questions):
            kwargs = search_args(variant, q.question, out["translations"].get(q.question))
            chunks = searched(retriever, variant, top_k=20, evidence=False, **kwargs).chunks
            gate = rule.abstains(searched(retriever, variant, top_k=assistant.answerer.top_k, **kwargs))
            key = f"{i}:{q.id}"
            rankings[key] = (direction(q), document_ranking((c.source for c in chunks), depth=10), q.answer_files)
            gates.setdefault(direction(q) or f"{q.lang} no answer", []).append(gate)
        groups = {}
        for d in DIRECTIONS:
            items = {k: v for k, v in rankings.items() if v[0] == d}
            per_q = ranking_metrics({k: v[1] for k, v in items.items()}, {k: v[2] for k, v in items.items()})
            groups[d] = {m: sum(x[m] for x in per_q.values()) / len(per_q) for m in ("recall@1", "recall@5", "ndcg@10")}
            groups[d]["recall@2"] = sum(bool(set(v[1][:2]) & set(v[2])) for v in items.values()) / len(items)
            groups[d]["questions"] = len(per_q)
        out["variants"][variant] = {"groups": groups, "gate_stopped": {k: [sum(v), len(v)] for k, v in gates.items()}}
    out["load"].append(load())

    timings: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _round in range(args.rounds):
        for i, q in enumerate(questions):
            for variant in VARIANTS[i % len(VARIANTS):] + VARIANTS[: i % len(VARIANTS)]:
                kwargs = search_args(variant, q.question, out["translations"].get(q.question))
                started = time.perf_counter()
                searched(retriever, variant, top_k=assistant.answerer.top_k, **kwargs)
                timings[variant].append(time.perf_counter() - started)
    base = timings[VARIANTS[0]]
    for variant, t in timings.items():
        out["latency"][variant] = {"p50_ms": percentile_ms(t, 50), "p95_ms": percentile_ms(t, 95),
                                   "p50_ratio": percentile_ms(t, 50) / percentile_ms(base, 50),
                                   "p95_ratio": percentile_ms(t, 95) / percentile_ms(base, 95)}
    out["load"].append(load())
    res.close()

    tr = out["translate_ms"]
    print(f"\nTranslation of {len(translate_s)} Chinese questions by the chat model: p50 {tr['p50']:.0f} ms, "
          f"p95 {tr['p95']:.0f} ms, {tr['failed']} unusable (load {out['load'][0]:.1f} -> {out['load'][1]:.1f})")
    first = out["variants"][VARIANTS[0]]["groups"]
    print(f"\nRetrieval by direction, the four judged sets together (load {out['load'][1]:.1f} -> {out['load'][2]:.1f})\n")
    print("| variant | " + " | ".join(f"{d} ({first[d]['questions']}) R@1 / R@2 / R@5 / nDCG@10" for d in DIRECTIONS)
          + " | gate stopped: zh->zh, zh->en, zh no answer |")
    print("|---|" + "---|" * (len(DIRECTIONS) + 1))
    for variant in VARIANTS:
        v = out["variants"][variant]
        cells = [f"{g['recall@1']:.3f} / {g['recall@2']:.3f} / {g['recall@5']:.3f} / {g['ndcg@10']:.3f}"
                 for g in v["groups"].values()]
        gate = ", ".join(f"{v['gate_stopped'][k][0]}/{v['gate_stopped'][k][1]}" for k in ("zh->zh", "zh->en", "zh no answer"))
        print(f"| {variant} | " + " | ".join(cells) + f" | {gate} |")
    print(f"\nSearch latency (translation excluded), {len(questions)} questions x {args.rounds} rounds, variants in "
          f"turn (load {out['load'][2]:.1f} -> {out['load'][3]:.1f})\n")
    print("| variant | p50 / p95 ms | ratio to the question alone, p50 / p95 |\n|---|---|---|")
    for variant, lat in out["latency"].items():
        print(f"| {variant} | {lat['p50_ms']:.0f} / {lat['p95_ms']:.0f} | {lat['p50_ratio']:.2f} / {lat['p95_ratio']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
