"""Where an API request came from, as the audit trail records it: auth method, client address, request ID."""

from __future__ import annotations

from typing import Any

from fastapi import Request


def client_address(request: Request) -> str:
    """The client's IP address as the server saw it (behind a reverse proxy, run uvicorn with
    `--forwarded-allow-ips` so that this is the proxy's `X-Forwarded-For` client, not the proxy)."""
    return request.client.host if request.client else ""


def request_origin(request: Request, *, auth_method: str | None = None) -> dict[str, Any]:
    """`record_event` keyword arguments naming the request's origin: `auth_method` (default: the
    request's, `session` or `api_key`, once the principal is known; sign-in passes `password` or
    `oidc`), `address`, and `request_id` when the request has one."""
    return {
        "auth_method": auth_method or getattr(request.state, "auth_method", ""),
        "address": client_address(request),
        "request_id": getattr(request.state, "request_id", None),
    }
