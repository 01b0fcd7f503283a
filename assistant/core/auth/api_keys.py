"""API keys: shown once, stored as a SHA-256 hash, scoped to a service principal with its own groups.

A key is `ak_<prefix>_<secret>`: the prefix finds the row, the hash of the whole key proves it. The
secret has 256 bits of entropy, so a fast hash is enough (a slow password hash guards guessable
secrets; it would only slow every API call down here).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, select

from assistant.core.auth.accounts import add_user_to_groups, check_name, group_names
from assistant.core.db.models import ApiKey, Membership, User
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, ConflictError, InvalidRequestError, NotFoundError
from assistant.core.principals import Principal

KEY_PREFIX = "ak_"
# Refresh `last_used_at` at most this often per key: a write per request would serialise SQLite.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class CreatedKey:
    """A new key. `key` is the only copy of the secret: show it once, never store it."""

    name: str
    key: str
    principal: str
    groups: tuple[str, ...]


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_api_key(db: Database, name: str, *, groups: list[str] | tuple[str, ...] = ()) -> CreatedKey:
    """Create key `name` for the service principal of the same name (created when missing).

    Args:
        groups: the service principal's groups. A key that replaces a revoked one starts from these
            alone: its account's earlier memberships end, so that a key re-issued for another team
            does not keep what the old one could read.

    Raises:
        ConflictError: `name` is a person's account, or an unrevoked key of that name exists.
        InvalidRequestError: bad name or group name.
    """
    name = check_name("key", name)
    prefix = secrets.token_hex(4)
    key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
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
            row = ApiKey(name=name, user_id=service.id, prefix=prefix, key_hash=_digest(key))
            session.add(row)
        else:  # a revoked key's row is reused for its replacement (the name stays unique per account)
            row.prefix, row.key_hash, row.revoked_at, row.last_used_at = prefix, _digest(key), None, None
            row.created_at = datetime.now(timezone.utc)
            session.execute(delete(Membership).where(Membership.user_id == service.id))
        service.disabled = False
        add_user_to_groups(session, service, groups)
        return CreatedKey(name=name, key=key, principal=service.name, groups=tuple(group_names(session, service.id)))


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
            row.revoked_at = datetime.now(timezone.utc)


def principal_for_api_key(db: Database, key: str) -> Principal:
    """The service principal behind a presented key, with its current groups.

    Raises:
        AuthenticationError: malformed, unknown or revoked key, or a disabled account.
    """
    refused = AuthenticationError("API key is not valid (unknown, revoked or malformed)")
    parts = key.split("_", 2)
    if not key.startswith(KEY_PREFIX) or len(parts) != 3 or not parts[1]:
        raise refused
    digest = _digest(key)
    with db.session() as session:
        for row in session.scalars(select(ApiKey).where(ApiKey.prefix == parts[1], ApiKey.revoked_at.is_(None))):
            if hmac.compare_digest(row.key_hash, digest):
                user = session.get(User, row.user_id)
                if user is None or user.disabled:
                    raise refused
                now = datetime.now(timezone.utc)
                last = row.last_used_at
                if last is not None and last.tzinfo is None:  # SQLite returns naive datetimes
                    last = last.replace(tzinfo=timezone.utc)
                if last is None or now - last > LAST_USED_RESOLUTION:
                    row.last_used_at = now
                return Principal(
                    name=user.name, groups=frozenset(group_names(session, user.id)), is_admin=user.is_admin,
                    is_service=True, user_id=user.id,
                )
    raise refused


def list_api_keys(db: Database) -> list[dict]:
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


@dataclass(frozen=True)
class KeyOptions:
    """A key's own settings: rate limits per minute (None: the server's `ASSISTANT_RATE_LIMIT_*`; 0:
    unlimited) and the webhook its helpdesk results are POSTed to, with the secret that signs them."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None


def key_options(db: Database, user_id: int | None) -> KeyOptions:
    """The options of the unrevoked key of service account `user_id` (defaults when it has none)."""
    if user_id is None:
        return KeyOptions()
    with db.session() as session:
        row = session.scalar(select(ApiKey).where(ApiKey.user_id == user_id, ApiKey.revoked_at.is_(None)))
        if row is None:
            return KeyOptions()
        return KeyOptions(row.requests_per_minute, row.tokens_per_minute, row.webhook_url, row.webhook_secret)


_KEEP = object()


def configure_api_key(
    db: Database,
    name: str,
    *,
    requests_per_minute: int | None | object = _KEEP,
    tokens_per_minute: int | None | object = _KEEP,
    webhook_url: str | None | object = _KEEP,
) -> KeyOptions:
    """Change key `name`'s options; an argument left out keeps its value, None resets it. Setting a
    webhook URL generates a new signing secret (returned once here, and used for every delivery).

    The URL is stored as given: check it against the allow-list first (`assistant.helpdesk.delivery.check_url`).

    Raises:
        NotFoundError: no unrevoked key of that name.
        InvalidRequestError: a negative limit.
    """
    for label, value in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
        if isinstance(value, int) and value < 0:
            raise InvalidRequestError(f"{label} must be >= 0 (0 = unlimited), got {value}")
    with db.session() as session:
        row = session.scalar(select(ApiKey).where(ApiKey.name == name, ApiKey.revoked_at.is_(None)))
        if row is None:
            raise NotFoundError(f"API key '{name}' not found (or revoked)")
        if requests_per_minute is not _KEEP:
            row.requests_per_minute = requests_per_minute
        if tokens_per_minute is not _KEEP:
            row.tokens_per_minute = tokens_per_minute
        if webhook_url is not _KEEP:
            row.webhook_url = webhook_url
            row.webhook_secret = f"whsec_{secrets.token_urlsafe(32)}" if webhook_url else None
        return KeyOptions(row.requests_per_minute, row.tokens_per_minute, row.webhook_url, row.webhook_secret)


def webhook_secret_for(db: Database, principal_name: str) -> str | None:
    """The signing secret of the unrevoked key of service account `principal_name`, or None."""
    with db.session() as session:
        return session.scalar(
            select(ApiKey.webhook_secret)
            .join(User, User.id == ApiKey.user_id)
            .where(User.name == principal_name, ApiKey.revoked_at.is_(None))
        )
