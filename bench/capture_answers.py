"""Capture the embedded chat model's raw answers on development questions, for grounding calibration.

The product's own path up to generation (a Chinese question's translation by the chat model, retrieval
as an anonymous reader over a small index of the questions' answer files and their neighbours,
abstention, packing, the product's prompt), then the model's raw text, before any grounding. Each line of the output JSONL holds the question, its
judgments, the numbered sources the model was given, the raw answer, and the time to first delta and
tokens per second of the generation.

`bench/ground_answers.py` then grounds the captured answers offline, so that thresholds can be fitted
on a real model's writing without generating again (generation is the slow part: about a minute an
answer for Qwen2.5-1.5B on 2 cores).

With `--folder DIR` the index is DIR as it is (e.g. the product's own docs/, which `make run` serves)
and every question of `--questions` is asked; their `answer_files` are paths relative to DIR. With
`--data-dir VAR` the index is kept in VAR and only synced by the next run (a whole corpus is embedded once).

Several question files may be asked in one run (one index of all their answer files): `--questions
FILE[:PER_LANG:NO_ANSWER] ...`, each sampled with its own counts (default `--per-lang`, `--no-answer`);
each output row names its file's stem as `split`, and languages alternate in the order asked.

Run: PYTHONPATH=. python bench/capture_answers.py OUT.jsonl [--questions FILE[:N:M] ...] [--per-lang N] [--no-answer N]
        [--source-tokens N] [--window N] [--model NAME] [--folder DIR [--data-dir VAR]] [--ask STEM,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS
from assistant.core.resources import Resources
from assistant.core.settings import Settings
from assistant.evaluation.dataset import load_questions
from ingest.pipeline import Ingestor

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO.parent / "shared" / "corpus").resolve()
ROOTS = {
    "en": CORPUS / "handbook-en" / "sourcegraph-handbook" / "content",
    "zh": CORPUS / "docs-zh" / "pingcap-docs-cn",
}
SIBLINGS = 2  # neighbouring files of each answer file's folder: the pages retrieval confuses it with


def choose(questions, per_lang: int, no_answer: int, seed: int):
    """`per_lang` answerable and `no_answer` unanswerable questions per language, drawn with `seed`."""
    rng = random.Random(seed)
    chosen = []
    for lang in ("en", "zh"):
        answerable = [q for q in questions if q.lang == lang and q.answerable]
        unanswerable = [q for q in questions if q.lang == lang and not q.answerable]
        chosen += rng.sample(answerable, min(per_lang, len(answerable)))
        chosen += rng.sample(unanswerable, min(no_answer, len(unanswerable)))
    return chosen


def interleaved(questions):
    """`questions` with languages alternating (en, zh, en, …) in their order, so that a capture cut
    short holds both languages."""
    by_lang = [[q for q in questions if q.lang == lang] for lang in ("en", "zh")]
    out = []
    for i in range(max(map(len, by_lang), default=0)):
        out += [group[i] for group in by_lang if i < len(group)]
    return out


def build_folder(questions, dst: Path, seed: int) -> int:
    """Copy each question's answer files and `SIBLINGS` neighbours of theirs into `dst` (a scratch
    folder outside the project); returns the number of files."""
    rng = random.Random(seed)
    files: set[tuple[str, str]] = set()
    for q in questions:
        for rel in q.answer_files:
            root = next(r for r in ROOTS.values() if (r / rel).is_file())
            files.add((str(root), rel))
            siblings = sorted(p for p in (root / rel).parent.glob("*.md") if p.name != Path(rel).name)
            for p in rng.sample(siblings, min(SIBLINGS, len(siblings))):
                files.add((str(root), str(p.relative_to(root))))
    for root, rel in files:
        target = dst / Path(root).parent.name / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(root) / rel, target)
    return len(files)


async def capture(answerer, question: str) -> dict:
    """The sources and the raw answer to `question`, with generation timings."""
    params = answerer.defaults
    # The product's translation of a Chinese question (`Answerer.translation`), searched with it.
    # A gated row keeps its translation too (None where one was asked for: it failed or timed out), since the gate
    # sees the translation's coverage: a question gated in one run and answered in another is then explained.
    translates = answerer.translates(question)
    translation = await answerer.translation(question) if translates else None
    sources, messages = answerer.prepare(question, principal=ANONYMOUS, params=params, translation=translation)
    if messages is None:
        return {"gate_abstained": True, "sources": [asdict(s) for s in sources], "raw": "", "translation": translation,
                "translation_failed": translates and translation is None}
    started = time.perf_counter()
    first = None
    parts = []
    async for delta in answerer.llm.stream(messages, max_tokens=params.max_tokens, temperature=params.temperature,
                                           stop=params.stop):
        if first is None:
            first = time.perf_counter() - started
        parts.append(delta)
    total = time.perf_counter() - started
    raw = "".join(parts)
    tokens = answerer.llm.count_tokens(raw)
    return {
        "gate_abstained": False, "sources": [asdict(s) for s in sources], "raw": raw, "translation": translation,
        "translation_failed": translates and translation is None,
        "prompt_tokens": sum(answerer.llm.count_tokens(m["content"]) for m in messages),
        "ttft_s": round(first or total, 2), "total_s": round(total, 2),
        "tokens_per_s": round(tokens / max(total - (first or 0), 1e-6), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--questions", nargs="+", default=[str(REPO / "tests" / "data" / "dev_questions.jsonl")],
                        help="question files, each FILE or FILE:PER_LANG:NO_ANSWER")
    parser.add_argument("--per-lang", type=int, default=6)
    parser.add_argument("--no-answer", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--langs", default="en,zh", help="languages to ask in (the index holds both)")
    parser.add_argument("--ask", default=None,
                        help="only ask the questions of these files (stems, comma-separated); the index still holds "
                             "every file's answers, so that runs split this way share one index")
    parser.add_argument("--source-tokens", type=int, default=None, help="ASSISTANT_LLM_CPU_SOURCE_TOKENS (default: the setting)")
    parser.add_argument("--window", type=int, default=None, help="ASSISTANT_LLM_CPU_WINDOW_TOKENS (default: the setting)")
    parser.add_argument("--model", default=None, help="ASSISTANT_LLM_MODEL (default: the setting)")
    parser.add_argument("--folder", type=Path, default=None,
                        help="index this folder as it is and ask every question of --questions")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the index in this data folder (synced, so a second run re-embeds nothing)")
    args = parser.parse_args()
    questions, split_of = [], {}
    for spec in args.questions:
        path, *counts = spec.split(":")
        per_lang, no_answer = (int(counts[0]), int(counts[1])) if counts else (args.per_lang, args.no_answer)
        some = load_questions(Path(path))
        if args.folder is None:
            some = interleaved(choose(some, per_lang, no_answer, args.seed))
        split_of.update({q.id: Path(path).stem for q in some})
        questions += some
    asked = [q for q in questions if q.lang in args.langs.split(",")
             and (args.ask is None or split_of[q.id] in args.ask.split(","))]
    with tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        if args.folder is None:
            folder = Path(tmp) / "docs"
            n_files = build_folder(questions, folder, args.seed)
        else:
            folder = args.folder.resolve()
            n_files = sum(1 for p in folder.rglob("*") if p.is_file())
        chosen = {"llm_cpu_source_tokens": args.source_tokens, "llm_cpu_window_tokens": args.window, "llm_model": args.model}
        data_dir = args.data_dir.resolve() if args.data_dir else Path(tmp) / "var"
        res = Resources.open(Settings(_env_file=None, data_dir=data_dir, model_cache_dir=REPO / "var" / "models",
                                      **{k: v for k, v in chosen.items() if v is not None}))
        try:
            started = time.perf_counter()
            Ingestor(res).sync(folder)
            print(f"indexed {n_files} files in {time.perf_counter() - started:.0f} s", flush=True)
            answerer = Assistant.build(res).answerer
            with args.out.open("w", encoding="utf-8") as out:
                for q in asked:
                    row = {"id": q.id, "split": split_of[q.id], "lang": q.lang, "question": q.question, "answer_files": q.answer_files,
                           "must_contain_any": q.must_contain_any, **asyncio.run(capture(answerer, q.question)),
                           "load1": round(os.getloadavg()[0], 1)}
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    out.flush()
                    print(f"{q.id}: ttft {row.get('ttft_s')} s, {row.get('tokens_per_s')} tok/s, load {row['load1']}: "
                          f"{row['raw'][:120]!r}",
                          flush=True)
        finally:
            res.close()


if __name__ == "__main__":
    main()
