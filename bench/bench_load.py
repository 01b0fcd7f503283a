"""Issue 6 figures: concurrent streaming chats through the real API against a stand-in for vLLM.

The app runs under uvicorn (its own process, `ASSISTANT_LLM_BACKEND=openai`) over a small ingested
handbook folder (real embedder, Qdrant Edge, SQLite), in front of `bench/standin_llm.py` (fixed time
to first token and token rate). N virtual users start spread over `--ramp-s` seconds and chat back to
back until `--duration-s`; each chat is authenticated by one of `--keys` API keys (principals with
different groups), so retrieval, ACL filtering, audit rows and admission all run as in production.
The answer cache is off: every chat retrieves and generates.

The stand-in answers with its prompt's own source sentences (supported, so grounding accepts them as a
good model's answers, and no two alike), whole sentences up to the answer length it is told.

First the cost of a chat: the same `--cost-chats` chats (same keys, same questions, same order) run twice
in the same app process at `--cost-streams` concurrent streams, once with `--short-tokens` answers and
once with `--tokens` answers; the app process's CPU seconds (user + system) against the tokens relayed
to the client give the app's CPU per relayed token (the slope between the two runs) and per chat (the
intercept: the short run's CPU less its tokens' share, per chat), and from them chats per second of one
app core at `--tokens` answers.

Then per level: the time to first token the service adds (client TTFT minus the stand-in's configured
TTFT; p50/p95/p99), errors, chats, mean and peak CPU of the app process (percent of one core), its peak
RSS, and the stand-in's own first-token lateness (its share of "added").

With `--profile PREFIX` the app runs under `bench/profiled_app.py`: cProfile of its event loop (and,
in a second table, of the work its other threads do meanwhile) during each cost run, and a table of
where a chat's time goes (ms per chat in each run, µs per relayed
token from their difference) per function. The profiler slows the app about threefold: the CPU
figures of a profiled run are not the app's; compare shares, and take the costs from a run without it.

Usage: .venv/bin/python bench/bench_load.py [--streams 50,200,500] [--duration-s 90] [--ramp-s 60] [--chunk-tokens 1]
           [--cost-chats 200] [--cost-streams 20] [--short-tokens 30] [--sse-coalesce-ms 25] [--profile /tmp/prof]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from assistant.auth.api_keys import create_api_key  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from ingest.pipeline import Ingestor  # noqa: E402

HANDBOOK = REPO.parent / "shared" / "corpus" / "handbook-en" / "sourcegraph-handbook" / "content"
FOLDER = "departments/tech-ops"
QUESTIONS = [
    "What do I have to set up on my laptop before I access company data?",
    "How long should my passwords be?",
    "How do I request access to an application?",
    "What is the screen lock timeout?",
    "What should I do if my laptop is stolen?",
    "Which password manager do we use?",
    "How do I report a security incident?",
    "Who owns the tech ops process?",
]
GROUPS = [(), ("it",), ("security",), ("it", "security")]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(data_dir: Path, n_keys: int) -> list[str]:
    """Ingest the folder under `data_dir` and create `n_keys` API keys; returns the keys."""
    settings = Settings(_env_file=None, data_dir=data_dir)
    res = Resources.open(settings)
    try:
        outcomes = Ingestor(res).sync(HANDBOOK / FOLDER)
        print(f"ingested {sum(o.status == 'done' for o in outcomes)} files of {FOLDER}", flush=True)
        return [create_api_key(res.db, f"bench-{i}", groups=list(GROUPS[i % len(GROUPS)])).key for i in range(n_keys)]
    finally:
        res.close()


def wait_http(port: int, path: str, timeout_s: float = 120.0) -> None:
    """Wait until `GET path` answers on `port`."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}{path}", timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing answered on port {port} within {timeout_s} s")


@dataclass
class Level:
    """Results of one concurrency level."""

    streams: int
    ttft_s: list[float] = field(default_factory=list)
    tokens: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    chats: int = 0
    cpu: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)

    def error(self, kind: str) -> None:
        """Count one error of `kind`."""
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def one_chat(port: int, key: str, question: str, level: Level, ttft_cfg_s: float) -> None:
    """One streaming chat over a raw HTTP/1.1 connection (a cheap client: the app gets the CPU)."""
    body = json.dumps({"question": question}).encode()
    request = (
        f"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    start = time.monotonic()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    except OSError:
        level.error("connect")
        return
    try:
        writer.write(request)
        await writer.drain()
        buffer = b""
        first = None
        tail = b""  # shorter than the marker, so that a marker split across reads counts once
        while True:
            data = await asyncio.wait_for(reader.read(65536), timeout=120)
            if not data:
                break
            level.tokens += (tail + data).count(b"event: token")
            tail = (tail + data)[-11:]
            buffer = buffer[-64:] + data if first is not None else buffer + data
            if first is None:
                if not buffer.startswith(b"HTTP/1.1 200"):
                    level.error(f"http {buffer[9:12].decode(errors='replace')}")
                    return
                if b"event: token" in buffer:
                    first = time.monotonic()
            if b"event: error" in buffer:
                level.error("stream error")
                return
            if b"event: done" in buffer:
                break
        if first is None:
            level.error("no token")
            return
        level.ttft_s.append(first - start - ttft_cfg_s)
        level.chats += 1
    except (TimeoutError, OSError) as exc:
        level.error(type(exc).__name__)
    finally:
        writer.close()


async def run_level(port: int, keys: list[str], level: Level, args, app_pid: int) -> None:
    """N users, started evenly over the ramp, chatting back to back until the duration ends."""
    app = psutil.Process(app_pid)
    app.cpu_percent(None)
    end = time.monotonic() + args.duration_s
    rng = random.Random(level.streams)

    async def user(i: int) -> None:
        await asyncio.sleep(i * args.ramp_s / level.streams)
        while time.monotonic() < end:
            await one_chat(port, keys[i % len(keys)], rng.choice(QUESTIONS), level, args.ttft_ms / 1000)

    async def sample() -> None:
        while time.monotonic() < end:
            await asyncio.sleep(1.0)
            level.cpu.append(app.cpu_percent(None))
            level.rss.append(app.memory_info().rss)

    await asyncio.gather(sample(), *(user(i) for i in range(level.streams)))


@dataclass
class Cost:
    """One run of the fixed chat list: answer length asked, CPU seconds of the app, what the client got."""

    answer_tokens: int
    cpu_s: float
    level: Level
    rss_peak: int
    relayed: int  # tokens the stand-in streamed to the app


async def run_chats(port: int, chats: list[tuple[str, str]], streams: int, level: Level, ttft_cfg_s: float) -> None:
    """`chats` (key, question) in order, `streams` at a time."""
    queue = list(reversed(chats))

    async def worker() -> None:
        while queue:
            key, question = queue.pop()
            await one_chat(port, key, question, level, ttft_cfg_s)

    await asyncio.gather(*(worker() for _ in range(streams)))


def measure_cost(app_port: int, llm_port: int, keys: list[str], args, app_pid: int) -> list[Cost]:
    """The same chats with short then long answers; the app's CPU seconds and peak RSS of each run."""
    import httpx

    rng = random.Random(38)
    chats = [(keys[rng.randrange(len(keys))], rng.choice(QUESTIONS)) for _ in range(args.cost_chats)]
    app = psutil.Process(app_pid)
    out = []
    for tokens in (args.short_tokens, args.tokens):
        def control() -> int:
            reply = httpx.post(f"http://127.0.0.1:{llm_port}/v1/control", json={"tokens": tokens}, timeout=5)
            return reply.raise_for_status().json()["streamed_tokens"]

        streamed = control()
        level = Level(args.cost_streams)
        rss = [app.memory_info().rss]

        async def run() -> None:
            async def sample() -> None:
                while not done.is_set():
                    await asyncio.sleep(0.5)
                    rss.append(app.memory_info().rss)

            done = asyncio.Event()
            sampler = asyncio.create_task(sample())
            await run_chats(app_port, chats, args.cost_streams, level, args.ttft_ms / 1000)
            done.set()
            await sampler

        if args.profile:
            app.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
        before = app.cpu_times()
        asyncio.run(run())
        after = app.cpu_times()
        if args.profile:
            app.send_signal(signal.SIGUSR2)
            written = Path(f"{args.profile}.{len(out)}.prof")
            while not written.exists():
                time.sleep(0.2)
        cpu_s = (after.user - before.user) + (after.system - before.system)
        out.append(Cost(tokens, cpu_s, level, max(rss), control() - streamed))
        print(f"cost run, {tokens}-token answers: {level.chats} chats, {out[-1].relayed} tokens relayed "
              f"({level.tokens} token events), "
              f"{sum(level.errors.values())} errors, app CPU {cpu_s:.2f} s", flush=True)
    return out


def report_cost(costs: list[Cost]) -> None:
    """Print the per-chat and per-token costs and the two runs they come from."""
    short, long = costs
    d_tokens = long.relayed - short.relayed
    per_token_s = (long.cpu_s - short.cpu_s) / d_tokens if d_tokens > 0 else float("nan")
    chats = short.level.chats or 1
    per_chat_s = (short.cpu_s - per_token_s * short.relayed) / chats
    long_chat_s = long.cpu_s / (long.level.chats or 1)
    print("| answer tokens asked | chats | errors | tokens relayed (token events) | app CPU (s) | app CPU per chat (ms) | "
          "added TTFT p50 / p95 (ms) | app RSS peak (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    for c in costs:
        print(f"| {c.answer_tokens} | {c.level.chats} | {sum(c.level.errors.values())} | {c.relayed} ({c.level.tokens}) | "
              f"{c.cpu_s:.2f} | {1000 * c.cpu_s / (c.level.chats or 1):.1f} | {pct(c.level.ttft_s, 50):.0f} / "
              f"{pct(c.level.ttft_s, 95):.0f} | {c.rss_peak / 2**20:.0f} |")
    print(f"\napp CPU per chat (fixed, LLM excluded): {1000 * per_chat_s:.1f} ms; per relayed token: "
          f"{1e6 * per_token_s:.1f} µs; one app core: {1 / long_chat_s:.1f} chats/s at "
          f"{long.relayed / (long.level.chats or 1):.0f}-token answers\n")


def report_profile(prefix: str, costs: list[Cost], top: int = 30, *, where: str = "") -> None:
    """Per function (cumulative time on the event loop; `where=".all"`: with the other threads' work,
    `bench/profiled_app.py`): ms per chat in the short and the long run, and µs per relayed token from
    their difference; the `top` functions by their long-run time."""
    import pstats

    short, long = costs
    runs = [pstats.Stats(f"{prefix}.{i}{where}.prof").stats for i in range(2)]  # type: ignore[attr-defined]
    d_tokens = long.relayed - short.relayed
    rows = []
    for key, (_, _, tt, ct, _) in runs[1].items():
        file, line, func = key
        before = runs[0].get(key, (0, 0, 0.0, 0.0, None))
        name = f"{Path(file).parent.name}/{Path(file).name}:{line} {func}" if line else func
        rows.append((ct, name, before[3], tt, before[2]))
    rows.sort(reverse=True)
    print(f"| function (cProfile, {'all threads' if where else 'event loop'}) | cum ms/chat, {short.answer_tokens} tok | cum ms/chat, "
          f"{long.answer_tokens} tok | cum µs/token | own µs/token |")
    print("|---|---|---|---|---|")
    for ct, name, ct0, tt, tt0 in rows[:top]:
        print(f"| {name} | {1000 * ct0 / (short.level.chats or 1):.2f} | {1000 * ct / (long.level.chats or 1):.2f} | "
              f"{1e6 * (ct - ct0) / d_tokens:.1f} | {1e6 * (tt - tt0) / d_tokens:.1f} |")
    print()
    print("| own time (cProfile) | own ms/chat, long run | own µs/token |")
    print("|---|---|---|")
    rows.sort(key=lambda r: r[3], reverse=True)
    for _, name, _, tt, tt0 in rows[:top]:
        print(f"| {name} | {1000 * tt / (long.level.chats or 1):.2f} | {1e6 * (tt - tt0) / d_tokens:.1f} |")
    print()


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) in milliseconds."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    """Run every level and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="50,200,500")
    parser.add_argument("--duration-s", type=float, default=90.0)
    parser.add_argument("--ramp-s", type=float, default=60.0)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--rate", type=float, default=30.0)
    parser.add_argument("--cost-chats", type=int, default=200, help="chats in each of the two cost runs (0: none)")
    parser.add_argument("--cost-streams", type=int, default=20, help="concurrent streams in the cost runs")
    parser.add_argument("--short-tokens", type=int, default=30, help="answer length of the short cost run")
    parser.add_argument("--chunk-tokens", type=int, default=1,
                        help="tokens per upstream chunk after the first, as `vllm serve --stream-interval N` sends them")
    parser.add_argument("--sse-coalesce-ms", type=float, default=None,
                        help="the app's ASSISTANT_SSE_COALESCE_MS (default: its own, 25 ms)")
    parser.add_argument("--profile", default="", help="profile the app's event loop in the cost runs: stats to PREFIX.{0,1}.prof")
    args = parser.parse_args()
    levels = [int(s) for s in args.streams.split(",") if s]

    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    keys = prepare(tmp / "var", args.keys)
    llm_port, app_port = free_port(), free_port()
    standin = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "standin_llm.py"), "--port", str(llm_port), "--ttft-ms",
         str(args.ttft_ms), "--tokens", str(args.tokens), "--rate", str(args.rate), "--chunk-tokens", str(args.chunk_tokens)],
        stdout=subprocess.PIPE, text=True,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update({
        "ASSISTANT_DATA_DIR": str(tmp / "var"), "ASSISTANT_LLM_BACKEND": "openai",
        "ASSISTANT_OPENAI_BASE_URL": f"http://127.0.0.1:{llm_port}/v1", "ASSISTANT_LLM_MAX_TOKENS": str(args.tokens),
        "ASSISTANT_LLM_MAX_CONCURRENCY": str(max([*levels, args.cost_streams]) + 12), "ASSISTANT_LLM_QUEUE_MAX": "256",
        "ASSISTANT_LLM_QUEUE_MAX_PER_PRINCIPAL": str(max([*levels, args.cost_streams])), "ASSISTANT_ANSWER_CACHE_ENTRIES": "0",
        "ASSISTANT_QUERY_REWRITE": "rules", "ASSISTANT_EMBEDDING_THREADS": "1",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    })
    if args.sse_coalesce_ms is not None:
        env["ASSISTANT_SSE_COALESCE_MS"] = str(args.sse_coalesce_ms)
    launcher = [str(REPO / "bench" / "profiled_app.py"), args.profile] if args.profile else ["-m", "uvicorn"]
    app = subprocess.Popen(
        [sys.executable, *launcher, "--factory", "assistant.api.app:create_app", "--port", str(app_port),
         "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--backlog", "4096"],
        cwd=REPO, env=env,
    )
    results: list[Level] = []
    costs: list[Cost] = []
    try:
        wait_http(llm_port, "/v1/models")
        wait_http(app_port, "/healthz", timeout_s=600)  # a loaded machine starts the app slowly
        # Warm up: load the embedder and open the LLM client before measuring.
        asyncio.run(run_level(app_port, keys, Level(2), argparse.Namespace(**{**vars(args), "duration_s": 15, "ramp_s": 1}), app.pid))
        if args.cost_chats:
            costs = measure_cost(app_port, llm_port, keys, args, app.pid)
        for n in levels:
            level = Level(n)
            print(f"level {n} streams: {args.duration_s:.0f} s, ramp {args.ramp_s:.0f} s ...", flush=True)
            asyncio.run(run_level(app_port, keys, level, args, app.pid))
            results.append(level)
            time.sleep(5)
    finally:
        app.send_signal(signal.SIGTERM)
        standin.send_signal(signal.SIGTERM)
        app.wait(30)
        out, _ = standin.communicate(timeout=30)
    standin_stats = json.loads(out.strip().splitlines()[-1])
    print(f"\nstand-in: ttft {args.ttft_ms:.0f} ms, {args.tokens} tokens at {args.rate:.0f} tokens/s, "
          f"{args.chunk_tokens} per chunk; "
          f"{standin_stats}; {os.cpu_count()} cores\n")
    if costs:
        report_cost(costs)
        if args.profile:
            report_profile(args.profile, costs)
            report_profile(args.profile, costs, where=".all")
    print("| streams | chats | errors | added TTFT p50 / p95 / p99 (ms) | app CPU mean / peak (% of a core) | app RSS peak (MiB) |")
    print("|---|---|---|---|---|---|")
    for lv in results:
        errors = sum(lv.errors.values())
        detail = f" ({', '.join(f'{k}: {v}' for k, v in lv.errors.items())})" if errors else ""
        cpu = sum(lv.cpu) / len(lv.cpu) if lv.cpu else float("nan")
        print(
            f"| {lv.streams} | {lv.chats} | {errors}{detail} | {pct(lv.ttft_s, 50):.0f} / {pct(lv.ttft_s, 95):.0f} / "
            f"{pct(lv.ttft_s, 99):.0f} | {cpu:.0f} / {max(lv.cpu, default=0):.0f} | {max(lv.rss, default=0) / 2**20:.0f} |"
        )


if __name__ == "__main__":
    main()
