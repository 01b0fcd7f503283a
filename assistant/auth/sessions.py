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

from assistant.core.db import accounts as accounts_db
from assistant.core.db.session import Database


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def open_session(db: Database, user_id: int, *, max_age_s: int) -> str:
    """Record a new session for `user_id` that lasts `max_age_s` seconds; returns its token.

    Expired rows of every user are purged on the way, so the table stays the size of the live sessions.
    """
    token = secrets.token_urlsafe(32)
    accounts_db.open_auth_session(db, _digest(token), user_id, max_age_s=max_age_s)
    return token


def session_user_id(db: Database, token: str) -> int | None:
    """The user id of a live session (not revoked, not expired); None for anything else."""
    if not token:
        return None
    return accounts_db.live_session_user_id(db, _digest(token))


def revoke_session(db: Database, token: str) -> None:
    """End one session (sign-out). Unknown tokens are ignored."""
    accounts_db.revoke_auth_session(db, _digest(token))
