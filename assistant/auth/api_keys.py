"""API keys: shown once, stored as a SHA-256 hash, scoped to a service principal with its own groups.

A key is `ak_<prefix>_<secret>`: the prefix finds the row, the hash of the whole key proves it. The
secret has 256 bits of entropy, so a fast hash is enough (a slow password hash guards guessable
secrets; it would only slow every API call down here).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from assistant.auth.accounts import check_group_names, check_name
from assistant.core.db import api_keys as keys_db
from assistant.core.db.api_keys import (  # noqa: F401  (the keys API: listing, revocation, options)
    KeyOptions,
    key_options,
    list_api_keys,
    revoke_api_key,
    webhook_secret_for,
)
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, InvalidRequestError
from assistant.core.principals import Principal

KEY_PREFIX = "ak_"


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
    stored_groups = keys_db.store_key(db, name, prefix=prefix, key_hash=_digest(key), groups=check_group_names(groups))
    return CreatedKey(name=name, key=key, principal=name, groups=stored_groups)


def principal_for_api_key(db: Database, key: str) -> Principal:
    """The service principal behind a presented key, with its current groups.

    Raises:
        AuthenticationError: malformed, unknown or revoked key, or a disabled account.
    """
    refused = AuthenticationError("API key is not valid (unknown, revoked or malformed)")
    parts = key.split("_", 2)
    if not key.startswith(KEY_PREFIX) or len(parts) != 3 or not parts[1]:
        raise refused
    principal = keys_db.key_principal(db, parts[1], _digest(key))
    if principal is None:
        raise refused
    return principal


def configure_api_key(
    db: Database,
    name: str,
    *,
    requests_per_minute: int | None | keys_db.Keep = keys_db.KEEP,
    tokens_per_minute: int | None | keys_db.Keep = keys_db.KEEP,
    webhook_url: str | None | keys_db.Keep = keys_db.KEEP,
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
    secret = keys_db.KEEP
    if webhook_url is not keys_db.KEEP:
        secret = f"whsec_{secrets.token_urlsafe(32)}" if webhook_url else None
    return keys_db.configure_key(
        db, name, requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute,
        webhook_url=webhook_url, webhook_secret=secret,
    )
