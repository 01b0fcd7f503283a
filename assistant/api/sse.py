"""Server-sent events: framing, the headers that keep proxies from buffering, heartbeats and write coalescing."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

T = TypeVar("T")

SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: pass each event through at once
    "Connection": "keep-alive",
}


# `json.dumps(data, ensure_ascii=False)` builds an encoder per call; one encoder, the same text.
_to_json = json.JSONEncoder(ensure_ascii=False).encode


def sse_event(event: str, data: Any) -> str:
    """One SSE frame: `event: NAME` and a JSON `data:` line."""
    return f"event: {event}\ndata: {_to_json(data)}\n\n"


HEARTBEAT = ": ping\n\n"  # an SSE comment: clients ignore it, proxies and load balancers see traffic
_END = object()


async def paced_stream(
    items: AsyncIterator[T],
    *,
    render: Callable[[list[T]], str],
    heartbeat_s: float,
    coalesce_s: float,
) -> AsyncIterator[str]:
    """Body chunks of an event stream: heartbeats while idle, and items that arrive close together in one write.

    The first item is written at once (it is the time to first token). After a write, items arriving
    within `coalesce_s` of it are gathered and rendered together, so a burst of tokens costs one
    socket write (and, when `render` merges them, one event) instead of one each. While no item comes
    for `heartbeat_s` seconds (retrieval, a queue for the model, a slow first token), `: ping` is sent.

    Args:
        items: the events, produced by their own task (closed by cancelling it when the client leaves).
        render: turns a non-empty batch of items into SSE text.
        heartbeat_s: idle seconds between heartbeats.
        coalesce_s: seconds a write waits after the previous one to gather more items (0 = never).

    Yields:
        SSE text, one string per write.
    """
    # A deque and one future to wake the writer, not `asyncio.Queue` with `wait_for` per item: that made
    # a task and a timer per relayed token (docs/notes/serving-and-ingestion-investigations.md,
    # "Relay cost per token"). The heartbeat is a timer per wait.
    loop = asyncio.get_running_loop()
    queue: deque = deque()
    waiter: asyncio.Future | None = None

    def put(item: object) -> None:
        queue.append(item)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def pump() -> None:
        try:
            async for item in items:
                put(item)
        except BaseException as exc:  # handed to the consumer (cancellation included)
            put(exc)
            raise
        put(_END)

    task = asyncio.create_task(pump())
    last_write = float("-inf")
    try:
        while True:
            if not queue:
                waiter = loop.create_future()
                timer = loop.call_later(heartbeat_s, lambda w=waiter: w.done() or w.set_result(None))
                try:
                    await waiter
                finally:
                    timer.cancel()
                    waiter = None
                if not queue:
                    yield HEARTBEAT
                    continue
            batch = [queue.popleft()]
            first = batch[0]
            wait = last_write + coalesce_s - loop.time()
            if wait > 0 and first is not _END and not isinstance(first, BaseException):
                await asyncio.sleep(wait)
            while batch[-1] is not _END and not isinstance(batch[-1], BaseException) and queue:
                batch.append(queue.popleft())
            tail = batch[-1]
            done = tail is _END or isinstance(tail, BaseException)
            if done:
                batch.pop()
            if batch:
                yield render(batch)
                last_write = loop.time()
            if isinstance(tail, BaseException):
                raise tail
            if done:
                return
    finally:
        task.cancel()
        try:
            await task
        except BaseException:  # it was cancelled, or failed and we re-raised its error already
            pass


def render_sse_events(batch: list[tuple[str, dict]]) -> str:
    """SSE text for `(event, data)` pairs, consecutive `token` events merged into one."""
    if len(batch) == 1:  # most writes: one token
        return sse_event(*batch[0])
    merged: list[tuple[str, dict]] = []
    for name, data in batch:
        if name == "token" and merged and merged[-1][0] == "token":
            merged[-1] = ("token", {**merged[-1][1], "text": merged[-1][1]["text"] + data["text"]})
        else:
            merged.append((name, data))
    return "".join(sse_event(name, data) for name, data in merged)
