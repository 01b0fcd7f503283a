"""Issue 22 figures for the embedded chat model: answers to 8 grounded prompts (5 English, 3 Chinese, 2
of them without an answer in the sources) and their time to first token / tokens per second, for each
built-in model, through the product's answering path and through raw llama.cpp on the same prompts.

What is measured, in one process per OpenMP wait policy (libgomp reads it once, when llama.cpp's
library loads, so the policy comparison runs this script again as a child process):
- product: `Answerer.stream` on a small index of the prompts' answer files (retrieval, packing, the
  backend's worker thread and its stable-prefix reuse included); the prompts run in order, so each
  one finds the previous one's system prompt in llama.cpp's KV cache, as consecutive chat questions do.
- raw warm: `Llama.create_chat_completion` on the very messages the product built, in the same order
  on the same loaded model (llama.cpp reuses the shared prefix by itself).
- raw cold: the same with the KV cache cleared before each prompt: the whole prompt is evaluated.
- tokens/s: completion tokens after the first / seconds from the first token to the last.
Quality per answer: a key fact of the answer file appears, the answer is in the question's language,
no loop (one 6-word or 12-character span three times), no echo of the system prompt, declined when
the sources hold no answer.

Usage: .venv/bin/python bench/bench_llm.py [--models qwen2.5-1.5b,qwen2.5-0.5b,smollm2] [--threads 2]
           [--omp] [--window 0]   (prints Markdown; answers go to bench/out/llm_answers.jsonl)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--omp-child-default" in sys.argv:  # load llama.cpp's OpenMP before anything sets the policy
    import llama_cpp  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CORPUS = REPO.parent / "shared" / "corpus"
HANDBOOK = CORPUS / "handbook-en" / "sourcegraph-handbook" / "content"
DOCS_ZH = CORPUS / "docs-zh" / "pingcap-docs-cn"
OUT = REPO / "bench" / "out"

HANDBOOK_FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "benefits-pay-perks/benefits-perks/parental-leave.md",
    "departments/tech-ops/process/buyback.md",
    "departments/tech-ops/process/application_access_request.md",
]
ZH_FILES = ["faq/tidb-faq.md", "faq/sql-faq.md"]
# (id, question, key facts (any one counts; none = no answer in the sources))
PROMPTS = [
    ("en-pass", "How long should my passwords be?", ["15"]),
    ("en-leave", "How many weeks of fully paid leave do new parents get?", ["16"]),
    ("en-buyback", "Can I keep my old work laptop when I get a new one, and what would I pay?", ["fair market", "50/50", "50%"]),
    ("en-access", "How do I request access to an application I didn't get at onboarding?", ["#ask-it-tech-ops", "system owner", "Jira"]),
    ("en-none", "What is the Wi-Fi password of the guest network in the office?", []),
    ("zh-user", "TiDB 的用户名最长可以有多少个字符？", ["32"]),
    ("zh-stmt", "一个事务里最多能执行多少条语句？", ["5000", "stmt-count-limit"]),
    ("zh-none", "TiDB 企业版每年的授权费用是多少？", []),
]
DECLINES = re.compile(
    r"could ?n[o']t find|cannot find|can't find|not (?:mentioned|provided|specified|included|available|stated)|"
    r"no (?:information|mention)|do(?:es)? not (?:contain|mention|say|specify|include|provide)|"
    r"没有找到|未找到|找不到|没有提到|未提及|没有提及|没有相关|未提供|没有提供|无法(?:回答|找到|确定)|没有说明|未说明",
    re.I,
)


def loops(text: str) -> bool:
    """True when a span of 6 words (English) or 12 characters (no spaces) occurs three times or more."""
    words = text.split()
    spans = [" ".join(words[i : i + 6]) for i in range(len(words) - 5)]
    flat = re.sub(r"\s+", "", text)
    spans += [flat[i : i + 12] for i in range(0, max(len(flat) - 11, 0))]
    counts: dict[str, int] = {}
    for span in spans:
        counts[span] = counts.get(span, 0) + 1
    return any(n >= 3 for n in counts.values())


def score(prompt_id: str, question: str, facts: list[str], answer: str, abstained: bool, system_prompt: str) -> dict:
    zh = prompt_id.startswith("zh")
    from assistant.core.language import cjk_share  # after the OpenMP policy is set (see the top)

    share = cjk_share(answer)
    declined = abstained or bool(DECLINES.search(answer))
    return {
        "fact": bool(facts) and any(f.lower() in answer.lower() for f in facts),
        "language": share > 0.5 if zh else share < 0.05,
        "loop": loops(answer),
        "echo": any(system_prompt[i : i + 40] in answer for i in range(0, len(system_prompt) - 40, 20)),
        "marker": bool(re.search(r"\[\d+\]", answer)),
        "declined": declined,
        # right: the key fact for an answerable prompt, a decline for the others
        "right": (not facts and declined) or (bool(facts) and any(f.lower() in answer.lower() for f in facts)),
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def build_index(root: Path):
    """Copy the answer files into `root/docs` and ingest them into `root/var`; returns the data dir."""
    import shutil

    from assistant.core.resources import Resources
    from assistant.core.settings import Settings
    from ingest.pipeline import Ingestor

    for base, rels, sub in ((HANDBOOK, HANDBOOK_FILES, "handbook"), (DOCS_ZH, ZH_FILES, "zh")):
        for rel in rels:
            target = root / "docs" / sub / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / rel, target)
    res = Resources.open(Settings(_env_file=None, data_dir=root / "var", answer_cache_entries=0))
    Ingestor(res).sync(root / "docs")
    res.close()
    return root / "var"


def run_raw(llama, messages: list, *, max_tokens: int, temperature: float, sampling, cold: bool) -> dict:
    """One raw llama.cpp chat completion; returns ttft_s, tokens (after the first) and gen_s."""
    if cold:
        llama.reset()
        llama._ctx.kv_cache_clear()
    start = time.perf_counter()
    first = None
    pieces = []
    for chunk in llama.create_chat_completion(
        messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True,
        repeat_penalty=sampling.repeat_penalty, top_p=sampling.top_p, top_k=sampling.top_k,
    ):
        delta = chunk["choices"][0].get("delta", {}).get("content")
        if delta:
            pieces.append(delta)
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    text = "".join(pieces)
    tokens = len(llama.tokenize(text.encode(), add_bos=False, special=True)) if text else 0
    return {"ttft_s": (first or end) - start, "tokens": max(tokens - 1, 0), "gen_s": end - (first or end), "text": text}


def bench_model(name: str, data_dir: Path, args) -> dict:
    """The product pass, then the raw warm and raw cold passes, for built-in model `name`."""
    import asyncio

    from assistant.answering.events import Done, Token
    from assistant.answering.prompt import SYSTEM_PROMPT
    from assistant.composition import Assistant
    from assistant.core.principals import ANONYMOUS
    from assistant.core.resources import Resources
    from assistant.core.settings import Settings

    settings = Settings(
        _env_file=None, data_dir=data_dir, llm_model=name, llm_threads=args.threads, answer_cache_entries=0,
        llm_max_tokens=args.max_tokens,
        **({"llm_cpu_window_tokens": args.window} if args.window is not None else {}),
    )
    res = Resources.open(settings)
    assistant = Assistant.build(res)
    load_start = time.perf_counter()
    llm = res.llm
    load_s = time.perf_counter() - load_start

    async def product(question: str) -> dict:
        start = time.perf_counter()
        first = None
        async for event in assistant.answerer.stream(question, principal=ANONYMOUS):
            if isinstance(event, Token) and first is None:
                first = time.perf_counter()
            if isinstance(event, Done):
                done = event
        end = time.perf_counter()
        return {
            "ttft_s": (first or end) - start, "gen_s": end - (first or end), "text": done.answer,
            "tokens": max(done.usage.completion_tokens - 1, 0), "prompt_tokens": done.usage.prompt_tokens,
            "abstained": done.abstained,
        }

    rows = []
    for prompt_id, question, facts in PROMPTS:
        run = asyncio.run(product(question))
        run.update(id=prompt_id, question=question, **score(prompt_id, question, facts, run["text"], run["abstained"], SYSTEM_PROMPT))
        rows.append(run)
        print(f"  {name} {prompt_id}: ttft {run['ttft_s']:.1f} s, prompt {run['prompt_tokens']} tok, "
              f"right={run['right']} :: {run['text'][:100]!r}", file=sys.stderr, flush=True)

    raw_warm, raw_cold = [], []
    prepared = [assistant.answerer.prepare(q, principal=ANONYMOUS)[1] for _, q, facts in PROMPTS[: args.raw_prompts]]
    prepared = [m for m in prepared if m]
    llama = llm._llama
    for messages in prepared:
        raw_warm.append(run_raw(llama, messages, max_tokens=args.raw_tokens, temperature=settings.llm.temperature,
                                sampling=llm.sampling, cold=False))
    for messages in prepared:
        raw_cold.append(run_raw(llama, messages, max_tokens=args.raw_tokens, temperature=settings.llm.temperature,
                                sampling=llm.sampling, cold=True))
    asyncio.run(llm.aclose()) if hasattr(llm, "aclose") else None
    res.close()
    return {"model": name, "load_s": load_s, "product": rows, "raw_warm": raw_warm, "raw_cold": raw_cold}


def tokens_per_s(runs: list[dict]) -> float:
    rates = [r["tokens"] / r["gen_s"] for r in runs if r["gen_s"] > 0 and r["tokens"] > 0]
    return statistics.median(rates) if rates else float("nan")


def omp_child(args) -> dict:
    """Raw llama.cpp speed of one model on three packed prompts, under this process's OpenMP policy."""
    from llama_cpp import Llama

    from assistant.core.llm.model_files import builtin_gguf_path, gguf_dir

    prompts = json.loads(Path(args.omp_prompts).read_text())
    path = builtin_gguf_path(args.omp_model, gguf_dir(Path(args.omp_data) / "models"))  # the repository's var/
    llama = Llama(model_path=str(path), n_ctx=4096, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    from assistant.core.llm.llama_cpp import DEFAULT_SAMPLING

    runs = [run_raw(llama, m, max_tokens=args.raw_tokens, temperature=0.1, sampling=DEFAULT_SAMPLING, cold=True) for m in prompts]
    # (the policy is the parent's label: os.environ here says PASSIVE once llama_cpp.py is imported, but
    # with --omp-child-default libgomp had read the unset variable before)
    return {"ttft_p50": pct([r["ttft_s"] for r in runs], 50), "tok_s": tokens_per_s(runs)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="qwen2.5-1.5b,qwen2.5-0.5b,smollm2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--window", type=int, default=None, help="ASSISTANT_LLM_CPU_WINDOW_TOKENS (default: the setting's)")
    parser.add_argument("--max-tokens", type=int, default=320, help="ASSISTANT_LLM_MAX_TOKENS of the product runs")
    parser.add_argument("--raw-prompts", type=int, default=4, help="prompts timed through raw llama.cpp")
    parser.add_argument("--raw-tokens", type=int, default=48, help="answer tokens in the raw runs")
    parser.add_argument("--omp", action="store_true", help="also compare OpenMP wait policies (child processes)")
    parser.add_argument("--omp-only", action="store_true", help="only the OpenMP comparison (no index, raw llama.cpp)")
    parser.add_argument("--omp-child-default", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--omp-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--omp-model", help=argparse.SUPPRESS)
    parser.add_argument("--omp-prompts", help=argparse.SUPPRESS)
    parser.add_argument("--omp-data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.omp_child or args.omp_child_default:
        print(json.dumps(omp_child(args)))
        return

    OUT.mkdir(parents=True, exist_ok=True)
    if args.omp_only:
        with tempfile.TemporaryDirectory() as tmp:
            report([], omp_compare(args, Path(tmp)), args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = build_index(Path(tmp))
        print_header(args)
        results = []
        for name in args.models.split(","):
            results.append(bench_model(name, data_dir, args))
            print_row(results[-1])
        omp_rows = omp_compare(args, Path(tmp)) if args.omp else []
    with (OUT / "llm_answers.jsonl").open("w", encoding="utf-8") as f:
        for result in results:
            for row in result["product"]:
                f.write(json.dumps({"model": result["model"], **row}, ensure_ascii=False) + "\n")
    report(results, omp_rows, args)


def passage_messages() -> list:
    """Three prompts in the product's format, each one answer file's opening (~1,500 characters) as
    source [1] and its question (for the OpenMP comparison, which needs no index)."""
    from assistant.answering.prompt import SYSTEM_PROMPT

    cases = [(HANDBOOK / HANDBOOK_FILES[0], PROMPTS[0][1]), (HANDBOOK / HANDBOOK_FILES[1], PROMPTS[1][1]),
             (DOCS_ZH / ZH_FILES[0], PROMPTS[5][1])]
    return [
        [{"role": "system", "content": SYSTEM_PROMPT},
         {"role": "user", "content": f"Sources:\n\n[1] {path.name}\n{path.read_text(encoding='utf-8')[:1500]}\n\nQuestion: {q}"}]
        for path, q in cases
    ]


def omp_compare(args, workdir: Path) -> list[dict]:
    """Run `omp_child` for each model with OpenMP's default wait policy and with PASSIVE."""
    prompts_file = workdir / "prompts.json"
    prompts_file.write_text(json.dumps(passage_messages()))
    rows = []
    for name in args.models.split(","):
        for policy in ("default", "PASSIVE"):
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
            flag = "--omp-child-default"
            if policy == "PASSIVE":
                env["OMP_WAIT_POLICY"] = "PASSIVE"
                flag = "--omp-child"
            out = subprocess.run(
                [sys.executable, __file__, flag, "--omp-model", name, "--omp-prompts", str(prompts_file),
                 "--omp-data", str(REPO / "var"), "--threads", str(args.threads), "--raw-tokens", str(args.raw_tokens)],
                env=env, capture_output=True, text=True, check=True,
            )
            rows.append({"model": name, "policy": policy, **json.loads(out.stdout.strip().splitlines()[-1])})
            print(f"  OpenMP {policy}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def print_header(args) -> None:
    print(f"\n### Chat models on {args.threads} threads (8 grounded prompts, product path unless said)\n")
    print("| model | right | key fact (6) | declined (2) | language (8) | loops | echoes | [n] markers | prompt tokens p50 | "
          "TTFT p50 / p95 s | tokens/s | raw warm TTFT p50 | raw cold TTFT p50 | raw tokens/s | load s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)


def print_row(r: dict) -> None:
    rows = r["product"]
    answerable = [x for x in rows if not x["id"].endswith("none")]
    none = [x for x in rows if x["id"].endswith("none")]
    ttft = [x["ttft_s"] for x in rows if not x["abstained"]]
    print(
        f"| {r['model']} | {sum(x['right'] for x in rows)}/8 | {sum(x['fact'] for x in answerable)}/{len(answerable)} "
        f"| {sum(x['declined'] for x in none)}/{len(none)} | {sum(x['language'] for x in rows)}/8 | {sum(x['loop'] for x in rows)} "
        f"| {sum(x['echo'] for x in rows)} | {sum(x['marker'] for x in rows)} "
        f"| {pct([x['prompt_tokens'] for x in rows if x['prompt_tokens']], 50):.0f} "
        f"| {pct(ttft, 50):.1f} / {pct(ttft, 95):.1f} | {tokens_per_s(rows):.1f} "
        f"| {pct([x['ttft_s'] for x in r['raw_warm']], 50):.1f} | {pct([x['ttft_s'] for x in r['raw_cold']], 50):.1f} "
        f"| {tokens_per_s(r['raw_warm'] + r['raw_cold']):.1f} | {r['load_s']:.1f} |", flush=True,
    )


def report(results: list[dict], omp_rows: list[dict], args) -> None:
    base = next((r for r in results if r["model"] == "smollm2"), None)
    if base:
        print("\nRatios to SmolLM2-135M in the same run (TTFT p50, tokens/s): " + "; ".join(
            f"{r['model']} {pct([x['ttft_s'] for x in r['product']], 50) / pct([x['ttft_s'] for x in base['product']], 50):.1f}x, "
            f"{tokens_per_s(r['product']) / tokens_per_s(base['product']):.2f}x" for r in results if r is not base))
    if omp_rows:
        print("\n| model | OMP_WAIT_POLICY | raw cold TTFT p50 s | tokens/s |\n|---|---|---|---|")
        for row in omp_rows:
            print(f"| {row['model']} | {row['policy']} | {row['ttft_p50']:.1f} | {row['tok_s']:.1f} |")


if __name__ == "__main__":
    main()
