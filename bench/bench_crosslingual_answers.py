"""Chinese questions answered from English pages on the embedded default: the whole answer path
(translation, retrieval, focus, the chat model, grounding), scored per direction.

Questions: every Chinese judged question (the four sets of `bench_embedders.QUESTION_SETS`) whose answer
files are all English handbook pages (21), a sample of Chinese questions about Chinese pages and of
Chinese no-answer questions (seeded). Index: each answer file and two neighbouring pages of its folder
(`capture_answers.build_folder`'s choice, paths kept relative to their corpus so that answer files
match), both corpora in one collection, e5 int8. Each question goes through `assistant eval`'s runner
(`evaluation.runner.run_eval`) with the answer cache off; the translation timeout is raised to 60 s so
that the figures measure answers, not the machine's load (on a quiet machine a translation takes about
1.2 s, docs/benchmarks.md).

Printed per direction: answering page among the first 5 documents, key fact in the answer, answering
page cited, declined (answerable questions); declined (no-answer questions); right language.

Run: PYTHONPATH=. .venv/bin/python bench/bench_crosslingual_answers.py [--zh-zh 6] [--no-answer 4] [--seed 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_embedders import QUESTION_SETS  # noqa: E402
from capture_answers import ROOTS, SIBLINGS  # noqa: E402

from assistant.composition import Assistant  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from assistant.evaluation.dataset import load_questions  # noqa: E402
from assistant.evaluation.runner import run_eval  # noqa: E402
from ingest.pipeline import Ingestor  # noqa: E402


def corpus_of(rel: str) -> str | None:
    """`en` or `zh`: the corpus that holds the answer file `rel`, None when neither does."""
    return next((lang for lang, root in ROOTS.items() if (root / rel).is_file()), None)


def direction(q) -> str:
    """`zh->en`, `zh->zh` or `zh no answer`: the question's language against its answering pages'."""
    if not q.answerable:
        return f"{q.lang} no answer"
    pages = {corpus_of(rel) for rel in q.answer_files}
    return f"{q.lang}->{pages.pop()}" if len(pages) == 1 else f"{q.lang}->mixed"


def copy_folder(questions, dst: Path, seed: int) -> int:
    """Each answer file and `SIBLINGS` neighbours of its folder, copied into `dst` under their path
    relative to their corpus; returns the number of files."""
    rng = random.Random(seed)
    files: set[tuple[Path, str]] = set()
    for q in questions:
        for rel in q.answer_files:
            root = ROOTS[corpus_of(rel)]
            files.add((root, rel))
            siblings = sorted(p for p in (root / rel).parent.glob("*.md") if p.name != Path(rel).name)
            files.update((root, str(p.relative_to(root))) for p in rng.sample(siblings, min(SIBLINGS, len(siblings))))
    for root, rel in files:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dst / rel)
    return len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zh-zh", type=int, default=6, help="Chinese questions about Chinese pages, sampled")
    parser.add_argument("--no-answer", type=int, default=4, help="Chinese no-answer questions, sampled")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    questions = [q for path, _role in QUESTION_SETS.values() for q in load_questions(path) if q.lang == "zh"]
    rng = random.Random(args.seed)
    by = {d: [q for q in questions if direction(q) == d] for d in ("zh->en", "zh->zh", "zh no answer")}
    chosen = by["zh->en"] + rng.sample(by["zh->zh"], args.zh_zh) + rng.sample(by["zh no answer"], args.no_answer)
    with tempfile.TemporaryDirectory(prefix="xl-answers-") as tmp:
        folder = Path(tmp) / "docs"
        n_files = copy_folder([q for q in chosen if q.answerable], folder, args.seed)
        settings = Settings(_env_file=None, data_dir=Path(tmp) / "var", model_cache_dir=REPO / "var" / "models",
                            question_translation_timeout_s=60.0)
        res = Resources.open(settings)
        try:
            started = time.perf_counter()
            Ingestor(res).sync(folder)
            print(f"indexed {n_files} files in {time.perf_counter() - started:.0f} s; model {res.llm.name}", flush=True)
            answerer = Assistant.build(res).answerer
            answerer.cache = None  # every question answered, none served from an earlier run's answer
            load = [os.getloadavg()[0]]
            started = time.perf_counter()
            report = run_eval(chosen, retriever=answerer.retriever, answerer=answerer, principal=ANONYMOUS)
            elapsed = time.perf_counter() - started
            load.append(os.getloadavg()[0])
        finally:
            res.close()
    rows: dict[str, dict] = {}
    for q, r in zip(chosen, report.questions):
        row = rows.setdefault(direction(q), {"n": 0, "found": 0, "fact": 0, "cites": 0, "declined": 0, "same_lang": 0})
        row["n"] += 1
        row["found"] += any(doc in q.answer_files for doc in r.documents[:5])
        row["fact"] += bool(r.has_key_fact)
        row["cites"] += bool(r.cites_answer_file)
        row["declined"] += bool(r.abstained)
        row["same_lang"] += bool(r.same_language) or bool(r.abstained)
        print(f"{q.id} {direction(q)}: {'declined' if r.abstained else (r.answer or '')[:100]!r}"
              f"{' KEY FACT' if r.has_key_fact else ''}{' CITES' if r.cites_answer_file else ''}", flush=True)
    print(f"\n{len(chosen)} questions in {elapsed:.0f} s (load {load[0]:.1f} -> {load[1]:.1f})\n")
    print("| direction | questions | answering page in top 5 | key fact | cites answering page | declined | right language or declined |")
    print("|---|---|---|---|---|---|---|")
    for d, row in rows.items():
        print(f"| {d} | {row['n']} | {row['found']} | {row['fact']} | {row['cites']} | {row['declined']} | {row['same_lang']} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "report": report.to_dict()}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
