"""The ID of the request being served, visible to everything that runs on its behalf (logs, audit rows).

A `contextvars.ContextVar`: asyncio tasks and `asyncio.to_thread`/`run_in_threadpool` calls copy the
context, so work done in a worker thread for a request still sees its ID.
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar, Token

_request_id: ContextVar[str | None] = ContextVar("assistant_request_id", default=None)

# An ID a proxy or client sent is kept only when it is short and plain (it lands in logs and SQL).
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:-]{8,64}")


def current_request_id() -> str | None:
    """The ID of the request this code runs for, or None outside a request (CLI, Celery task)."""
    return _request_id.get()


def new_request_id(sent: str | None = None) -> str:
    """The request's ID: `sent` (e.g. a proxy's `X-Request-ID`) when 8-64 characters of
    `[A-Za-z0-9._:-]`, else a new random one (32 hex digits, UUID4)."""
    if sent and _ACCEPTABLE.fullmatch(sent):
        return sent
    return uuid.uuid4().hex


def bind_request_id(request_id: str | None) -> Token:
    """Make `request_id` the current one; returns the token `reset_request_id` takes."""
    return _request_id.set(request_id)


def reset_request_id(token: Token) -> None:
    """Restore the request ID that was current before `bind_request_id`."""
    _request_id.reset(token)
