"""Per-request observability: an ID (`X-Request-ID`), a latency histogram by route, one log event.

A plain ASGI middleware (not Starlette's BaseHTTPMiddleware) so that event streams pass untouched; the
duration runs to the last body message, so a streamed answer counts whole. The route label is the
matched route's path template (`/api/documents/{doc_id}`), never the raw path, which would make one
time series per document and could carry text.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assistant.core.metrics import REQUEST_SECONDS
from assistant.core.request_context import bind_request_id, new_request_id, reset_request_id

HEADER = "X-Request-ID"
log = logging.getLogger("assistant.api.requests")


def route_label(scope: Scope) -> str:
    """The matched route's path template, "static" for the web app's files, "unmatched" for a 404."""
    route = scope.get("route")
    if route is not None and getattr(route, "path", None):
        return route.path
    if scope.get("root_path") or scope.get("app_root_path") or scope.get("endpoint") is not None:
        return "static"
    return "unmatched"


class RequestObservabilityMiddleware:
    """Gives each HTTP request an ID (the caller's `X-Request-ID` when acceptable, else a new one),
    returns it in the `X-Request-ID` response header, records `assistant_http_request_duration_seconds`
    and logs one `request` event (method, route, status, seconds; no query string, no body)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(HEADER.lower().encode())
        request_id = new_request_id(sent.decode("latin-1") if sent else None)
        token = bind_request_id(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = route_label(scope)
            REQUEST_SECONDS.labels(scope["method"], route, str(status)).observe(seconds)
            log.info("request", extra={"method": scope["method"], "route": route, "status": status,
                                       "duration_s": round(seconds, 4), "request_id": request_id})
            reset_request_id(token)
