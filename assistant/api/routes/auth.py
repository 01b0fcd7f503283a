"""Sign-in: local password login, single sign-on (OpenID Connect via Authlib), the current user, logout."""

from __future__ import annotations

import logging
import math
import secrets

from authlib.integrations.base_client import OAuthError
from authlib.integrations.starlette_client import OAuth
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from assistant.api.audit_origin import client_address, request_origin
from assistant.api.deps import SESSION_CSRF, SESSION_TOKEN, DatabaseDep, PrincipalDep, get_db
from assistant.api.schemas.auth import LoginRequest, MePublic, ProvidersPublic
from assistant.auth import sign_in_throttle as throttle
from assistant.auth.accounts import authenticate_password
from assistant.auth.oidc import sign_in_oidc_user
from assistant.auth.sessions import open_session, revoke_session
from assistant.compliance.audit import record_event
from assistant.core.db.identity import load_principal_by_id
from assistant.core.errors import AuthenticationError, NotFoundError, TooManyAttemptsError
from assistant.core.principals import Principal
from assistant.core.settings import Settings

# Reachable without signing in; every other API route refuses anonymous callers.
public_router = APIRouter(prefix="/api/auth", tags=["auth"])
router = APIRouter(prefix="/api/auth", tags=["auth"])
log = logging.getLogger(__name__)
OIDC_CLIENT = "sso"


def build_oauth(settings: Settings) -> OAuth | None:
    """The Authlib OpenID Connect client for the configured issuer, or None without single sign-on."""
    if not settings.oidc.enabled:
        return None
    oauth = OAuth()
    oauth.register(
        OIDC_CLIENT,
        server_metadata_url=settings.oidc.issuer_url.rstrip("/") + "/.well-known/openid-configuration",
        client_id=settings.oidc.client_id,
        client_secret=settings.oidc.client_secret.get_secret_value(),
        client_kwargs={"scope": settings.oidc.scopes},
    )
    return oauth


async def _start_session(request: Request, principal: Principal) -> str:
    # A fresh session on every sign-in (no fixation): new server-side token, new CSRF token.
    request.session.clear()
    settings = request.app.state.settings
    token = await run_in_threadpool(open_session, get_db(request), principal.user_id, max_age_s=settings.auth.session_max_age_s)
    csrf = secrets.token_urlsafe(32)
    request.session.update({SESSION_TOKEN: token, SESSION_CSRF: csrf})
    return csrf


def _me(principal: Principal, request: Request, csrf: str | None = None) -> MePublic:
    auth = getattr(request.state, "auth_method", "session")
    return MePublic(
        name=principal.name, groups=sorted(principal.groups), is_admin=principal.is_admin,
        is_service=principal.is_service, auth=auth,
        csrf_token=csrf or (request.session.get(SESSION_CSRF) if auth == "session" else None),
    )


@public_router.get("/providers", response_model=ProvidersPublic)
def providers(request: Request) -> ProvidersPublic:
    """Which sign-in methods the login form should offer."""
    return ProvidersPublic(password=True, oidc=request.app.state.oauth is not None)


@public_router.post("/login", response_model=MePublic)
async def login(body: LoginRequest, request: Request, db: DatabaseDep) -> MePublic:
    """Sign in with a local account; sets the session cookie and returns the CSRF token.

    The body must be JSON, which a cross-site HTML form cannot send (no login CSRF).
    """
    settings = request.app.state.settings
    # Throttled per account name and client address: a guesser elsewhere cannot keep the owner out.
    # `"dave "` is dave, and must not get ten more guesses of its own.
    name = body.username.strip()[:255]
    address = client_address(request)
    origin = request_origin(request, auth_method="password")
    waiting = await run_in_threadpool(throttle.wait_s, db, name, address)
    if waiting > 0:
        await run_in_threadpool(record_event, db, principal=Principal(name=name), action="auth.login_throttled", **origin)
        raise TooManyAttemptsError(
            f"too many failed sign-ins for '{name}' from {address or 'this address'}; try again in {math.ceil(waiting)} s",
            retry_after_s=math.ceil(waiting),
        )
    try:
        user_id = await run_in_threadpool(authenticate_password, db, body.username, body.password)
    except AuthenticationError:
        policy = throttle.ThrottlePolicy.from_settings(settings)
        wait = await run_in_threadpool(throttle.record_failure, db, name, address, policy=policy)
        await run_in_threadpool(
            record_event, db, principal=Principal(name=name), action="auth.login_failed",
            details={"method": "password", "backoff_s": wait}, **origin,
        )
        raise
    await run_in_threadpool(throttle.clear_pair, db, name, address)
    principal = await run_in_threadpool(load_principal_by_id, db, user_id)
    csrf = await _start_session(request, principal)
    await run_in_threadpool(
        record_event, db, principal=principal, action="auth.login", details={"method": "password"}, **origin
    )
    return _me(principal, request, csrf)


@public_router.get("/oidc/login", include_in_schema=True)
async def oidc_login(request: Request):
    """Redirect the browser to the single sign-on issuer.

    Raises:
        NotFoundError: single sign-on is not configured.
    """
    oauth: OAuth | None = request.app.state.oauth
    if oauth is None:
        raise NotFoundError("single sign-on is not configured (ASSISTANT_OIDC_ISSUER_URL)")
    settings: Settings = request.app.state.settings
    redirect_uri = settings.oidc.redirect_url or str(request.url_for("oidc_callback"))
    try:
        return await getattr(oauth, OIDC_CLIENT).authorize_redirect(request, redirect_uri)
    except Exception as exc:  # the issuer's discovery document cannot be fetched or read
        log.warning("single sign-on issuer unreachable: %s", exc)
        raise AuthenticationError(f"the single sign-on issuer cannot be reached: {type(exc).__name__}") from exc


@public_router.get("/oidc/callback", name="oidc_callback")
async def oidc_callback(request: Request, db: DatabaseDep) -> RedirectResponse:
    """Finish single sign-on: verify the ID token, sync the user and its mapped groups, start a session.

    Raises:
        AuthenticationError: the issuer refused, the state or ID token did not verify, or the account
            cannot be used.
        NotFoundError: single sign-on is not configured.
    """
    oauth: OAuth | None = request.app.state.oauth
    if oauth is None:
        raise NotFoundError("single sign-on is not configured (ASSISTANT_OIDC_ISSUER_URL)")
    try:
        token = await getattr(oauth, OIDC_CLIENT).authorize_access_token(request)
    except OAuthError as exc:
        raise AuthenticationError(f"single sign-on failed: {exc.error}: {exc.description or ''}".strip()) from exc
    claims = token.get("userinfo")
    if not claims:
        raise AuthenticationError("single sign-on returned no ID token (is 'openid' in ASSISTANT_OIDC_SCOPES?)")
    user_id = await run_in_threadpool(sign_in_oidc_user, db, dict(claims), settings=request.app.state.settings)
    principal = await run_in_threadpool(load_principal_by_id, db, user_id)
    await _start_session(request, principal)
    await run_in_threadpool(
        record_event, db, principal=principal, action="auth.login", details={"method": "oidc"},
        **request_origin(request, auth_method="oidc"),
    )
    return RedirectResponse("/", status_code=303)


@router.get("/me", response_model=MePublic)
def me(principal: PrincipalDep, request: Request) -> MePublic:
    """The caller, its groups and (for browser sessions) the CSRF token."""
    return _me(principal, request)


@router.post("/logout", status_code=204)
def logout(principal: PrincipalDep, request: Request) -> None:
    """End the browser session on the server (a copy of the cookie stops working) and clear the cookie."""
    token = request.session.get(SESSION_TOKEN)
    if isinstance(token, str):
        revoke_session(get_db(request), token)
    request.session.clear()
