"""Server-sent events: framing, the headers that keep proxies from buffering, heartbeats and write coalescing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

T = TypeVar("T")

SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: pass each event through at once
    "Connection": "keep-alive",
}


def sse_event(event: str, data: Any) -> str:
    """One SSE frame: `event: NAME` and a JSON `data:` line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


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
    queue: asyncio.Queue = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in items:
                queue.put_nowait(item)
        except BaseException as exc:  # handed to the consumer (cancellation included)
            queue.put_nowait(exc)
            raise
        queue.put_nowait(_END)

    task = asyncio.create_task(pump())
    loop = asyncio.get_running_loop()
    last_write = float("-inf")
    try:
        while True:
            if queue.empty():
                try:
                    first = await asyncio.wait_for(queue.get(), timeout=heartbeat_s)
                except TimeoutError:
                    yield HEARTBEAT
                    continue
            else:
                first = queue.get_nowait()
            batch = [first]
            wait = last_write + coalesce_s - loop.time()
            if wait > 0 and first is not _END and not isinstance(first, BaseException):
                await asyncio.sleep(wait)
            while batch[-1] is not _END and not isinstance(batch[-1], BaseException) and not queue.empty():
                batch.append(queue.get_nowait())
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
    merged: list[tuple[str, dict]] = []
    for name, data in batch:
        if name == "token" and merged and merged[-1][0] == "token":
            merged[-1] = ("token", {**merged[-1][1], "text": merged[-1][1]["text"] + data["text"]})
        else:
            merged.append((name, data))
    return "".join(sse_event(name, data) for name, data in merged)
