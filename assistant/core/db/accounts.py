"""Accounts in SQL: users and service accounts, groups and memberships, browser sessions (`auth_sessions`)
and single sign-on links. The rules (names, passwords, tokens, claims) are `assistant.auth`'s; these
functions take names already checked and hashes already made."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from assistant.core.db.models import AuthSession, Group, Membership, User, utcnow
from assistant.core.db.session import Database, changed_rows
from assistant.core.errors import AuthenticationError, ConflictError, NotFoundError


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name, "groups": list(self.groups), "is_admin": self.is_admin,
            "is_service": self.is_service, "disabled": self.disabled, "sso": self.sso,
            "is_auditor": self.is_auditor, "legal_hold": self.legal_hold,
        }


@dataclass(frozen=True)
class PasswordAccount:
    """An enabled person's account that a password sign-in is checked against."""

    id: int
    password_hash: str | None


def _group(session: Session, name: str) -> Group:
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
    """Make `user` a member of each group (checked names; created when missing) inside the caller's
    transaction; existing memberships stay."""
    for name in groups:
        group = _group(session, name)
        if session.get(Membership, (user.id, group.id)) is None:
            session.add(Membership(user_id=user.id, group_id=group.id))
    session.flush()


def session_group_names(session: Session, user_id: int) -> list[str]:
    """Sorted names of the groups `user_id` belongs to, read in the caller's session."""
    return sorted(
        session.scalars(
            select(Group.name).join(Membership, Membership.group_id == Group.id).where(Membership.user_id == user_id)
        )
    )


def group_names(db: Database, user_id: int) -> list[str]:
    """Sorted names of the groups `user_id` belongs to (empty for an unknown id)."""
    with db.session() as session:
        return session_group_names(session, user_id)


def _public(session: Session, user: User) -> UserPublic:
    return UserPublic(
        name=user.name, groups=tuple(session_group_names(session, user.id)), is_admin=user.is_admin,
        is_service=user.is_service, disabled=user.disabled, sso=user.oidc_subject is not None,
        is_auditor=bool(user.is_auditor), legal_hold=bool(user.legal_hold),
    )


def _revoke_user_sessions(session: Session, user_id: int) -> int:
    return changed_rows(
        session,
        update(AuthSession)
        .where(AuthSession.user_id == user_id, AuthSession.revoked_at.is_(None))
        .values(revoked_at=utcnow()),
    )


def insert_user(
    db: Database,
    name: str,
    *,
    groups: list[str] | tuple[str, ...] = (),
    password_hash: str | None = None,
    is_admin: bool = False,
    display_name: str = "",
) -> UserPublic:
    """Add a person's account `name` in `groups` (checked names, created when missing).

    Raises:
        ConflictError: the name is taken, also when it differs only in case.
    """
    with db.session() as session:
        taken = session.scalar(select(User.name).where(func.lower(User.name) == name.lower()))
        if taken is not None:  # `Alice` beside `alice` would invite impersonation by look-alike names
            raise ConflictError(f"user '{name}' already exists" if taken == name else f"user '{taken}' already exists (names differ only in case)")
        user = User(name=name, display_name=display_name, password_hash=password_hash, is_admin=is_admin)
        session.add(user)
        session.flush()
        add_user_to_groups(session, user, groups)
        return _public(session, user)


def list_users(db: Database) -> list[UserPublic]:
    """Every user and service account, by name."""
    with db.session() as session:
        return [_public(session, u) for u in session.scalars(select(User).order_by(User.name))]


def add_member(db: Database, user: str, group: str) -> UserPublic:
    """Add `user` to `group` (a checked name; created when missing).

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


def replace_password_hash(db: Database, user: str, password_hash: str) -> None:
    """Store user `user`'s new password hash and end its sessions (a stolen session must not outlive
    the old password).

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        account = _user(session, user)
        account.password_hash = password_hash
        _revoke_user_sessions(session, account.id)


def user_id(db: Database, name: str) -> int | None:
    """The id of the account named `name`, or None."""
    with db.session() as session:
        return session.scalar(select(User.id).where(User.name == name))


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
            _revoke_user_sessions(session, account.id)
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


def password_account(db: Database, name: str) -> PasswordAccount | None:
    """The enabled person's account named `name` (not a service account), or None."""
    with db.session() as session:
        user = session.scalar(select(User).where(User.name == name))
        if user is None or user.disabled or user.is_service:
            return None
        return PasswordAccount(id=user.id, password_hash=user.password_hash)


def rehash_password(db: Database, user_id: int, password_hash: str) -> None:
    """Store a stronger hash of the same password (its sessions stay)."""
    with db.session() as session:
        session.execute(update(User).where(User.id == user_id).values(password_hash=password_hash))


def count_people(db: Database) -> int:
    """How many persons' accounts exist (service accounts not counted)."""
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(User).where(User.is_service.is_(False))) or 0


def link_oidc_user(
    db: Database,
    *,
    subject: str,
    name: str,
    display_name: str | None,
    email: str | None,
    groups: list[str],
    idp_groups: set[str],
) -> int:
    """Find or create the single sign-on account of `subject` (`issuer|sub`) and sync its IdP groups;
    returns its id.

    A first sign-in creates account `name` (a checked name); it links to an existing account of that
    name only when that account was pre-provisioned for single sign-on (no password, no subject, not a
    service). The account's display name and e-mail are updated when given. It becomes a member of
    `groups`, and leaves those of `idp_groups` (every group the IdP owns) that are not in `groups`.

    Raises:
        AuthenticationError: the account is disabled, or the name belongs to another account.
    """
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
        user.display_name = display_name or user.display_name or ""
        user.email = email or user.email
        session.flush()
        stale = session.scalars(
            select(Group.id)
            .join(Membership, Membership.group_id == Group.id)
            .where(Membership.user_id == user.id, Group.name.in_(idp_groups - set(groups)))
        ).all()
        if stale:
            session.execute(delete(Membership).where(Membership.user_id == user.id, Membership.group_id.in_(stale)))
        add_user_to_groups(session, user, groups)
        return user.id


def open_auth_session(db: Database, digest: str, user_id: int, *, max_age_s: int) -> None:
    """Record browser session `digest` (the token's hash) of `user_id` for `max_age_s` seconds; expired
    rows of every user are purged on the way, so the table stays the size of the live sessions."""
    now = utcnow()
    with db.session() as session:
        session.execute(delete(AuthSession).where(AuthSession.expires_at < now))
        session.add(AuthSession(id=digest, user_id=user_id, created_at=now, expires_at=now + timedelta(seconds=max_age_s)))


def live_session_user_id(db: Database, digest: str) -> int | None:
    """The user id of live session `digest` (not revoked, not expired); None for anything else."""
    with db.session() as session:
        row = session.get(AuthSession, digest)
        if row is None or row.revoked_at is not None or row.expires_at <= utcnow():
            return None
        return row.user_id


def revoke_auth_session(db: Database, digest: str) -> None:
    """End session `digest` (sign-out). Unknown digests are ignored."""
    with db.session() as session:
        session.execute(update(AuthSession).where(AuthSession.id == digest).values(revoked_at=utcnow()))
