#!/usr/bin/env python3
"""Benchmark the deployed vLLM server with RAG-shaped load (`vllm bench serve`); write the figures.

Run it on the GPU server, where `vllm` is installed (or inside the vllm container of compose.yaml,
which mounts this folder at /etc/assistant/vllm):

    python3 deploy/vllm/bench_serve.py --profile h100 --out bench-h100
    python3 deploy/vllm/bench_serve.py --profile h100 --dry-run      # print the commands only

RAG-shaped means: every request starts with the same prefix (the system prompt and answering rules,
1,024 tokens: a prefix-cache hit after the first request), then about 3,072 tokens of retrieved
passages that differ per request, and asks for a 256-token answer. `rag-cN` runs this at growing
concurrency up to the profile's max-num-seqs; `no-prefix` repeats the top level with no shared prefix,
to show what prefix caching buys. Each run's JSON (vLLM's own) goes to OUT/, a summary to OUT/summary.md,
including the server's KV-cache size read from /metrics, to compare with README.md's arithmetic.
Only the standard library and PyYAML (a vLLM dependency) are needed.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
PREFIX_TOKENS = 1024  # shared system prompt + rules
CONTEXT_TOKENS = 3072  # retrieved passages + question, different in every request
ANSWER_TOKENS = 256
PERCENTILES = "50,90,99"


@dataclass
class Scenario:
    """One `vllm bench serve` run: a name (its result file) and the flags that differ."""

    name: str
    concurrency: int
    prefix_tokens: int
    input_tokens: int
    num_prompts: int


def scenarios(max_num_seqs: int, prompts_per_slot: int) -> list[Scenario]:
    """The RAG sweep (1, 4, 16, ... up to max_num_seqs concurrent requests) and the no-prefix baseline.

    Args:
        max_num_seqs: the profile's `max-num-seqs` (the server never runs more at once).
        prompts_per_slot: requests per concurrent slot, so each level runs long enough to be steady.

    Returns:
        Scenarios in the order they should run.
    """
    levels = sorted({c for c in (1, 4, 16, max_num_seqs // 2, max_num_seqs) if 1 <= c <= max_num_seqs})
    runs = [
        Scenario(f"rag-c{c}", c, PREFIX_TOKENS, CONTEXT_TOKENS, max(16, c * prompts_per_slot))
        for c in levels
    ]
    top = levels[-1]
    runs.append(
        Scenario(
            f"no-prefix-c{top}", top, 0, PREFIX_TOKENS + CONTEXT_TOKENS, max(16, top * prompts_per_slot)
        )
    )
    return runs


def bench_command(
    scenario: Scenario, *, profile: dict, base_url: str, out: Path, lora: list[str]
) -> list[str]:
    """The `vllm bench serve` argv for one scenario.

    Args:
        scenario: what to run.
        profile: the vLLM profile (its `model` is the tokenizer, `served-model-name` the API name).
        base_url: the server's root URL (no `/v1`).
        out: folder for the result JSON.
        lora: adapter names to spread requests over (empty: the base model).

    Returns:
        argv, starting with `vllm`.
    """
    argv = [
        "vllm", "bench", "serve",
        "--backend", "openai-chat",
        "--base-url", base_url,
        "--endpoint", "/v1/chat/completions",
        "--model", str(profile["model"]),
        "--served-model-name", str(profile.get("served-model-name", profile["model"])),
        "--dataset-name", "random",
        "--random-prefix-len", str(scenario.prefix_tokens),
        "--random-input-len", str(scenario.input_tokens),
        "--random-output-len", str(ANSWER_TOKENS),
        "--random-range-ratio", "0.25",  # contexts of 0.75x to 1.25x the length, as retrieval gives
        "--ignore-eos",  # every answer as long as asked: comparable runs
        "--num-prompts", str(scenario.num_prompts),
        "--max-concurrency", str(scenario.concurrency),
        "--request-rate", "inf",
        "--seed", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", PERCENTILES,
        "--save-result",
        "--result-dir", str(out),
        "--result-filename", f"{scenario.name}.json",
    ]
    if lora:
        argv += ["--lora-modules", *lora]
    return argv


def kv_cache_tokens(base_url: str) -> int | None:
    """The server's KV-cache capacity in tokens (num_gpu_blocks x block_size from /metrics), if shown."""
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response:
            text = response.read().decode("utf-8", "replace")
    except OSError:
        return None
    blocks = re.search(r'num_gpu_blocks="(\d+)"', text)
    size = re.search(r'block_size="(\d+)"', text)
    return int(blocks.group(1)) * int(size.group(1)) if blocks and size else None


def summary_row(name: str, result: dict) -> str:
    """One Markdown table row from a vLLM result JSON (throughputs per second, latencies in ms)."""

    def get(key: str) -> str:
        value = result.get(key)
        return f"{value:.1f}" if isinstance(value, (int, float)) else "n/a"

    return (
        f"| {name} | {result.get('max_concurrency', 'n/a')} | {result.get('completed', 'n/a')} "
        f"| {get('request_throughput')} | {get('output_throughput')} | {get('total_token_throughput')} "
        f"| {get('p50_ttft_ms')} | {get('p99_ttft_ms')} | {get('p50_tpot_ms')} | {get('p99_tpot_ms')} "
        f"| {get('p99_itl_ms')} | {get('p50_e2el_ms')} |"
    )


def write_summary(out: Path, names: list[str], *, profile_name: str, kv_tokens: int | None) -> Path:
    """OUT/summary.md: one row per finished scenario, plus the KV-cache capacity."""
    lines = [
        f"# vllm bench serve, profile {profile_name}",
        "",
        f"KV cache: {kv_tokens if kv_tokens is not None else 'n/a'} tokens"
        + (f" = {kv_tokens / 8192:.1f} sequences of 8,192 tokens" if kv_tokens else ""),
        f"Requests: {PREFIX_TOKENS} shared prefix tokens + ~{CONTEXT_TOKENS} context tokens, "
        f"{ANSWER_TOKENS} answer tokens",
        "",
        "| run | concurrency | completed | req/s | output tok/s | total tok/s | TTFT p50 ms | TTFT p99 ms "
        "| TPOT p50 ms | TPOT p99 ms | ITL p99 ms | E2E p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        path = out / f"{name}.json"
        if path.exists():
            lines.append(summary_row(name, json.loads(path.read_text())))
    target = out / "summary.md"
    target.write_text("\n".join(lines) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run (or print) every scenario, write the summary.

    Returns:
        The process exit status: 0, or the first failing run's status.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=["h100", "h200"], default="h100")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="vLLM root URL, no /v1")
    parser.add_argument("--out", type=Path, default=Path("bench-vllm"), help="folder for the figures")
    parser.add_argument("--prompts-per-slot", type=int, default=8, help="requests per concurrent slot")
    parser.add_argument("--lora", nargs="*", default=[], help="adapter names to spread requests over")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)

    profile = yaml.safe_load((HERE / f"{args.profile}.yaml").read_text())
    runs = scenarios(int(profile.get("max-num-seqs", 32)), args.prompts_per_slot)
    commands = [
        bench_command(s, profile=profile, base_url=args.base_url, out=args.out, lora=args.lora) for s in runs
    ]
    if args.dry_run:
        for command in commands:
            print(shlex.join(command))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    status = 0
    for scenario, command in zip(runs, commands):
        print(f"== {scenario.name}: {shlex.join(command)}", file=sys.stderr, flush=True)
        status = subprocess.run(command).returncode
        if status != 0:
            print(f"{scenario.name} failed with exit status {status}; later runs skipped", file=sys.stderr)
            break
    summary = write_summary(
        args.out, [s.name for s in runs], profile_name=args.profile, kv_tokens=kv_cache_tokens(args.base_url)
    )
    print(summary.read_text())
    return status


if __name__ == "__main__":
    sys.exit(main())
