"""Admission of operator tools that carry a token instead of a session: Prometheus, `assistant backup`."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from assistant.api.deps import get_principal, require_admin


async def require_token_or_admin(request: Request, accepts: Callable[[str], bool]) -> None:
    """Admit a request whose `Authorization: Bearer` value `accepts` approves, else only an admin.

    Raises:
        AuthenticationError: no accepted token and no signed-in caller (401).
        PermissionDeniedError: a signed-in caller who is not an admin (403).
    """
    scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and value.strip() and accepts(value.strip()):
        return
    require_admin(await get_principal(request))
