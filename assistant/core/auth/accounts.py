"""Users, groups and memberships in SQL: create, list, group changes, password sign-in, the first admin."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from assistant.core.auth.sessions import revoke_user_sessions
from assistant.core.auth.sign_in_throttle import clear_account
from assistant.core.auth.passwords import MIN_PASSWORD_CHARS, hash_password, needs_rehash, verify_password
from assistant.core.db.models import Group, Membership, User
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, ConflictError, InvalidRequestError, NotFoundError
from assistant.core.principals import RESERVED_NAMES

# Names end up in ACL tokens (`user:NAME`, `group:NAME`): no whitespace, colon or control character.
# Group names may hold slashes (identity providers such as Keycloak send group paths, `/staff/it`), but
# no segment between slashes may be dots only (`..`, `/eng/../hr`): names land in exports and logs,
# where such a path reads as another group's.
_GROUP_NAME = re.compile(r"^(?!(?:.*/)?\.+(?:/|$))[^\s:\x00-\x1f\x7f]{1,255}$")
# User and key names also appear in exports, erasure reports and log lines: in addition no slashes,
# backslashes or control characters, and not dots only (`..`); `alice.smith@example.com` is fine.
_NAME = re.compile(r"^(?!\.+$)[^\s:/\\\x00-\x1f\x7f]{1,255}$")


@dataclass(frozen=True)
class UserPublic:
    """A user as listed to an admin (never with its password hash)."""

    name: str
    groups: tuple[str, ...]
    is_admin: bool
    is_service: bool
    disabled: bool
    sso: bool
    is_auditor: bool = False
    legal_hold: bool = False

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "name": self.name, "groups": list(self.groups), "is_admin": self.is_admin,
            "is_service": self.is_service, "disabled": self.disabled, "sso": self.sso,
            "is_auditor": self.is_auditor, "legal_hold": self.legal_hold,
        }


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


def _group(session: Session, name: str) -> Group:
    name = check_name("group", name)
    group = session.scalar(select(Group).where(Group.name == name))
    if group is None:
        group = Group(name=name)
        session.add(group)
        session.flush()
    return group


def _user(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFoundError(f"user '{name}' not found")
    return user


def add_user_to_groups(session: Session, user: User, groups: list[str] | tuple[str, ...]) -> None:
    """Make `user` a member of each group (created when missing); existing memberships stay."""
    for name in groups:
        group = _group(session, name)
        if session.get(Membership, (user.id, group.id)) is None:
            session.add(Membership(user_id=user.id, group_id=group.id))
    session.flush()


def group_names(session: Session, user_id: int) -> list[str]:
    """Sorted names of the groups `user_id` belongs to."""
    return sorted(
        session.scalars(
            select(Group.name).join(Membership, Membership.group_id == Group.id).where(Membership.user_id == user_id)
        )
    )


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
    with db.session() as session:
        taken = session.scalar(select(User.name).where(func.lower(User.name) == name.lower()))
        if taken is not None:  # `Alice` beside `alice` would invite impersonation by look-alike names
            raise ConflictError(f"user '{name}' already exists" if taken == name else f"user '{taken}' already exists (names differ only in case)")
        user = User(name=name, display_name=display_name, password_hash=password_hash, is_admin=is_admin)
        session.add(user)
        session.flush()
        add_user_to_groups(session, user, groups)
        return _public(session, user)


def _public(session: Session, user: User) -> UserPublic:
    return UserPublic(
        name=user.name, groups=tuple(group_names(session, user.id)), is_admin=user.is_admin,
        is_service=user.is_service, disabled=user.disabled, sso=user.oidc_subject is not None,
        is_auditor=bool(user.is_auditor), legal_hold=bool(user.legal_hold),
    )


def list_users(db: Database) -> list[UserPublic]:
    """Every user and service account, by name."""
    with db.session() as session:
        return [_public(session, u) for u in session.scalars(select(User).order_by(User.name))]


def add_member(db: Database, user: str, group: str) -> UserPublic:
    """Add `user` to `group` (created when missing). Takes effect on the user's next request.

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        account = _user(session, user)
        add_user_to_groups(session, account, [group])
        return _public(session, account)


def remove_member(db: Database, user: str, group: str) -> UserPublic:
    """Remove `user` from `group`. Takes effect on the user's next request.

    Raises:
        NotFoundError: no such user, or the user is not in that group.
    """
    with db.session() as session:
        account = _user(session, user)
        group_id = session.scalar(select(Group.id).where(Group.name == group))
        if group_id is None or session.get(Membership, (account.id, group_id)) is None:
            raise NotFoundError(f"user '{user}' is not a member of group '{group}'")
        session.execute(delete(Membership).where(Membership.user_id == account.id, Membership.group_id == group_id))
        return _public(session, account)


def set_password(db: Database, user: str, password: str) -> None:
    """Replace a user's local password; ends its sessions and clears its sign-in throttling.

    Raises:
        NotFoundError: no such user. InvalidRequestError: the password breaks the policy.
    """
    with db.session() as session:
        account = _user(session, user)
        account.password_hash = hash_password(password)
        revoke_user_sessions(session, account.id)  # a stolen session must not outlive the old password
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
        with db.session() as session:
            if session.scalar(select(User.id).where(User.name == name.strip())) is None:
                raise NotFoundError(f"user '{name}' not found, and no sign-in failures are recorded for that name")
    return cleared


def set_disabled(db: Database, user: str, disabled: bool) -> UserPublic:
    """Disable (or enable again) an account. Disabling ends its browser sessions at once; its API
    keys stop working while it is disabled (they are checked against the account on every request).

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        account = _user(session, user)
        account.disabled = disabled
        if disabled:
            revoke_user_sessions(session, account.id)
        return _public(session, account)


def set_flags(db: Database, user: str, *, is_auditor: bool | None = None, legal_hold: bool | None = None) -> UserPublic:
    """Grant or withdraw the auditor role (reads the audit trail; documents only through its ACLs), or
    place or lift a legal hold (retention deletes none of the user's rows while it holds). None leaves
    a flag as it is.

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        account = _user(session, user)
        if is_auditor is not None:
            account.is_auditor = is_auditor
        if legal_hold is not None:
            account.legal_hold = legal_hold
        return _public(session, account)


def remove_user(db: Database, user: str) -> None:
    """Delete an account with its memberships, sessions, API keys and conversations; audit events
    keep the name they recorded.

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        session.delete(_user(session, user))


def authenticate_password(db: Database, name: str, password: str) -> int:
    """Check a local account's credentials; returns the user's id.

    Unknown names, service accounts, disabled users and accounts without a password all fail the same
    way, after the same amount of hashing work.

    Raises:
        AuthenticationError: the name and password do not match an enabled local account.
    """
    with db.session() as session:
        user = session.scalar(select(User).where(User.name == name.strip()))
        usable = user is not None and not user.disabled and not user.is_service
        ok = verify_password(user.password_hash if usable else None, password)
        if not (usable and ok):
            raise AuthenticationError("user name or password is wrong")
        if needs_rehash(user.password_hash) and len(password) >= MIN_PASSWORD_CHARS:
            user.password_hash = hash_password(password)
        return user.id


def ensure_bootstrap_admin(db: Database, *, name: str, password: str | None) -> str | None:
    """On a database without any person's account, create admin `name`.

    Args:
        password: the admin's password; None generates one.

    Returns:
        The password to show once when an admin was created (generated or given); None when the
        database already had a person's account and nothing was done.
    """
    with db.session() as session:
        people = session.scalar(select(func.count()).select_from(User).where(User.is_service.is_(False)))
        if people:
            return None
    password = password or secrets.token_urlsafe(15)
    create_user(db, name, password=password, is_admin=True, display_name="First administrator")
    return password
