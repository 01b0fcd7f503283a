"""Principals from SQL: a user (or service account) and the groups it belongs to, read per request."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from assistant.core.db.models import Group, Membership, User
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError, NotFoundError
from assistant.core.principals import Principal


def _principal(session: Session, user: User) -> Principal:
    groups = session.scalars(
        select(Group.name).join(Membership, Membership.group_id == Group.id).where(Membership.user_id == user.id)
    ).all()
    return Principal(
        name=user.name, groups=frozenset(groups), is_admin=user.is_admin, is_service=user.is_service, user_id=user.id,
        is_auditor=bool(user.is_auditor),
    )


def load_principal(db: Database, name: str) -> Principal:
    """The principal for user `name`, with its groups.

    Only the command line acts as a named user (`--as`, run by whoever administers the server), so
    the errors say which case it is.

    Raises:
        InvalidRequestError: `name` is blank.
        NotFoundError: no such user, or the user is disabled.
    """
    if not name.strip():
        raise InvalidRequestError("--as needs a user name; leave it out to read as the anonymous reader ('everyone')")
    with db.session() as session:
        user = session.scalar(select(User).where(User.name == name))
        if user is None:
            raise NotFoundError(f"user '{name}' not found")
        if user.disabled:
            raise NotFoundError(f"user '{name}' is disabled (`assistant users enable {name}` to enable it)")
        return _principal(session, user)


def load_principal_by_id(db: Database, user_id: int) -> Principal | None:
    """The principal for user id `user_id` with its current groups; None if missing or disabled.

    Read on every request, so that a group or account change applies to the next one.
    """
    with db.session() as session:
        user = session.get(User, user_id)
        if user is None or user.disabled:
            return None
        return _principal(session, user)


def requester_principal(db: Database, requester: str, *, within: Principal) -> Principal | None:
    """The principal a helpdesk ticket is answered as: the person `requester` names (a user name, or an
    e-mail address compared case-insensitively), with only those of their groups that `within` (the
    helpdesk's service principal) also has, so a ticket reads no more than both may.

    Returns:
        None when no enabled person's account matches (service accounts never do): the caller then
        reads as a reader of `everyone` only.
    """
    wanted = requester.strip()
    if not wanted:
        return None
    with db.session() as session:
        user = session.scalar(select(User).where(User.name == wanted))
        if user is None and "@" in wanted:
            user = session.scalar(select(User).where(func.lower(User.email) == wanted.casefold()))
        if user is None or user.disabled or user.is_service:
            return None
        person = _principal(session, user)
    return Principal(name=person.name, groups=person.groups & within.groups, user_id=person.user_id)
