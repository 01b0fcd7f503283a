"""Seconds a reader waits: to the sources, to the first answer text, and to the checked answer.

The product's answering path as the web chat runs it (`Answerer.stream(draft=True)`: retrieval, the
`sources` event, generation streamed as a draft, the evidence check with the served chat model, the
`revise` or `replace` events, `done`) with the configured chat model (the built-in Qwen2.5-Coder-1.5B
by default) over a small index of the questions' answer files and their neighbours
(`capture_answers.build_folder`). Per question: seconds from the request to the `sources` event, to
the first `token` event, to the `done` event (the checked answer), the pairs the judge was asked and
the seconds the check took (from the `checking` status to `done`); then medians and maxima, with the
machine's load.

Run: PYTHONPATH=. python bench/bench_answer_latency.py [--questions FILE] [--per-lang N] [--no-answer N]
        [--threads N] [--data-dir VAR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capture_answers import REPO, build_folder, choose  # noqa: E402

from assistant.answering.events import Done, Sources, Status, Token  # noqa: E402
from assistant.composition import Assistant  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from assistant.evaluation.dataset import load_questions  # noqa: E402
from ingest.pipeline import Ingestor  # noqa: E402


async def timed(answerer, question: str) -> dict:
    """Seconds from the request to each stage of one answer (`None` for a stage that did not come)."""
    started = time.perf_counter()
    marks: dict = {"sources_s": None, "final_sources_s": None, "first_text_s": None, "checking_s": None,
                   "checked_s": None}
    done: Done | None = None
    async for event in answerer.stream(question, principal=ANONYMOUS, draft=True):
        now = round(time.perf_counter() - started, 2)
        if isinstance(event, Sources) and marks["sources_s"] is None:
            marks["sources_s"] = now
        if isinstance(event, Sources) and not event.preliminary:
            marks["final_sources_s"] = now  # a translated question's sources after its translation
        elif isinstance(event, Token) and marks["first_text_s"] is None:
            marks["first_text_s"] = now
        elif isinstance(event, Status) and event.stage == "checking":
            marks["checking_s"] = now
        elif isinstance(event, Done):
            marks["checked_s"] = now
            done = event
    grounding = (done.grounding if done else None) or {}
    return {**marks, "judged": grounding.get("judged", 0), "copies": grounding.get("copies", 0),
            "abstained": done.abstained if done else None, "quoted": bool(done and done.quoted)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=REPO / "tests" / "data" / "dev_questions.jsonl")
    parser.add_argument("--per-lang", type=int, default=2)
    parser.add_argument("--no-answer", type=int, default=0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (ASSISTANT_LLM_THREADS)")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep the index here between runs")
    args = parser.parse_args()
    questions = choose(load_questions(args.questions), args.per_lang, args.no_answer, args.seed)
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        folder = Path(tmp) / "docs"
        build_folder(questions, folder, args.seed)
        data_dir = args.data_dir.resolve() if args.data_dir else Path(tmp) / "var"
        res = Resources.open(Settings(_env_file=None, data_dir=data_dir, model_cache_dir=REPO / "var" / "models",
                                      llm_threads=args.threads, answer_cache_entries=0))
        try:
            Ingestor(res).sync(folder)
            answerer = Assistant.build(res).answerer
            asyncio.run(answerer.translation("预热")) if answerer.translate_questions else None  # load the model
            rows = []
            print("question  sources_s  final_sources_s  first_text_s  checking_s  checked_s  judged  copies  outcome  load1")
            for q in questions:
                row = asyncio.run(timed(answerer, q.question))
                outcome = "declined" if row["abstained"] else ("quoted" if row["quoted"] else "answered")
                rows.append(row)
                print(f"{q.id:9} {row['sources_s']!s:>9}  {row['final_sources_s']!s:>15}  {row['first_text_s']!s:>12}  {row['checking_s']!s:>10}  "
                      f"{row['checked_s']!s:>9}  {row['judged']:6}  {row['copies']:6}  {outcome:8}  {os.getloadavg()[0]:.1f}",
                      flush=True)
        finally:
            res.close()
    for key in ("sources_s", "final_sources_s", "first_text_s", "checked_s"):
        values = [r[key] for r in rows if r[key] is not None]
        if values:
            print(f"{key}: median {statistics.median(values):.1f} s, max {max(values):.1f} s (n={len(values)})")
    checks = [r["checked_s"] - r["checking_s"] for r in rows if r["checking_s"] is not None]
    if checks:
        print(f"evidence check: median {statistics.median(checks):.1f} s, max {max(checks):.1f} s (n={len(checks)})")
    print(f"cores {os.cpu_count()}, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
