"""Per-request observability: an ID (`X-Request-ID`), a latency histogram by route, one log event.

The ID is asgi-correlation-id's: its middleware (`install_request_ids`) keeps an acceptable caller's
`X-Request-ID`, else makes a new one, writes it back into the request's headers (which the audit trail
reads, `assistant.api.audit_origin`) and into the response's, and makes it the log records' `request_id`
(`assistant.core.log_config.RequestIdFilter`).

`RequestObservabilityMiddleware` is a plain ASGI middleware (not Starlette's BaseHTTPMiddleware) so that event streams pass untouched; the
duration runs to the last body message, so a streamed answer counts whole. The route label is the
matched route's path template (`/api/documents/{doc_id}`), never the raw path, which would make one
time series per document and could carry text.
"""

from __future__ import annotations

import logging
import re
import time

from asgi_correlation_id import CorrelationIdMiddleware, correlation_id
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assistant.core.metrics import REQUEST_SECONDS

HEADER = "X-Request-ID"
log = logging.getLogger("assistant.api.requests")
# An ID a proxy or client sent is kept only when it is short and plain (it lands in logs and SQL).
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:-]{8,64}")


def acceptable_request_id(sent: str) -> bool:
    """Whether a caller's `X-Request-ID` is kept: 8-64 characters of `[A-Za-z0-9._:-]` (else a new
    one, 32 hex digits of a UUID4, replaces it)."""
    return _ACCEPTABLE.fullmatch(sent) is not None


def install_request_ids(app: FastAPI) -> None:
    """Add the request-ID middleware around everything added so far (call it last): every response,
    refusals included, has its `X-Request-ID`."""
    app.add_middleware(CorrelationIdMiddleware, header_name=HEADER, validator=acceptable_request_id)


def route_label(scope: Scope) -> str:
    """The matched route's path template, "static" for the web app's files, "unmatched" for a 404."""
    route = scope.get("route")
    if route is not None and getattr(route, "path", None):
        return route.path
    if scope.get("root_path") or scope.get("app_root_path") or scope.get("endpoint") is not None:
        return "static"
    return "unmatched"


class RequestObservabilityMiddleware:
    """Records `assistant_http_request_duration_seconds` of each HTTP request and logs one `request`
    event (method, route, status, seconds, request ID; no query string, no body). Runs inside the
    request-ID middleware (`install_request_ids`)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            seconds = time.perf_counter() - started
            route = route_label(scope)
            REQUEST_SECONDS.labels(scope["method"], route, str(status)).observe(seconds)
            log.info("request", extra={"method": scope["method"], "route": route, "status": status,
                                       "duration_s": round(seconds, 4), "request_id": correlation_id.get()})
