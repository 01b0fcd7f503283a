"""Ground answers captured by `bench/capture_answers.py` offline, with the evidence judge, and report
what grounding made of them.

For each captured answer: every sentence with its verdict (kept with source n, or removed) and what
decided it (a near-copy, the judge, a number or name no source holds); then per split and language,
over answerable questions, the share whose grounded answer states a key fact, cites an answering file,
is wrong but cited (not declined, cites a source, no key fact), and is declined although answerable;
over unanswerable ones, the share declined. The judge is the configured chat model (the built-in
Qwen2.5-Coder-1.5B by default, through llama.cpp); its verdicts are cached in `--cache` (JSON, keyed by
sentence and passage), so that a change of rules re-runs in seconds and the model judges each pair once.

With `--labels FILE` (JSONL: `{"id", "sentence", "supported": true|false}` written by hand after
reading the sentence and its cited page), the judge's accuracy on those captured sentences: its
verdicts on the sentences it was asked about, and the whole check's (copies and rules included).
`--dump FILE` writes every claim with its passage and verdict (JSONL), the material to label.

Run: PYTHONPATH=. python bench/ground_answers.py CAPTURED.jsonl [CAPTURED2.jsonl ...] [--quiet]
        [--no-judge] [--labels FILE] [--dump FILE] [--cache FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from assistant.answering.citations import make_citations
from assistant.answering.grounding import Grounder, aconclude, drop_unknown_markers, split_sentences
from assistant.answering.judge import EvidenceJudge
from assistant.core.language import question_language
from assistant.evaluation.metrics import contains_key_fact
from assistant.retrieval import RetrievedChunk
from assistant.retrieval.crosslingual import preload, translate


class CachedJudge(EvidenceJudge):
    """The evidence judge with its verdicts kept in a JSON file, keyed by sentence and passage."""

    def __init__(self, llm, path: Path):
        super().__init__(llm)
        self.path = path
        self.known: dict[str, bool] = json.loads(path.read_text()) if path.is_file() else {}

    async def judge(self, pairs):
        keys = [f"{p.sentence}\x00{p.passage}" for p in pairs]
        new = [p for p, k in zip(pairs, keys) if k not in self.known]
        if new:
            for pair, verdict in zip(new, await super().judge(new)):
                self.known[f"{pair.sentence}\x00{pair.passage}"] = verdict
            self.path.write_text(json.dumps(self.known, ensure_ascii=False))
        return [self.known[k] for k in keys]

    async def answers(self, question, passage):
        key = f"answers\x00{question}\x00{passage}"
        if key not in self.known:
            self.known[key] = await super().answers(question, passage)
            self.path.write_text(json.dumps(self.known, ensure_ascii=False))
        return self.known[key]


def outcome_of(row: dict, grounded, sources) -> dict:
    """The answer figures of one grounded answer (see the module docstring)."""
    keys, files = row["must_contain_any"], row["answer_files"]
    cited = {c.source for c in make_citations(grounded.text, sources)}
    fact = (not grounded.declined) and bool(keys) and contains_key_fact(grounded.text, keys)
    return {
        "fact": fact,
        "cites_file": any(s.endswith(f) for s in cited for f in files),
        "wrong_but_cited": (not grounded.declined) and bool(cited) and not fact,
        "declined": grounded.declined,
        "quoted": grounded.quoted,
    }


async def run(args) -> None:
    preload()
    judge = None
    if not args.no_judge:
        from assistant.core.llm.llama_cpp import LlamaCppLLM

        judge = CachedJudge(LlamaCppLLM(threads=2), args.cache)
    labels = {}
    if args.labels:
        for line in args.labels.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                labels[(item["id"], item["sentence"])] = item["supported"]
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    stats: dict[str, dict[str, list[bool]]] = {}
    agree: dict[str, list[bool]] = {"judge": [], "check": []}
    for captured in args.captured:
        for line in captured.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            split = row.get("split", captured.stem)
            answerable = bool(row["answer_files"])
            bucket = stats.setdefault(f"{split} {row['lang']} {'answerable' if answerable else 'no-answer'}", {})
            if row["gate_abstained"]:
                outcome = {"fact": False, "cites_file": False, "wrong_but_cited": False, "declined": True, "quoted": False}
            else:
                sources = [RetrievedChunk(**s) for s in row["sources"]]
                topic = " ".join(filter(None, (row["question"], row.get("translation"))))
                grounder = Grounder(sources, judge=judge, translate=translate, question=row["question"], topic=topic)
                sentences = split_sentences(drop_unknown_markers(row["raw"], len(sources)))
                verdicts = await grounder.check(sentences)
                grounded = await aconclude(verdicts, grounder, lang=question_language(row["question"]))
                outcome = outcome_of(row, grounded, sources)
                for v in verdicts:
                    if not v.claim or v.echo:
                        continue
                    label = labels.get((row["id"], v.sentence.text))
                    if label is not None:
                        agree["check"].append((v.source is not None) == label)
                        if v.by == "judge":
                            agree["judge"].append((v.source is not None) == label)
                    if dump:
                        dump.write(json.dumps({"id": row["id"], "sentence": v.sentence.text, "passage": v.passage,
                                               "by": v.by, "kept": v.source is not None, "candidate": v.candidate},
                                              ensure_ascii=False) + "\n")
                if not args.quiet:
                    print(f"\n=== {split} {row['id']} {row['question']}\n    answer files: {row['answer_files']}")
                    for v in verdicts:
                        mark = f"[{v.source}]" if v.source else ("--" if v.claim else "..")
                        print(f"  {mark:5} {v.by or '-':8}{v.lexical:4.2f}{' ECHO' if v.echo else ''}  {v.sentence.text[:150]}")
                    print(f"  -> {outcome}\n  {grounded.text[:300]!r}")
            if not answerable:
                outcome = {"declined": outcome["declined"]}
            for key, value in outcome.items():
                bucket.setdefault(key, []).append(bool(value))
    if dump:
        dump.close()
    print("\nsummary (share of questions)")
    for name, bucket in sorted(stats.items()):
        n = len(bucket["declined"])
        print(f"  {name} (n={n}): " + ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in bucket.items()))
    for name, flags in agree.items():
        if flags:
            print(f"  {name} agrees with the hand labels on {sum(flags)}/{len(flags)} sentences")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captured", type=Path, nargs="+")
    parser.add_argument("--quiet", action="store_true", help="only the summary")
    parser.add_argument("--no-judge", action="store_true", help="near-copies and lexical overlap only")
    parser.add_argument("--labels", type=Path, default=None)
    parser.add_argument("--dump", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/answers/judged.json"))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
