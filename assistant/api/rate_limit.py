"""Per-key rate limits on the routes that generate for API keys (`/v1`, `/api/helpdesk`): a dependency
that counts each request (429 `rate_limit_exceeded` when the minute's budget is spent), and a plain ASGI
middleware that adds the `x-ratelimit-*` headers to the response and charges the answer's tokens once
it is sent (the tokens of a streamed answer are known only at its end)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assistant.api.deps import get_principal
from assistant.api.rate_limit_store import Limits, RateLimiter
from assistant.auth.api_keys import key_options
from assistant.core.principals import Principal

# request.state names shared by the dependency, the routes and the middleware.
STATE_KEY = "rate_limit"
STATE_HEADERS = "rate_limit_headers"
STATE_TOKENS = "usage_tokens"


async def enforce_rate_limit(request: Request, principal: Annotated[Principal, Depends(get_principal)]) -> None:
    """Count this request against its API key's limits (the key's own, else `ASSISTANT_RATE_LIMIT_*`).
    Browser sessions are not counted here (their answers wait in the fair queue instead).

    Raises:
        RateLimitedError: the key's requests or tokens of this minute are spent (429, `Retry-After`).
    """
    if getattr(request.state, "auth_method", None) != "api_key":
        return
    settings = request.app.state.settings
    options = await run_in_threadpool(key_options, request.app.state.assistant.resources.db, principal.user_id)
    limits = Limits(
        requests_per_minute=settings.rate_limits.requests_per_minute if options.requests_per_minute is None
        else options.requests_per_minute,
        tokens_per_minute=settings.rate_limits.tokens_per_minute if options.tokens_per_minute is None
        else options.tokens_per_minute,
    )
    if not (limits.requests_per_minute or limits.tokens_per_minute):
        return
    limiter: RateLimiter = request.app.state.rate_limiter
    window = await run_in_threadpool(limiter.admit, principal.name, limits)
    setattr(request.state, STATE_KEY, (principal.name, limits))
    setattr(request.state, STATE_HEADERS, window.headers())


class RateLimitMiddleware:
    """Adds the `x-ratelimit-*` headers `enforce_rate_limit` computed, and charges `usage_tokens`
    (set by the route) to the key after the response."""

    def __init__(self, app: ASGIApp, *, limiter: RateLimiter):
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and state.get(STATE_HEADERS):
                extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in state[STATE_HEADERS].items()]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            charged = state.get(STATE_KEY)
            tokens = int(state.get(STATE_TOKENS) or 0)
            if charged is not None and tokens > 0:
                key, limits = charged
                await run_in_threadpool(self.limiter.charge_tokens, key, limits, tokens)
