"""Single sign-on: turn verified OpenID Connect ID-token claims into a local user and its groups.

The IdP owns the local groups that `oidc_group_map` maps to: each sign-in adds the mapped groups in the
groups claim and removes the mapped groups missing from it. Groups granted locally (`assistant groups
add`) that no IdP group maps to are left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assistant.auth.accounts import check_group_names, check_name
from assistant.core.db.accounts import link_oidc_user
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, InvalidRequestError
from assistant.core.settings import Settings


def mapped_groups(claims: Mapping[str, Any], settings: Settings) -> list[str]:
    """Local groups for the IdP groups in `claims[settings.oidc_groups_claim]` (a list or one string)."""
    raw = claims.get(settings.oidc.groups_claim) or []
    idp_groups = [raw] if isinstance(raw, str) else [str(g) for g in raw]
    return sorted({settings.oidc.group_map[g] for g in idp_groups if g in settings.oidc.group_map})


def sign_in_oidc_user(db: Database, claims: Mapping[str, Any], *, settings: Settings) -> int:
    """Find or create the user of a verified ID token and sync its mapped groups; returns its id.

    The account is found by issuer + subject. A first sign-in creates it, named after
    `oidc_username_claim` (else `email`, else `sub`); it links to an existing account of that name only
    when that account was pre-provisioned for single sign-on (no password, no subject, not a service),
    so an IdP user can never take over a local account.

    Raises:
        AuthenticationError: the claims lack `sub`, the account is disabled, or the name belongs to
            another account.
    """
    if not claims.get("sub"):
        raise AuthenticationError("the ID token has no 'sub' claim")
    subject = f"{claims.get('iss', '')}|{claims['sub']}"
    raw_name = str(claims.get(settings.oidc.username_claim) or claims.get("email") or claims["sub"])
    try:
        name = check_name("user", raw_name)
    except InvalidRequestError as exc:
        raise AuthenticationError(f"single sign-on user name from the IdP is unusable: {exc.message}") from exc
    return link_oidc_user(
        db, subject=subject, name=name,
        display_name=str(claims["name"]) if claims.get("name") else None,
        email=str(claims["email"]) if claims.get("email") else None,
        groups=check_group_names(mapped_groups(claims, settings)), idp_groups=set(settings.oidc.group_map.values()),
    )
