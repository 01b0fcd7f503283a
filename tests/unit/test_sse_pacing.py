"""SSE pacing: heartbeats while nothing comes, bursts of tokens coalesced into one write and one event."""

from __future__ import annotations

import asyncio

from assistant.api.sse import HEARTBEAT, paced_stream, render_sse_events
from tests.api.conftest import parse_sse


async def collect(items, **kwargs) -> list[str]:
    return [w async for w in paced_stream(items, render=render_sse_events, **kwargs)]


def test_heartbeats_while_waiting_for_the_first_token():
    async def slow():
        await asyncio.sleep(0.35)
        yield ("token", {"text": "hi"})

    writes = asyncio.run(collect(slow(), heartbeat_s=0.1, coalesce_s=0.0))
    assert writes[:3] == [HEARTBEAT] * 3 and parse_sse(writes[-1]) == [("token", {"text": "hi"})]


def test_a_burst_of_tokens_becomes_one_write_and_one_event():
    async def burst():
        yield ("token", {"text": "first"})
        await asyncio.sleep(0.05)
        for i in range(50):
            yield ("token", {"text": f" {i}"})
            await asyncio.sleep(0)
        yield ("done", {"answer": "x"})

    writes = asyncio.run(collect(burst(), heartbeat_s=10, coalesce_s=0.02))
    assert parse_sse(writes[0]) == [("token", {"text": "first"})]  # the first token is never held back
    rest = [e for w in writes[1:] for e in parse_sse(w)]
    assert len(writes) <= 3
    assert "".join(d["text"] for n, d in rest if n == "token") == "".join(f" {i}" for i in range(50))
    assert rest[-1][0] == "done"


def test_closing_the_stream_cancels_the_producer():
    closed = asyncio.Event()

    async def endless():
        try:
            while True:
                yield ("token", {"text": "."})
                await asyncio.sleep(0.001)
        finally:
            closed.set()

    async def scenario() -> bool:
        stream = paced_stream(endless(), render=render_sse_events, heartbeat_s=1, coalesce_s=0)
        await stream.__anext__()
        await stream.aclose()
        await asyncio.wait_for(closed.wait(), 1)
        return closed.is_set()

    assert asyncio.run(scenario())
