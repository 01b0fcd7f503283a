"""Request-scoped dependencies as `Annotated` aliases: the composed assistant and the current principal.

A caller is either a browser session (signed HttpOnly cookie holding a session token, checked against
SQL on every request so that sign-out ends it on the server, and a CSRF token) or a
service presenting `Authorization: Bearer KEY`. Cookie-authenticated requests that change state must
echo the session's CSRF token in the `X-CSRF-Token` header (synchronizer token, OWASP CSRF cheat sheet):
another site can make the browser send the cookie, but cannot read the token.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Path, Request
from starlette.concurrency import run_in_threadpool

from assistant.auth.api_keys import principal_for_api_key
from assistant.auth.sessions import session_user_id
from assistant.composition import Assistant
from assistant.core.db.identity import load_principal_by_id
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, PermissionDeniedError
from assistant.core.jobs import JobDispatcher
from assistant.core.principals import Principal

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SESSION_TOKEN = "sid"
SESSION_CSRF = "csrf"


def get_assistant(request: Request) -> Assistant:
    """The composed retriever and answerer built in the app's lifespan."""
    return request.app.state.assistant


def get_dispatcher(request: Request) -> JobDispatcher:
    """The background job dispatcher built in the app's lifespan."""
    return request.app.state.dispatcher


def get_db(request: Request) -> Database:
    """The process's SQL database."""
    return request.app.state.assistant.resources.db


def _unauthenticated(message: str) -> AuthenticationError:
    return AuthenticationError(message, headers={"WWW-Authenticate": 'Bearer realm="assistant"'})


async def get_principal(request: Request) -> Principal:
    """The signed-in caller, read from SQL on every request (group changes apply at once).

    Sets `request.state.auth_method` to `api_key` or `session`.

    Raises:
        AuthenticationError: no session and no API key, or an invalid one (401).
        PermissionDeniedError: a cookie-authenticated state-changing request without the session's
            CSRF token (403, code `csrf_failed`).
    """
    db = get_db(request)
    header = request.headers.get("authorization")
    if header:
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _unauthenticated("the Authorization header must be 'Bearer KEY'")
        principal = await run_in_threadpool(principal_for_api_key, db, key.strip())
        request.state.auth_method = "api_key"
        return principal
    token = request.session.get(SESSION_TOKEN)
    if not isinstance(token, str):
        raise _unauthenticated("sign in first: no session cookie and no 'Authorization: Bearer' API key")
    user_id = await run_in_threadpool(session_user_id, db, token)
    principal = None if user_id is None else await run_in_threadpool(load_principal_by_id, db, user_id)
    if principal is None:
        request.session.clear()
        raise _unauthenticated("the session has ended (signed out, expired, password changed or account disabled); sign in again")
    if request.method not in SAFE_METHODS:
        expected = request.session.get(SESSION_CSRF) or ""
        sent = request.headers.get(CSRF_HEADER) or ""
        if not expected or not hmac.compare_digest(expected, sent):
            raise PermissionDeniedError(
                f"the {CSRF_HEADER} header must carry this session's CSRF token (from /api/auth/me)",
                code="csrf_failed",
            )
    request.state.auth_method = "session"
    return principal


def require_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    """The caller, if an admin. Admins manage users, sources and models; they read through the same ACLs.

    Raises:
        PermissionDeniedError: the caller is not an admin.
    """
    if not principal.is_admin:
        raise PermissionDeniedError(f"'{principal.name}' is not an admin")
    return principal


AssistantDep = Annotated[Assistant, Depends(get_assistant)]
DispatcherDep = Annotated[JobDispatcher, Depends(get_dispatcher)]
DatabaseDep = Annotated[Database, Depends(get_db)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
AdminDep = Annotated[Principal, Depends(require_admin)]

# A row ID in a path or query: SQL integer keys are signed 64-bit, so a larger number is refused as a 422
# naming the parameter instead of overflowing the database driver (a 500).
MAX_ROW_ID = 2**63 - 1
RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description="a row ID (1 to 2^63-1)")]
