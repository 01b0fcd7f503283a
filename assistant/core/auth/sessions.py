"""Server-side browser sessions: the cookie carries a random token, SQL says whether it still holds.

A signed cookie alone cannot be taken back: a copy stays valid until it expires, after sign-out and
after a password change. Here the cookie holds a 256-bit random token and the `auth_sessions` row
(keyed by the token's SHA-256, so a leaked database does not yield live cookies) is checked on every
request; revoking the row ends the session everywhere at once (OWASP Session Management Cheat Sheet:
server-side invalidation on logout and on credential change).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from assistant.core.db.models import AuthSession
from assistant.core.db.session import Database


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)  # SQLite returns naive datetimes


def open_session(db: Database, user_id: int, *, max_age_s: int) -> str:
    """Record a new session for `user_id` that lasts `max_age_s` seconds; returns its token.

    Expired rows of every user are purged on the way, so the table stays the size of the live sessions.
    """
    token = secrets.token_urlsafe(32)
    now = datetime.now(timezone.utc)
    with db.session() as session:
        session.execute(delete(AuthSession).where(AuthSession.expires_at < now))
        session.add(AuthSession(id=_digest(token), user_id=user_id, created_at=now, expires_at=now + timedelta(seconds=max_age_s)))
    return token


def session_user_id(db: Database, token: str) -> int | None:
    """The user id of a live session (not revoked, not expired); None for anything else."""
    if not token:
        return None
    with db.session() as session:
        row = session.get(AuthSession, _digest(token))
        if row is None or row.revoked_at is not None or _aware(row.expires_at) <= datetime.now(timezone.utc):
            return None
        return row.user_id


def revoke_session(db: Database, token: str) -> None:
    """End one session (sign-out). Unknown tokens are ignored."""
    with db.session() as session:
        session.execute(
            update(AuthSession).where(AuthSession.id == _digest(token)).values(revoked_at=datetime.now(timezone.utc))
        )


def revoke_user_sessions(session: Session, user_id: int) -> int:
    """End every session of `user_id` inside the caller's transaction; returns how many were live."""
    result = session.execute(
        update(AuthSession)
        .where(AuthSession.user_id == user_id, AuthSession.revoked_at.is_(None))
        .values(revoked_at=datetime.now(timezone.utc))
    )
    return result.rowcount or 0
