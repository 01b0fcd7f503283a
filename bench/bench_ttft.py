"""Where the time to the first token goes on the embedded default, and raw llama.cpp on the same prompt.

For development questions (the sample of `bench/capture_answers.py`: same seed, same small index of
their answer files and two neighbouring pages each, e5 int8, the built-in chat model), each question is
asked once per variant of the source packing (`--variants`: CPU window tokens x per-source cap, see
`answering/focus.py`), in turn, so that the variants share the machine's load. Per question and variant:

- embed: the question's e5 embedding alone (`Embedder.embed_queries`, warm);
- prepare: `Answerer.prepare`: retrieval (embedding, dense + keyword search, fusion, abstention) and
  packing into the window (and focusing, when a cap is set);
- prompt eval: llama.cpp's own prompt-evaluation time and token count for the product's generation
  (`llama_perf_context`: the tokens evaluated after the reused prefix);
- model TTFT: `Answerer.stream`'s prompt to the model's first text delta (measured as prepare + the
  stream's first delta: the grounded stream holds deltas back until a sentence ends, so `first
  sentence` is also shown: the first token event the reader sees);
- raw TTFT: `Llama.create_chat_completion` on the very messages the product built, on the same loaded
  model right after it, from the same KV state the product starts from (the saved system-prompt
  prefix), to the first delta.

Every figure is printed with `os.getloadavg()` at the time: the machine is shared; ratios within one run
are what compare. `idle-core estimate`: what the first token would take with the cores to itself,
from CPU time rather than wall time: prepare's process CPU seconds plus raw llama.cpp's CPU seconds to
its first delta divided by the threads (llama.cpp's threads sleep while they wait, OMP_WAIT_POLICY=PASSIVE,
so its CPU time is its work). The generation is stopped at the first sentence (quality is measured by
`bench/capture_answers.py` + `bench/ground_answers.py`).

Run: PYTHONPATH=. python bench/bench_ttft.py [--per-lang 4] [--langs en,zh] [--variants 1024:0,1024:120] [--keep DIR]
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

import llama_cpp

import assistant.core.llm.llama_cpp  # noqa: F401  sets OMP_WAIT_POLICY=PASSIVE before llama.cpp loads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_answers import build_folder, choose  # noqa: E402

from assistant.answering.events import Done, Token  # noqa: E402
from assistant.composition import Assistant  # noqa: E402
from assistant.core.principals import ANONYMOUS  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from assistant.evaluation.dataset import load_questions  # noqa: E402
from ingest.pipeline import Ingestor  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def perf(llama) -> tuple[float, int]:
    """llama.cpp's cumulative prompt-evaluation milliseconds and tokens of this context."""
    data = llama_cpp.llama_perf_context(llama._ctx.ctx)
    return data.t_p_eval_ms, data.n_p_eval


async def product(answerer, question: str) -> dict:
    """One question through `Answerer.stream`, stopped at the first token event, from the saved
    system-prompt prefix (not from the previous variant's prompt of the same question, which shares
    more with it than two questions do)."""
    llm = answerer.llm.backend
    llama = llm._llama
    with llm._lock:  # start from the saved system prompt, as a new question after another one does
        if llm._prefix_state is not None:
            llama.load_state(llm._prefix_state)
    ms0, n0 = perf(llama)
    started = time.perf_counter()
    first_sentence = None
    abstained = False
    stream = answerer.stream(question, principal=ANONYMOUS)
    async for event in stream:
        if isinstance(event, Token):
            first_sentence = time.perf_counter() - started
            break
        if isinstance(event, Done):
            abstained = event.abstained
    await stream.aclose()
    ms1, n1 = perf(llama)
    return {"first_sentence_s": first_sentence, "p_eval_s": (ms1 - ms0) / 1000, "p_eval_tokens": n1 - n0,
            "abstained": abstained}


def raw(llm, messages: list) -> tuple[float, float]:
    """Wall and process CPU seconds to the first delta of raw llama.cpp on `messages`, from the KV state the product starts
    from (the system prompt's saved prefix; else an empty cache), not from the product's own prompt,
    which it would find whole in the cache."""
    with llm._lock:  # the product's worker thread may still be finishing the token it was at when stopped
        return _raw(llm, messages)


def _raw(llm, messages: list) -> tuple[float, float]:
    llama, sampling = llm._llama, llm.sampling
    if llm._prefix_state is not None:
        llama.load_state(llm._prefix_state)
    else:
        llama.reset()
        llama._ctx.kv_cache_clear()
    started = time.perf_counter()
    cpu = time.process_time()
    chunks = llama.create_chat_completion(
        messages=messages, max_tokens=8, temperature=0.1, stream=True,
        repeat_penalty=sampling.repeat_penalty, top_p=sampling.top_p, top_k=sampling.top_k,
    )
    try:
        for chunk in chunks:
            if chunk["choices"][0].get("delta", {}).get("content"):
                break
    finally:
        chunks.close()
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=REPO / "tests" / "data" / "dev_questions.jsonl")
    parser.add_argument("--per-lang", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--langs", default="en,zh")
    parser.add_argument("--variants", default="1024:0,1024:120", help="WINDOW:SOURCE_TOKENS,... (0 = whole chunks)")
    parser.add_argument("--model", default=None, help="built-in chat model (default: the configured one)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="folder for the index, kept between runs (another llama.cpp build on the same index)")
    args = parser.parse_args()
    variants = [tuple(int(x) for x in v.split(":")) for v in args.variants.split(",")]
    questions = [q for q in choose(load_questions(args.questions), args.per_lang, 0, args.seed)
                 if q.lang in args.langs.split(",")]
    with tempfile.TemporaryDirectory(prefix="ttft-") as scratch:
        tmp = args.keep or scratch
        indexed = (Path(tmp) / "var").is_dir()
        if not indexed:
            build_folder(questions, Path(tmp) / "docs", args.seed)
        extra = {"llm_model": args.model} if args.model else {}
        res = Resources.open(Settings(_env_file=None, data_dir=Path(tmp) / "var", model_cache_dir=REPO / "var" / "models",
                                      answer_cache_entries=0, **extra))
        try:
            started = time.perf_counter()
            if not indexed:
                Ingestor(res).sync(Path(tmp) / "docs")
            print(f"indexed in {time.perf_counter() - started:.0f} s; load {os.getloadavg()}", flush=True)
            answerer = Assistant.build(res).answerer
            llm = res.llm
            llm_threads = res.settings.threads
            started = time.perf_counter()
            answerer.prepare("warm up", principal=ANONYMOUS)
            print(f"model {llm.name} loaded in {time.perf_counter() - started:.1f} s; "
                  f"{llama_cpp.llama_print_system_info().decode()[:200]}", flush=True)
            # The system prompt's prefix, once: the last question, so that the first one measured is not
            # found whole in the cache (the backend then saves the prefix the two prompts share).
            asyncio.run(product(answerer, questions[-1].question))
            rows: dict[tuple[int, int], list[dict]] = {v: [] for v in variants}
            for q in questions:
                for window, cap in variants:
                    llm.context_tokens = window
                    answerer.source_tokens = cap or None
                    t0 = time.perf_counter()
                    res.embedder.embed_queries([q.question])
                    embed_s = time.perf_counter() - t0
                    t0, c0 = time.perf_counter(), time.process_time()
                    _, messages = answerer.prepare(q.question, principal=ANONYMOUS)
                    prepare_s, prepare_cpu = time.perf_counter() - t0, time.process_time() - c0
                    row = asyncio.run(product(answerer, q.question))
                    raw_s, raw_cpu = raw(llm, messages) if messages else (float("nan"), float("nan"))
                    row.update(id=q.id, embed_s=embed_s, prepare_s=prepare_s, raw_s=raw_s,
                               model_ttft_s=prepare_s + row["p_eval_s"], load=os.getloadavg()[0],
                               idle_estimate_s=prepare_cpu + raw_cpu / llm_threads)
                    rows[(window, cap)].append(row)
                    print(f"{q.id} w{window} cap{cap}: embed {embed_s:.2f} prepare {prepare_s:.2f} "
                          f"p_eval {row['p_eval_s']:.1f} s / {row['p_eval_tokens']} tok, first sentence "
                          f"{row['first_sentence_s']}, raw {raw_s:.1f} s (CPU {raw_cpu:.1f} s), prepare CPU "
                          f"{prepare_cpu:.2f} s, load {row['load']:.1f}", flush=True)
            print("\n| window:cap | n | prompt tokens evaluated p50 | prompt eval tok/s p50 | embed p50 | prepare p50 "
                  "| model TTFT p50 / p95 | raw TTFT p50 / p95 | product/raw | first sentence p50 / p95 | load 1-min "
                  "| idle-core estimate p50 / p95 |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for (window, cap), rs in rows.items():
                rs = [r for r in rs if not r["abstained"] and r["p_eval_tokens"]]
                if not rs:
                    continue
                med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
                rate = statistics.median(r["p_eval_tokens"] / r["p_eval_s"] for r in rs)
                firsts = [r["first_sentence_s"] for r in rs if r["first_sentence_s"]]
                ratio = statistics.median(r["model_ttft_s"] / r["raw_s"] for r in rs)
                print(f"| {window}:{cap} | {len(rs)} | {med('p_eval_tokens'):.0f} | {rate:.1f} | {med('embed_s'):.2f} s "
                      f"| {med('prepare_s'):.2f} s | {med('model_ttft_s'):.1f} / {pct([r['model_ttft_s'] for r in rs], 95):.1f} s "
                      f"| {med('raw_s'):.1f} / {pct([r['raw_s'] for r in rs], 95):.1f} s | {ratio:.2f} "
                      f"| {pct(firsts, 50):.1f} / {pct(firsts, 95):.1f} s "
                      f"| {min(r['load'] for r in rs):.1f}-{max(r['load'] for r in rs):.1f} "
                      f"| {med('idle_estimate_s'):.1f} / {pct([r['idle_estimate_s'] for r in rs], 95):.1f} s |")
        finally:
            res.close()


if __name__ == "__main__":
    main()
