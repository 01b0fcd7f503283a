"""Where an API request came from, as the audit trail records it: auth method, client address, request ID."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from assistant.api.observability import HEADER


def client_address(request: Request) -> str:
    """The client's IP address as the server saw it (behind a reverse proxy, run uvicorn with
    `--forwarded-allow-ips` so that this is the proxy's `X-Forwarded-For` client, not the proxy)."""
    return request.client.host if request.client else ""


def request_id(request: Request) -> str | None:
    """The request's ID: its `X-Request-ID` as the request-ID middleware left it (the caller's when
    acceptable, else the one it made; `assistant.api.observability`)."""
    return request.headers.get(HEADER)


def request_origin(request: Request, *, auth_method: str | None = None) -> dict[str, Any]:
    """`record_event` keyword arguments naming the request's origin: `auth_method` (default: the
    request's, `session` or `api_key`, once the principal is known; sign-in passes `password` or
    `oidc`), `address`, and `request_id` (`request_id`)."""
    return {
        "auth_method": auth_method or getattr(request.state, "auth_method", ""),
        "address": client_address(request),
        "request_id": request_id(request),
    }
