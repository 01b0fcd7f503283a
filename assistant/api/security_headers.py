"""Response headers that keep the web UI out of frames and its origin free of foreign script.

A plain ASGI middleware (not Starlette's BaseHTTPMiddleware) so that server-sent event streams pass
through untouched; it only adds headers to `http.response.start`. Values follow the OWASP Secure
Headers Project; a header a route set itself (the sandbox CSP of document downloads) is kept.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# `connect-src data:`: Shoelace's icons (its dialogs' close button) are SVG data URLs that it fetch()es.
HEADERS = {
    b"content-security-policy": b"default-src 'self'; img-src 'self' data:; connect-src 'self' data:; "
    b"object-src 'none'; base-uri 'none'; "
    b"form-action 'self'; frame-ancestors 'none'",
    b"x-frame-options": b"DENY",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"same-origin",
}


class SecurityHeadersMiddleware:
    """Adds `HEADERS` to every HTTP response that does not carry them already."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in HEADERS.items() if name not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
