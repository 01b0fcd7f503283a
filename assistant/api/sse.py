"""Server-sent events framing and the headers that keep proxies from buffering a stream."""

from __future__ import annotations

import json
from typing import Any

SSE_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",  # nginx: pass each event through at once
    "Connection": "keep-alive",
}


def sse_event(event: str, data: Any) -> str:
    """One SSE frame: `event: NAME` and a JSON `data:` line."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
