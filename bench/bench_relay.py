"""Issue 38: the relay alone, `OpenAICompatLLM.stream` of two versions against `bench/standin_llm.py`.

Each round runs the same `--streams` concurrent answers of `--tokens` tokens (one token per upstream SSE
event unless `--chunk-tokens`, at `--rate` tokens/s per stream) through each version in turn, in one
process on uvloop; reported per version (median of `--rounds`): CPU seconds of this process per upstream
event (the client's side: HTTP, SSE parsing, the async generators), the deltas it yielded per 100
events, and the wall time of a round. `--consumer-us N` burns N µs of CPU per delta in each consumer, as
the answer pipeline and the SSE write downstream do (~200 µs a delta in the app): a loop that cannot keep
up then reads several events at a time, which the version that yields one delta per read turns into
fewer deltas.

Usage: .venv/bin/python bench/bench_relay.py --old PATH/TO/old/openai_compat.py [--streams 20] [--rate 300]
           [--tokens 300] [--rounds 6] [--consumer-us 0] [--chunk-tokens 1]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_load import free_port, wait_http  # noqa: E402
from bench.standin_llm import answer_tokens  # noqa: E402


def load_version(path: Path, name: str):
    """The module at `path` under the name `name` (its imports of `assistant.*` are this checkout's)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prompt(sentences: int = 80) -> list[dict]:
    """A user message with one numbered source of `sentences` sentences of eight words, so that the
    stand-in answers with as many tokens as asked."""
    text = " ".join(f"Sentence {i} of the handbook says something plain here." for i in range(sentences))
    return [{"role": "user", "content": f"Sources:\n[1] handbook.md\n{text}\n\nQuestion: what does it say?"}]


async def one_round(cls, base_url: str, streams: int, tokens: int, consumer_us: float) -> tuple[float, int, float]:
    """CPU seconds, deltas and wall seconds of `streams` concurrent answers through `cls`."""
    llm = cls(base_url, "assistant", read_timeout_s=120)
    messages = prompt()
    burn_s = consumer_us / 1e6
    deltas = 0

    async def consume() -> None:
        nonlocal deltas
        async for _ in llm.stream(messages, max_tokens=tokens, temperature=0.0):
            deltas += 1
            if burn_s:
                end = time.thread_time() + burn_s
                while time.thread_time() < end:
                    pass

    try:
        await consume()  # open a connection and warm up
        deltas = 0
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(consume() for _ in range(streams)))
        return time.process_time() - cpu, deltas, time.perf_counter() - wall
    finally:
        await llm.aclose()


def main() -> None:
    """Interleave the two versions for `--rounds` rounds and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, type=Path, help="the other version's openai_compat.py")
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--consumer-us", type=float, default=0.0)
    parser.add_argument("--chunk-tokens", type=int, default=1)
    args = parser.parse_args()
    import uvloop

    versions = {
        "old": load_version(args.old, "relay_old").OpenAICompatLLM,
        "new": load_version(REPO / "assistant/core/llm/openai_compat.py", "relay_new").OpenAICompatLLM,
    }
    port = free_port()
    standin = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "standin_llm.py"), "--port", str(port), "--ttft-ms", "0", "--tokens",
         str(args.tokens), "--rate", str(args.rate), "--chunk-tokens", str(args.chunk_tokens)],
        stdout=subprocess.DEVNULL,
    )
    results: dict[str, list[tuple[float, int, float]]] = {k: [] for k in versions}
    try:
        wait_http(port, "/v1/models")
        base_url = f"http://127.0.0.1:{port}/v1"
        for k in range(args.rounds):
            for name in (versions if k % 2 == 0 else reversed(list(versions))):
                results[name].append(uvloop.run(one_round(versions[name], base_url, args.streams, args.tokens, args.consumer_us)))
    finally:
        standin.terminate()
        standin.wait(30)
    n_tokens = len(answer_tokens(prompt(), args.tokens))  # the stand-in's answer: whole sentences, the same each time
    events = args.streams * (1 + -(-(n_tokens - 1) // args.chunk_tokens) + 3)  # content, finish, usage, [DONE]
    print(f"{args.streams} streams x {n_tokens} tokens at {args.rate:.0f} tokens/s, {args.chunk_tokens} per chunk, "
          f"{events} SSE events a round, consumer {args.consumer_us:.0f} µs/delta, {args.rounds} rounds\n")
    print("| version | CPU µs per upstream event (median; min-max) | deltas per 100 events | wall s a round |")
    print("|---|---|---|---|")
    for name, rows in results.items():
        per_event = [1e6 * (cpu - d * args.consumer_us / 1e6) / events for cpu, d, _ in rows]
        print(f"| {name} | {statistics.median(per_event):.1f} ({min(per_event):.1f}-{max(per_event):.1f}) | "
              f"{100 * statistics.median(d for _, d, _ in rows) / events:.0f} | {statistics.median(w for _, _, w in rows):.2f} |")


if __name__ == "__main__":
    main()
