"""API keys in SQL: their rows (prefix, hash, options), the service accounts they belong to and those
accounts' groups. Key format and hashing are `assistant.auth.api_keys`'s; these functions take digests."""

from __future__ import annotations

import enum
import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from sqlalchemy import delete, select

from assistant.core.db.accounts import add_user_to_groups, session_group_names
from assistant.core.db.models import ApiKey, Membership, User, utcnow
from assistant.core.db.session import Database
from assistant.core.errors import ConflictError, NotFoundError
from assistant.core.principals import Principal

# Refresh `last_used_at` at most this often per key: a write per request would serialise SQLite.
LAST_USED_RESOLUTION = timedelta(minutes=1)
class Keep(enum.Enum):
    """The type of `KEEP` (a one-member enum, so that `is not KEEP` narrows the argument's type)."""

    KEEP = "keep"


# An option argument left out of `configure_key`: the option keeps its value.
KEEP: Final = Keep.KEEP


@dataclass(frozen=True)
class KeyOptions:
    """A key's own settings: rate limits per minute (None: the server's `ASSISTANT_RATE_LIMIT_*`; 0:
    unlimited) and the webhook its helpdesk results are POSTed to, with the secret that signs them."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None


def store_key(
    db: Database, name: str, *, prefix: str, key_hash: str, groups: list[str] | tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Store key `name` (its `prefix` and SHA-256 `key_hash`) for the service account of the same name
    (created when missing) in `groups` (checked names); returns the account's groups, sorted.

    A key that replaces a revoked one reuses its row and starts from `groups` alone: the account's
    earlier memberships end, so that a key re-issued for another team does not keep what the old one
    could read.

    Raises:
        ConflictError: `name` is a person's account, or an unrevoked key of that name exists.
    """
    with db.session() as session:
        service = session.scalar(select(User).where(User.name == name))
        if service is None:
            service = User(name=name, display_name=f"service account for API key {name}", is_service=True)
            session.add(service)
            session.flush()
        elif not service.is_service:
            raise ConflictError(f"'{name}' is a person's account; API keys belong to service accounts")
        row = session.scalar(select(ApiKey).where(ApiKey.user_id == service.id, ApiKey.name == name))
        if row is not None and row.revoked_at is None:
            raise ConflictError(f"API key '{name}' exists; revoke it first (assistant keys revoke {name})")
        if row is None:
            row = ApiKey(name=name, user_id=service.id, prefix=prefix, key_hash=key_hash)
            session.add(row)
        else:  # a revoked key's row is reused for its replacement (the name stays unique per account)
            row.prefix, row.key_hash, row.revoked_at, row.last_used_at = prefix, key_hash, None, None
            row.created_at = utcnow()
            session.execute(delete(Membership).where(Membership.user_id == service.id))
        service.disabled = False
        add_user_to_groups(session, service, groups)
        return tuple(session_group_names(session, service.id))


def revoke_api_key(db: Database, name: str) -> None:
    """Revoke key `name`; the next request that presents it is refused.

    Raises:
        NotFoundError: no unrevoked key of that name.
    """
    with db.session() as session:
        rows = session.scalars(select(ApiKey).where(ApiKey.name == name, ApiKey.revoked_at.is_(None))).all()
        if not rows:
            raise NotFoundError(f"API key '{name}' not found (or already revoked)")
        for row in rows:
            row.revoked_at = utcnow()


def key_principal(db: Database, prefix: str, key_hash: str) -> Principal | None:
    """The service principal of the unrevoked key with `prefix` whose hash is `key_hash` (compared in
    constant time), with its current groups; None when there is none or its account is disabled.
    Notes the key's use (`last_used_at`, at most once per `LAST_USED_RESOLUTION`)."""
    with db.session() as session:
        for row in session.scalars(select(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None))):
            if hmac.compare_digest(row.key_hash, key_hash):
                user = session.get(User, row.user_id)
                if user is None or user.disabled:
                    return None
                now = utcnow()
                if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
                    row.last_used_at = now
                return Principal(
                    name=user.name, groups=frozenset(session_group_names(session, user.id)), is_admin=user.is_admin,
                    is_service=True, user_id=user.id,
                )
    return None


def list_api_keys(db: Database) -> list[dict[str, Any]]:
    """Every key's name, prefix, owner and dates (never the secret or its hash)."""
    with db.session() as session:
        rows = session.execute(select(ApiKey, User.name).join(User, User.id == ApiKey.user_id).order_by(ApiKey.name))
        return [
            {
                "name": k.name, "prefix": k.prefix, "principal": owner,
                "created_at": k.created_at.isoformat() if k.created_at else None,
                "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
                "last_used_at": k.last_used_at.isoformat() if k.last_used_at else None,
            }
            for k, owner in rows
        ]


def key_options(db: Database, user_id: int | None) -> KeyOptions:
    """The options of the unrevoked key of service account `user_id` (defaults when it has none)."""
    if user_id is None:
        return KeyOptions()
    with db.session() as session:
        row = session.scalar(select(ApiKey).where(ApiKey.user_id == user_id, ApiKey.revoked_at.is_(None)))
        if row is None:
            return KeyOptions()
        return KeyOptions(row.requests_per_minute, row.tokens_per_minute, row.webhook_url, row.webhook_secret)


def configure_key(
    db: Database,
    name: str,
    *,
    requests_per_minute: int | None | Keep = KEEP,
    tokens_per_minute: int | None | Keep = KEEP,
    webhook_url: str | None | Keep = KEEP,
    webhook_secret: str | None | Keep = KEEP,
) -> KeyOptions:
    """Change key `name`'s options as given; an argument left out (`KEEP`) keeps its value, None resets it.

    Raises:
        NotFoundError: no unrevoked key of that name.
    """
    with db.session() as session:
        row = session.scalar(select(ApiKey).where(ApiKey.name == name, ApiKey.revoked_at.is_(None)))
        if row is None:
            raise NotFoundError(f"API key '{name}' not found (or revoked)")
        if requests_per_minute is not KEEP:
            row.requests_per_minute = requests_per_minute
        if tokens_per_minute is not KEEP:
            row.tokens_per_minute = tokens_per_minute
        if webhook_url is not KEEP:
            row.webhook_url = webhook_url
        if webhook_secret is not KEEP:
            row.webhook_secret = webhook_secret
        return KeyOptions(row.requests_per_minute, row.tokens_per_minute, row.webhook_url, row.webhook_secret)


def webhook_secret_for(db: Database, principal_name: str) -> str | None:
    """The signing secret of the unrevoked key of service account `principal_name`, or None."""
    with db.session() as session:
        return session.scalar(
            select(ApiKey.webhook_secret)
            .join(User, User.id == ApiKey.user_id)
            .where(User.name == principal_name, ApiKey.revoked_at.is_(None))
        )
