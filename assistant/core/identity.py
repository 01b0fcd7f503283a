"""Principals from SQL: a user and the groups they belong to."""

from __future__ import annotations

from sqlalchemy import select

from assistant.core.db.models import Group, Membership, User
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError
from assistant.core.principals import Principal


def load_principal(db: Database, name: str) -> Principal:
    """The principal for user `name`, with its groups.

    Raises:
        NotFoundError: no such user, or the user is disabled.
    """
    with db.session() as session:
        user = session.scalar(select(User).where(User.name == name))
        if user is None or user.disabled:
            raise NotFoundError(f"user '{name}' not found")
        groups = session.scalars(
            select(Group.name).join(Membership, Membership.group_id == Group.id).where(Membership.user_id == user.id)
        ).all()
        return Principal(
            name=user.name, groups=frozenset(groups), is_admin=user.is_admin, is_service=user.is_service, user_id=user.id
        )
