"""Single sign-on: turn verified OpenID Connect ID-token claims into a local user and its groups.

The IdP owns the local groups that `oidc_group_map` maps to: each sign-in adds the mapped groups in the
groups claim and removes the mapped groups missing from it. Groups granted locally (`assistant groups
add`) that no IdP group maps to are left alone.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import delete, select

from assistant.core.auth.accounts import add_user_to_groups, check_name
from assistant.core.db.models import Group, Membership, User
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, InvalidRequestError
from assistant.core.settings import Settings


def mapped_groups(claims: Mapping[str, Any], settings: Settings) -> list[str]:
    """Local groups for the IdP groups in `claims[settings.oidc_groups_claim]` (a list or one string)."""
    raw = claims.get(settings.oidc_groups_claim) or []
    idp_groups = [raw] if isinstance(raw, str) else [str(g) for g in raw]
    return sorted({settings.oidc_group_map[g] for g in idp_groups if g in settings.oidc_group_map})


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
    raw_name = str(claims.get(settings.oidc_username_claim) or claims.get("email") or claims["sub"])
    try:
        name = check_name("user", raw_name)
    except InvalidRequestError as exc:
        raise AuthenticationError(f"single sign-on user name from the IdP is unusable: {exc.message}") from exc
    with db.session() as session:
        user = session.scalar(select(User).where(User.oidc_subject == subject))
        if user is None:
            user = session.scalar(select(User).where(User.name == name))
            if user is not None and (user.oidc_subject or user.password_hash or user.is_service):
                raise AuthenticationError(
                    f"user name '{name}' from single sign-on belongs to another account; ask an admin"
                )
            if user is None:
                user = User(name=name)
                session.add(user)
            user.oidc_subject = subject
        if user.disabled:
            raise AuthenticationError(f"user '{user.name}' is disabled")
        user.display_name = str(claims.get("name") or user.display_name or "")
        user.email = str(claims["email"]) if claims.get("email") else user.email
        session.flush()
        wanted = mapped_groups(claims, settings)
        idp_owned = set(settings.oidc_group_map.values())
        stale = session.scalars(
            select(Group.id)
            .join(Membership, Membership.group_id == Group.id)
            .where(Membership.user_id == user.id, Group.name.in_(idp_owned - set(wanted)))
        ).all()
        if stale:
            session.execute(delete(Membership).where(Membership.user_id == user.id, Membership.group_id.in_(stale)))
        add_user_to_groups(session, user, wanted)
        return user.id
