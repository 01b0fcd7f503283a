"""A cap on request body size, so one caller cannot make the server parse megabytes of JSON.

A plain ASGI middleware (server-sent event responses pass through untouched). A declared
`Content-Length` over the cap is refused before the body is read; a body sent without one (chunked)
is counted as it arrives and refused when it passes the cap. Either way the caller gets a 413 with
the product's JSON error (`payload_too_large`), OpenAI's shape under `/v1/`.
"""

from __future__ import annotations

from fastapi import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assistant.api.errors import error_response
from assistant.core.errors import PayloadTooLargeError


class BodyLimitMiddleware:
    """Refuses HTTP requests whose body exceeds `max_bytes`.

    Args:
        app: the wrapped ASGI app.
        max_bytes: largest body accepted, in bytes.
        overrides: path -> (largest body in bytes, the setting that says so) for routes that take
            more (file uploads).
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, overrides: dict[str, tuple[int, str]] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = overrides or {}

    def _limit(self, scope: Scope) -> tuple[int, str]:
        return self.overrides.get(scope.get("path", ""), (self.max_bytes, "ASSISTANT_MAX_REQUEST_BYTES"))

    def _error(self, scope: Scope) -> PayloadTooLargeError:
        limit, setting = self._limit(scope)
        return PayloadTooLargeError(f"the request body is larger than {limit} bytes ({setting})")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self._limit(scope)[0]
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            await self._refuse(scope, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    # FastAPI turns other exceptions raised while it reads a body into a 400; its
                    # own HTTPException passes through to the app's handler (a 413, same JSON).
                    raise HTTPException(status_code=413, detail=self._error(scope).message)
            return message

        await self.app(scope, counting_receive, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        response = error_response(Request(scope), self._error(scope))
        await response(scope, self._drain, send)

    @staticmethod
    async def _drain() -> Message:
        return {"type": "http.disconnect"}
