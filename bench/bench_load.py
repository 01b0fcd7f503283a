"""Issue 6 figures: concurrent streaming chats through the real API against a stand-in for vLLM.

The app runs under uvicorn (its own process, `ASSISTANT_LLM_BACKEND=openai`) over a small ingested
handbook folder (real embedder, Qdrant Edge, SQLite), in front of `bench/standin_llm.py` (fixed time
to first token and token rate). N virtual users start spread over `--ramp-s` seconds and chat back to
back until `--duration-s`; each chat is authenticated by one of `--keys` API keys (principals with
different groups), so retrieval, ACL filtering, audit rows and admission all run as in production.
The answer cache is off: every chat retrieves and generates.

Reported per level: the time to first token the service adds (client TTFT minus the stand-in's
configured TTFT; p50/p95/p99), errors, chats, mean and peak CPU of the app process (percent of one
core), its peak RSS, and the stand-in's own first-token lateness (its share of "added").

Usage: .venv/bin/python bench/bench_load.py [--streams 50,200,500] [--duration-s 90] [--ramp-s 60] [--chunk-tokens 1]
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
        while True:
            data = await asyncio.wait_for(reader.read(65536), timeout=120)
            if not data:
                break
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
    parser.add_argument("--chunk-tokens", type=int, default=1,
                        help="tokens per upstream chunk after the first, as `vllm serve --stream-interval N` sends them")
    args = parser.parse_args()
    levels = [int(s) for s in args.streams.split(",")]

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
        "ASSISTANT_LLM_MAX_CONCURRENCY": str(max(levels) + 12), "ASSISTANT_LLM_QUEUE_MAX": "256",
        "ASSISTANT_LLM_QUEUE_MAX_PER_PRINCIPAL": str(max(levels)), "ASSISTANT_ANSWER_CACHE_ENTRIES": "0",
        "ASSISTANT_QUERY_REWRITE": "rules", "ASSISTANT_EMBEDDING_THREADS": "1",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    })
    app = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "assistant.api.app:create_app", "--port", str(app_port),
         "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--backlog", "4096"],
        cwd=REPO, env=env,
    )
    results: list[Level] = []
    try:
        wait_http(llm_port, "/v1/models")
        wait_http(app_port, "/healthz")
        # Warm up: load the embedder and open the LLM client before measuring.
        asyncio.run(run_level(app_port, keys, Level(2), argparse.Namespace(**{**vars(args), "duration_s": 15, "ramp_s": 1}), app.pid))
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
