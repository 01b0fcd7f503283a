"""Per-key rate limits, requests and answer tokens per minute, counted with the `limits` library in Redis
(shared by every API process) or in process memory.

Both are fixed one-minute windows (`limits.strategies.FixedWindowRateLimiter`): a request is refused while
its key's window holds `requests_per_minute` requests, or `tokens_per_minute` tokens spent; the tokens
of an answer are known only once it is generated, so they are charged afterwards (`charge_tokens`) and an
answer that overshoots the budget makes the next requests wait for the window's end. The figures follow
OpenAI's rate-limit headers (`x-ratelimit-limit-requests`, `-remaining-`, `-reset-` and the `-tokens`
ones), https://platform.openai.com/docs/guides/rate-limits.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage, Storage, storage_from_string
from limits.strategies import FixedWindowRateLimiter

from assistant.core.errors import AssistantError

NAMESPACE = "assistant-ratelimit"


class RateLimitedError(AssistantError):
    """A key spent its requests or tokens of this minute; retry after `Retry-After` seconds (429)."""

    code = "rate_limit_exceeded"
    http_status = 429


@dataclass(frozen=True)
class Limits:
    """A key's limits per minute; 0 = unlimited."""

    requests_per_minute: int
    tokens_per_minute: int


@dataclass(frozen=True)
class Window:
    """Where one key stands in its current windows: limit, remaining and seconds to reset, per kind
    (None for an unlimited kind)."""

    requests: tuple[int, int, float] | None
    tokens: tuple[int, int, float] | None

    def headers(self) -> dict[str, str]:
        """The `x-ratelimit-*` headers (`reset` as seconds, e.g. `12s`, as OpenAI writes it)."""
        out: dict[str, str] = {}
        for kind, stats in (("requests", self.requests), ("tokens", self.tokens)):
            if stats is not None:
                limit, remaining, reset = stats
                out[f"x-ratelimit-limit-{kind}"] = str(limit)
                out[f"x-ratelimit-remaining-{kind}"] = str(max(0, remaining))
                out[f"x-ratelimit-reset-{kind}"] = f"{max(0.0, reset):.0f}s"
        return out


class RateLimiter:
    """Counts each key's requests and tokens per minute.

    Args:
        redis_url: Redis URL (`ASSISTANT_RATE_LIMIT_REDIS_URL`) shared by API processes; None = memory.
    """

    def __init__(self, redis_url: str | None = None):
        self.storage: Storage = storage_from_string(redis_url) if redis_url else MemoryStorage()
        self.strategy = FixedWindowRateLimiter(self.storage)

    def _stats(self, item: RateLimitItemPerMinute, key: str, kind: str) -> tuple[int, int, float]:
        stats = self.strategy.get_window_stats(item, NAMESPACE, key, kind)
        return item.amount, stats.remaining, stats.reset_time - time.time()

    def admit(self, key: str, limits: Limits) -> Window:
        """Count one request of `key`, or refuse it.

        Returns:
            The key's windows after counting it (for the response headers).

        Raises:
            RateLimitedError: the request or token budget of this minute is spent (429 with
                `Retry-After` and the `x-ratelimit-*` headers).
        """
        requests = RateLimitItemPerMinute(limits.requests_per_minute) if limits.requests_per_minute else None
        tokens = RateLimitItemPerMinute(limits.tokens_per_minute) if limits.tokens_per_minute else None
        if tokens is not None and not self.strategy.test(tokens, NAMESPACE, key, "tokens"):
            window = self.window(key, limits)
            raise self._refusal(window, f"API key has spent its {limits.tokens_per_minute} tokens of this minute")
        if requests is not None and not self.strategy.hit(requests, NAMESPACE, key, "requests"):
            window = self.window(key, limits)
            raise self._refusal(window, f"API key has made its {limits.requests_per_minute} requests of this minute")
        return self.window(key, limits)

    def charge_tokens(self, key: str, limits: Limits, tokens: int) -> None:
        """Charge `tokens` (an answer's total tokens) to `key`'s current token window, even past its limit."""
        if limits.tokens_per_minute and tokens > 0:
            item = RateLimitItemPerMinute(limits.tokens_per_minute)
            # A fixed window counts every hit, including those beyond the limit: the overshoot is kept.
            self.strategy.hit(item, NAMESPACE, key, "tokens", cost=tokens)

    def window(self, key: str, limits: Limits) -> Window:
        """The key's current windows, without counting anything."""
        requests = tokens = None
        if limits.requests_per_minute:
            requests = self._stats(RateLimitItemPerMinute(limits.requests_per_minute), key, "requests")
        if limits.tokens_per_minute:
            tokens = self._stats(RateLimitItemPerMinute(limits.tokens_per_minute), key, "tokens")
        return Window(requests, tokens)

    @staticmethod
    def _refusal(window: Window, message: str) -> RateLimitedError:
        waits = [stats[2] for stats in (window.requests, window.tokens) if stats is not None and stats[1] <= 0]
        retry_after = max(1, math.ceil(max(waits, default=1.0)))
        error = RateLimitedError(f"{message}; retry in {retry_after} s")
        error.headers = {**window.headers(), "Retry-After": str(retry_after)}
        return error
