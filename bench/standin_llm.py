"""A tiny OpenAI-compatible streaming server standing in for vLLM in load benchmarks: fixed time to first
token and token rate, no model, so that what a benchmark measures is the service in front of it.

    python bench/standin_llm.py --port 8011 --ttft-ms 200 --tokens 300 --rate 30 [--chunk-tokens 1]

Serves `GET /v1/models` and `POST /v1/chat/completions` (streamed or not) over plain asyncio streams,
HTTP/1.1 with keep-alive. The answer is made of the prompt's own sources: their sentences in turn, each
followed by its source's marker ("... [2]"), whole sentences up to `--tokens` (a token is a word with its
leading space, or a marker), so that answers differ, are supported and pass grounding as a good model's
do, and the answer length sets the relayed tokens. A prompt without sources gets a fixed sentence; the
evidence judge's prompts ("Pair 1 ... YES or NO") get YES for each pair. `POST /control {"tokens": N}`
changes the answer length of later requests (a benchmark's two runs that differ only in it) and answers
with the tokens streamed so far (`streamed_tokens`: those written to a client that was still reading).
Each streamed chunk is one token, as vLLM sends them by default; `--chunk-tokens K` sends K tokens per
chunk after the first, as `vllm serve --stream-interval K` does. On SIGTERM (or SIGINT) it prints one
JSON line of statistics: requests, and how late its own first tokens were against `--ttft-ms`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import time

FALLBACK = "The policy says so [1]."
_SOURCE_HEAD = re.compile(r"^\[(\d+)\] .*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PAIR = re.compile(r"^Pair (\d+)$", re.MULTILINE)
_TOKEN = re.compile(r"\s*\S+")


def source_sentences(prompt: str) -> list[tuple[int, str]]:
    """(source number, sentence) of the prompt's numbered sources (`[n] path` then the text, up to the
    question), prose sentences of at least five words, ending in . ! or ?, in the sources' order."""
    body = prompt.split("\n\nQuestion:", 1)[0]
    heads = list(_SOURCE_HEAD.finditer(body))
    out: list[tuple[int, str]] = []
    for head, nxt in zip(heads, [*heads[1:], None]):
        text = body[head.end() : nxt.start() if nxt else len(body)]
        for line in text.splitlines():
            line = line.strip().lstrip("-*+> ").strip()
            if not line or line[0] in "#|`[":
                continue
            for sentence in _SENTENCE_END.split(line):
                if len(sentence.split()) >= 5 and sentence[-1] in ".!?" and "[" not in sentence:
                    out.append((int(head.group(1)), sentence))
    return out


def answer_tokens(messages: list[dict], n: int) -> list[str]:
    """The answer to `messages` as tokens, at most `n` (whole sentences; at least one)."""
    prompt = str(messages[-1].get("content", "")) if messages else ""
    pairs = _PAIR.findall(prompt)
    if pairs and "YES or NO" in prompt:
        return [f"{i}: YES\n" for i in pairs]
    if "YES or NO" in prompt or "answers the question" in prompt.lower():
        return ["YES"]
    sentences = source_sentences(prompt)
    # Sources in turn (1, 2, 3, 1, 2, ...) so that a long answer cites several.
    by_source: dict[int, list[str]] = {}
    for k, sentence in sentences:
        by_source.setdefault(k, []).append(sentence)
    order: list[tuple[int, str]] = []
    queues = list(by_source.items())
    while any(q for _, q in queues):
        for k, q in queues:
            if q:
                order.append((k, q.pop(0)))
    tokens: list[str] = []
    for k, sentence in order or [(1, FALLBACK[:-5])]:
        words = _TOKEN.findall((" " if tokens else "") + sentence[:-1]) + [f" [{k}]", sentence[-1]]
        if tokens and len(tokens) + len(words) > n:
            break
        tokens += words
    return tokens


class Standin:
    """The server's state and request handling.

    Args:
        ttft_s: seconds from a request to its first token.
        tokens: tokens per answer (capped by the request's `max_tokens`).
        rate: tokens per second after the first.
        chunk_tokens: tokens per streamed chunk after the first token (vLLM's `--stream-interval`).
    """

    def __init__(self, *, ttft_s: float, tokens: int, rate: float, chunk_tokens: int = 1):
        self.ttft_s = ttft_s
        self.tokens = tokens
        self.interval_s = 1.0 / rate
        self.chunk_tokens = max(1, chunk_tokens)
        self.requests = 0
        self.streamed_tokens = 0
        self.active = 0
        self.peak_active = 0
        self.lateness_s: list[float] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one connection until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "GET" and path.endswith("/models"):
                    await self._json(writer, {"object": "list", "data": [{"id": "assistant", "object": "model"}]})
                elif method == "POST" and path.endswith("/control"):
                    self.tokens = int(json.loads(body or b"{}").get("tokens", self.tokens))
                    await self._json(writer, {"tokens": self.tokens, "streamed_tokens": self.streamed_tokens})
                elif method == "POST" and path.endswith("/chat/completions"):
                    await self._completion(writer, json.loads(body or b"{}"))
                else:
                    await self._json(writer, {"error": {"message": "not found", "type": "not_found_error"}}, 404)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _json(self, writer: asyncio.StreamWriter, obj: dict, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _completion(self, writer: asyncio.StreamWriter, request: dict) -> None:
        start = time.monotonic()
        self.requests += 1
        self.active += 1
        self.peak_active = max(self.peak_active, self.active)
        try:
            n = min(self.tokens, int(request.get("max_tokens") or self.tokens))
            model = request.get("model", "assistant")
            base = {"id": f"cmpl-{self.requests}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
            await asyncio.sleep(max(0.0, self.ttft_s - (time.monotonic() - start)))
            words = answer_tokens(request.get("messages") or [], n)
            n = len(words)
            if not request.get("stream"):
                text = "".join(words)
                await asyncio.sleep(n * self.interval_s)
                await self._json(writer, {**base, "object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            first_at = start + self.ttft_s
            # The first token alone, then `chunk_tokens` per chunk, each sent when its last token is due.
            bounds = [0, *range(1, n, self.chunk_tokens), n] if n else []
            for lo, hi in zip(bounds, bounds[1:]):
                delta = {"content": "".join(words[lo:hi])}
                if lo == 0:
                    delta["role"] = "assistant"
                    self.lateness_s.append(time.monotonic() - first_at)
                self._chunk(writer, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                await writer.drain()
                self.streamed_tokens += hi - lo
                # Paced against the clock, not by sleeping a fixed interval, so that a busy loop does not
                # slow the token rate down.
                next_hi = min(n, hi + self.chunk_tokens)
                await asyncio.sleep(max(0.0, first_at + (next_hi - 1) * self.interval_s - time.monotonic()))
            self._chunk(writer, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            payload = b"data: [DONE]\n\n"
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload))
            await writer.drain()
        finally:
            self.active -= 1

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, obj: dict) -> None:
        payload = b"data: " + json.dumps(obj).encode() + b"\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def stats(self) -> dict:
        """Requests served, peak concurrency, and percentiles of first-token lateness in milliseconds."""
        late = sorted(self.lateness_s)

        def pct(p: float) -> float:
            return round(1000 * late[min(len(late) - 1, int(p / 100 * len(late)))], 1) if late else 0.0

        return {"requests": self.requests, "peak_active": self.peak_active,
                "first_token_late_ms": {"p50": pct(50), "p95": pct(95), "p99": pct(99)}}


async def serve(args: argparse.Namespace) -> None:
    """Serve until SIGTERM/SIGINT, then print the statistics as one JSON line."""
    standin = Standin(ttft_s=args.ttft_ms / 1000, tokens=args.tokens, rate=args.rate, chunk_tokens=args.chunk_tokens)
    server = await asyncio.start_server(standin.handle, args.host, args.port, backlog=4096)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"standin listening on http://{args.host}:{args.port}/v1", flush=True)
    async with server:
        await stop.wait()
    print(json.dumps(standin.stats()), flush=True)


def main() -> None:
    """Parse the command line and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--ttft-ms", type=float, default=200.0, help="time to first token, milliseconds")
    parser.add_argument("--tokens", type=int, default=300, help="tokens per answer")
    parser.add_argument("--rate", type=float, default=30.0, help="tokens per second per stream")
    parser.add_argument("--chunk-tokens", type=int, default=1, help="tokens per chunk after the first (vLLM --stream-interval)")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
