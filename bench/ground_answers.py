"""Ground answers captured by `bench/capture_answers.py` offline and report what grounding did to them.

For each captured answer: every sentence with its verdict (kept with source n, or removed) and its
lexical support and cosine; then per language, over answerable questions, the share whose raw and
grounded answers hold a key fact, the share declined, and the share that cite an answer file; over
unanswerable ones, the share declined; over the answers not declined, the share in the question's
language; and the generation's time to first token (p50 / p95) and tokens per second (p50) as captured.
Thresholds are the module's (`assistant.answering.grounding`),
so a change there is measured on the same answers in seconds.

Run: PYTHONPATH=. python bench/ground_answers.py CAPTURED.jsonl [--quiet]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from assistant.answering.citations import make_citations
from assistant.answering.grounding import ground
from assistant.answering.language_check import answer_lang_matches
from assistant.core.embedder import BUILTIN_E5, Embedder
from assistant.core.language import question_language
from assistant.evaluation.metrics import contains_key_fact
from assistant.answering.grounded_stream import grounder_for
from assistant.retrieval import RetrievedChunk
from assistant.retrieval.crosslingual import preload, translate


class _Retriever:
    """What `grounder_for` reads of a retriever: its embedder and its query translation."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.translate = translate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captured", type=Path)
    parser.add_argument("--quiet", action="store_true", help="only the summary")
    args = parser.parse_args()
    preload()
    retriever = _Retriever(Embedder(BUILTIN_E5))
    rows = [json.loads(line) for line in args.captured.read_text(encoding="utf-8").splitlines() if line.strip()]
    stats: dict[str, dict[str, list[bool]]] = {}
    timings: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row["gate_abstained"]:
            outcome = {"declined": True, "raw_fact": False, "fact": False, "cites_file": False}
        else:
            sources = [RetrievedChunk(**s) for s in row["sources"]]
            grounded = ground(row["raw"], grounder_for(retriever, sources, row["question"], topic=" ".join(filter(None, (row["question"], row.get("translation"))))), lang=question_language(row["question"]))
            cited = {c.source for c in make_citations(grounded.text, sources)}
            keys = row["must_contain_any"]
            outcome = {
                "declined": grounded.declined,
                "raw_fact": contains_key_fact(row["raw"], keys) if keys else False,
                "fact": (not grounded.declined) and (contains_key_fact(grounded.text, keys) if keys else False),
                "cites_file": any(s.endswith(f) for s in cited for f in row["answer_files"]),
            }
            if not grounded.declined:
                outcome["right_lang"] = answer_lang_matches(row["question"], grounded.text)
            for key in ("ttft_s", "tokens_per_s"):
                if row.get(key) is not None:
                    timings.setdefault(row["lang"], {}).setdefault(key, []).append(float(row[key]))
            if not args.quiet:
                given = [s["source"].split("/", 1)[-1] for s in row["sources"]]
                print(f"\n=== {row['id']} {row['question']}\n    answer files: {row['answer_files']}\n    given: {given}")
                for v in grounded.verdicts:
                    mark = f"[{v.source}]" if v.source else ("--" if v.claim else "..")
                    cos = "" if v.cosine is None else f" cos {v.cosine:.3f}"
                    print(f"  {mark:5} lex {v.lexical:.2f}{cos}{' ECHO' if v.echo else ''}{' OPPOSITE' if v.contradicts else ''}  {v.sentence.text[:150]}")
                print(f"  -> declined={grounded.declined} share={grounded.supported_share:.2f} {outcome}")
        kind = "answerable" if row["answer_files"] else "no-answer"
        bucket = stats.setdefault(f"{row['lang']} {kind}", {})
        for key, value in outcome.items():
            bucket.setdefault(key, []).append(bool(value))
    print("\nsummary (share of questions)")
    for name, bucket in sorted(stats.items()):
        n = len(bucket["declined"])
        figures = ", ".join(f"{k} {sum(v) / len(v):.2f}" + ("" if len(v) == n else f" (of {len(v)})")
                            for k, v in bucket.items())
        print(f"  {name} (n={n}): {figures}")
    for lang, t in sorted(timings.items()):
        ttft, rate = t.get("ttft_s", []), t.get("tokens_per_s", [])
        print(f"  {lang} generation (n={len(ttft)}): time to first token p50 {np.percentile(ttft, 50):.1f} s, "
              f"p95 {np.percentile(ttft, 95):.1f} s; {np.percentile(rate, 50):.1f} tokens/s p50")


if __name__ == "__main__":
    main()
