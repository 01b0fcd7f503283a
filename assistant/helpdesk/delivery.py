"""Outbound webhooks: the signature (HMAC-SHA256 over timestamp and body), the URL allow-list, and one
delivery attempt with its retry schedule (exponential backoff, dead-lettered after the last try).

The signature header is `X-Assistant-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`,
the scheme of Stripe's webhooks: the receiver recomputes it over the raw body and refuses a timestamp
outside its replay window (`verify_signature`, docs/helpdesk.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urljoin, urlsplit

import httpx

from assistant.core.db.api_keys import webhook_secret_for
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError
from assistant.core.settings import Settings
from assistant.helpdesk.store import delivery_payload, record_attempt

SIGNATURE_HEADER = "X-Assistant-Signature"
EVENT_HEADER = "X-Assistant-Event"
DELIVERY_HEADER = "X-Assistant-Delivery"
# Seconds a receiver should accept a signature's timestamp for (either side of its clock).
REPLAY_WINDOW_S = 300
# Same-host redirects followed per attempt (a redirect to another host is never followed).
MAX_REDIRECTS = 3
# Answers worth another try later; any other 4xx is the receiver refusing the request for good.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of `b"<timestamp>." + body` under `secret`."""
    return hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The `X-Assistant-Signature` value for `body`: `t=<unix seconds>,v1=<hex>` (now by default)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={sign(secret, t, body)}"


def verify_signature(secret: str, header: str, body: bytes, *, window_s: int = REPLAY_WINDOW_S, now: float | None = None) -> bool:
    """True when `header` signs `body` under `secret` with a timestamp within `window_s` seconds of `now`
    (what a receiver checks; constant-time comparison)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        t = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - t) > window_s:
        return False
    return hmac.compare_digest(sign(secret, t, body), fields.get("v1", ""))


def check_url(url: str, allowed_hosts: list[str]) -> str:
    """`url` if it may receive webhooks: http or https, no credentials in it, and its host (or
    `host:port`) on `allowed_hosts` (`ASSISTANT_WEBHOOK_ALLOWED_HOSTS`, compared case-insensitively).

    Raises:
        InvalidRequestError: naming the rule the URL breaks.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequestError(f"webhook URL {url!r} must be an http(s) URL with a host")
    if parts.username or parts.password:
        raise InvalidRequestError(f"webhook URL {url!r} must not carry credentials; the signature authenticates")
    allowed = {h.strip().casefold() for h in allowed_hosts if h.strip()}
    host = parts.hostname.casefold()
    with_port = f"{host}:{parts.port}" if parts.port else host
    if host not in allowed and with_port not in allowed:
        listed = ", ".join(sorted(allowed)) or "none: set ASSISTANT_WEBHOOK_ALLOWED_HOSTS"
        raise InvalidRequestError(f"webhook host {with_port!r} is not on the allow-list (allowed: {listed})")
    return url.strip()


def backoff_s(attempt: int, *, first_s: float, max_s: float) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): `first_s * 2**(attempt-1)`, capped."""
    return min(max_s, first_s * 2 ** (attempt - 1))


def _same_origin(a: str, b: str) -> bool:
    x, y = urlsplit(a), urlsplit(b)
    return (x.scheme, x.hostname, x.port) == (y.scheme, y.hostname, y.port)


def _post(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str, bool]:
    """POST, following same-origin redirects only. Returns `(status, error, retryable)`."""
    for _ in range(MAX_REDIRECTS + 1):
        response = client.post(url, content=body, headers=headers)
        if not response.is_redirect:
            code = response.status_code
            if 200 <= code < 300:
                return code, "", False
            return code, f"HTTP {code}", code >= 500 or code in RETRYABLE_STATUS
        target = urljoin(url, response.headers.get("location", ""))
        if not _same_origin(url, target):
            return response.status_code, f"redirect to another origin not followed: {urlsplit(target).netloc}", False
        url = target
    return None, f"more than {MAX_REDIRECTS} redirects", False


def attempt_delivery(db: Database, delivery_id: int, *, settings: Settings, transport: httpx.BaseTransport | None = None) -> float | None:
    """Try delivery `delivery_id` once and record the attempt.

    The JSON body is signed anew at each attempt (fresh timestamp) with the key's current secret. A 2xx
    delivers it; a network error, 5xx, 408, 409, 425 or 429 is retried; any other answer, a redirect to
    another origin, a URL no longer on the allow-list or a key without a secret dead-letters it, as
    does the `webhook_max_attempts`-th failure.

    Returns:
        Seconds to wait before the next attempt, or None when it is delivered, dead, missing or no
        longer pending (nothing more to do).
    """
    found = delivery_payload(db, delivery_id)
    if found is None:
        return None
    delivery, payload = found
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
    started = time.perf_counter()
    number = len(delivery.attempts) + 1
    status, error, retryable = None, "", False
    secret = webhook_secret_for(db, delivery.client)
    try:
        check_url(delivery.url, settings.webhooks.allowed_hosts)
        if not secret:
            raise InvalidRequestError(f"API key of '{delivery.client}' has no webhook secret (webhook removed?)")
        headers = {
            "Content-Type": "application/json", SIGNATURE_HEADER: signature_header(secret, body),
            EVENT_HEADER: delivery.event, DELIVERY_HEADER: str(delivery.id),
        }
        with httpx.Client(timeout=settings.webhooks.timeout_s, follow_redirects=False, transport=transport) as client:
            status, error, retryable = _post(client, delivery.url, body, headers)
    except InvalidRequestError as exc:
        error = exc.message
    except httpx.HTTPError as exc:
        error, retryable = f"{type(exc).__name__}: {exc}", True
    attempt = {
        "n": number, "at": datetime.now(UTC).isoformat(), "status_code": status, "error": error,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    if not error:
        record_attempt(db, delivery_id, attempt=attempt, status="delivered", next_attempt_at=None)
        return None
    if not retryable or number >= settings.webhooks.max_attempts:
        record_attempt(db, delivery_id, attempt=attempt, status="dead", next_attempt_at=None)
        return None
    delay = backoff_s(number, first_s=settings.webhooks.backoff_s, max_s=settings.webhooks.backoff_max_s)
    due = datetime.now(UTC) + timedelta(seconds=delay)
    record_attempt(db, delivery_id, attempt=attempt, status="pending", next_attempt_at=due)
    return delay
