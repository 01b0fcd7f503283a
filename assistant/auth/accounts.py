"""Account rules: user, group and key names, local passwords and sign-in, the first admin. The rows are
`assistant.core.db.accounts`'; its operations that need no rule of their own are offered here as they are."""

from __future__ import annotations

import re
import secrets

from assistant.auth.passwords import MIN_PASSWORD_CHARS, hash_password, needs_rehash, verify_password
from assistant.auth.sign_in_throttle import clear_account
from assistant.core.db import accounts as accounts_db
from assistant.core.db.accounts import (  # noqa: F401  (the accounts API: list, flags, removal)
    UserPublic,
    list_users,
    remove_member,
    remove_user,
    set_disabled,
    set_flags,
)
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, InvalidRequestError, NotFoundError
from assistant.core.principals import RESERVED_NAMES

# Names end up in ACL tokens (`user:NAME`, `group:NAME`): no whitespace, colon or control character.
# Group names may hold slashes (identity providers such as Keycloak send group paths, `/staff/it`), but
# no segment between slashes may be dots only (`..`, `/eng/../hr`): names land in exports and logs,
# where such a path reads as another group's.
_GROUP_NAME = re.compile(r"^(?!(?:.*/)?\.+(?:/|$))[^\s:\x00-\x1f\x7f]{1,255}$")
# User and key names also appear in exports, erasure reports and log lines: in addition no slashes,
# backslashes or control characters, and not dots only (`..`); `alice.smith@example.com` is fine.
_NAME = re.compile(r"^(?!\.+$)[^\s:/\\\x00-\x1f\x7f]{1,255}$")


def check_name(kind: str, name: str) -> str:
    """Validate a user or group name; returns it stripped.

    Raises:
        InvalidRequestError: empty, too long, containing whitespace, ':' or a control character, or
            reserved; a group name also when a segment between its slashes is dots only (`..`); a user
            or key name when it holds '/' or '\\', or is made of dots only.
    """
    name = name.strip()
    if kind == "group":
        if not _GROUP_NAME.match(name):
            raise InvalidRequestError(
                f"group name {name!r} must be 1-255 characters without whitespace, ':' or control characters, "
                "and no part between slashes may be only dots (such as '..')"
            )
    elif not _NAME.match(name):
        raise InvalidRequestError(
            f"{kind} name {name!r} must be 1-255 characters without whitespace, ':', '/' or '\\', and not only dots"
        )
    if name.casefold() in RESERVED_NAMES:
        raise InvalidRequestError(f"{kind} name {name!r} is reserved (it names the built-in principals)")
    return name


def check_group_names(groups: list[str] | tuple[str, ...]) -> list[str]:
    """Each of `groups` checked by `check_name("group", ...)`, stripped, in the same order.

    Raises:
        InvalidRequestError: a bad group name.
    """
    return [check_name("group", group) for group in groups]


def create_user(
    db: Database,
    name: str,
    *,
    groups: list[str] | tuple[str, ...] = (),
    password: str | None = None,
    is_admin: bool = False,
    display_name: str = "",
) -> UserPublic:
    """Create a person's account (local password optional: without one, only single sign-on works).

    Raises:
        ConflictError: the name is taken.
        InvalidRequestError: bad name, group name or a password that breaks the policy.
    """
    name = check_name("user", name)
    password_hash = hash_password(password) if password is not None else None
    return accounts_db.insert_user(
        db, name, groups=check_group_names(groups), password_hash=password_hash, is_admin=is_admin,
        display_name=display_name,
    )


def add_member(db: Database, user: str, group: str) -> UserPublic:
    """Add `user` to `group` (created when missing). Takes effect on the user's next request.

    Raises:
        NotFoundError: no such user.
    """
    return accounts_db.add_member(db, user, check_name("group", group))


def set_password(db: Database, user: str, password: str) -> None:
    """Replace a user's local password; ends its sessions and clears its sign-in throttling.

    Raises:
        NotFoundError: no such user. InvalidRequestError: the password breaks the policy.
    """
    accounts_db.replace_password_hash(db, user, hash_password(password))  # ends its sessions
    clear_account(db, user)  # the owner may sign in at once, from wherever a guesser was throttled


def unlock_account(db: Database, name: str) -> int:
    """An admin's unlock: forget `name`'s sign-in failures from every address; returns how many
    addresses were waiting or counting.

    Failures are counted for unknown names too (a guesser must not learn which names exist), so a name
    with recorded failures is unlocked whether or not it has an account.

    Raises:
        NotFoundError: no account has that name and no failure is recorded for it (a typo).
    """
    cleared = clear_account(db, name)
    if cleared == 0:
        if accounts_db.user_id(db, name.strip()) is None:
            raise NotFoundError(f"user '{name}' not found, and no sign-in failures are recorded for that name")
    return cleared


def authenticate_password(db: Database, name: str, password: str) -> int:
    """Check a local account's credentials; returns the user's id.

    Unknown names, service accounts, disabled users and accounts without a password all fail the same
    way, after the same amount of hashing work.

    Raises:
        AuthenticationError: the name and password do not match an enabled local account.
    """
    account = accounts_db.password_account(db, name.strip())
    ok = verify_password(account.password_hash if account is not None else None, password)
    if not (account is not None and ok):
        raise AuthenticationError("user name or password is wrong")
    if needs_rehash(account.password_hash) and len(password) >= MIN_PASSWORD_CHARS:
        accounts_db.rehash_password(db, account.id, hash_password(password))
    return account.id


def ensure_bootstrap_admin(db: Database, *, name: str, password: str | None) -> str | None:
    """On a database without any person's account, create admin `name`.

    Args:
        password: the admin's password; None generates one.

    Returns:
        The password to show once when an admin was created (generated or given); None when the
        database already had a person's account and nothing was done.
    """
    if accounts_db.count_people(db):
        return None
    password = password or secrets.token_urlsafe(15)
    create_user(db, name, password=password, is_admin=True, display_name="First administrator")
    return password
