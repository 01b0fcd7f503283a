"""Sign-in throttling state in SQL: failures per (account, address) pair and until when the pair waits.
The policy (how many failures, how long a wait) is `assistant.auth.sign_in_throttle`'s."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from assistant.core.db.models import SignInThrottle
from assistant.core.db.session import Database, changed_rows, transactional


@transactional
def blocked_until(session: Session, account: str, address: str) -> datetime | None:
    """Until when the pair must wait (aware UTC); None when it is not waiting."""
    row = session.get(SignInThrottle, (account, address))
    return row.blocked_until if row is not None else None


def add_failure(
    db: Database, account: str, address: str, *, now: datetime, forget_s: float, backoff_s: Callable[[int], float]
) -> float | None:
    """Count one failed sign-in of the pair at `now`; returns the seconds it must now wait.

    Args:
        forget_s: failures older than this (seconds since the pair's last one) are forgotten first.
        backoff_s: the wait after a number of consecutive failures (seconds; 0: none).

    Returns:
        The wait, or None when another process inserted the pair's first row at the same moment
        (its transaction won; the caller may count the failure again).
    """
    try:
        return _count_failure(db, account, address, now=now, forget_s=forget_s, backoff_s=backoff_s)
    except IntegrityError:
        return None


@transactional
def _count_failure(
    session: Session, account: str, address: str, *, now: datetime, forget_s: float, backoff_s: Callable[[int], float]
) -> float:
    """`add_failure`'s transaction; raises IntegrityError when another process inserted the pair first."""
    row = session.get(SignInThrottle, (account, address), with_for_update=True)
    if row is None:
        row = SignInThrottle(account=account, address=address, failures=0, last_failure_at=now)
        session.add(row)
    elif (now - row.last_failure_at).total_seconds() > forget_s:
        row.failures = 0
    row.failures += 1
    row.last_failure_at = now
    wait = backoff_s(row.failures)
    row.blocked_until = now + timedelta(seconds=wait) if wait else None
    return wait


@transactional
def clear_pair(session: Session, account: str, address: str) -> None:
    """Forget the pair's failures."""
    session.execute(
        delete(SignInThrottle).where(SignInThrottle.account == account, SignInThrottle.address == address)
    )


@transactional
def clear_account(session: Session, account: str) -> int:
    """Forget every failure of `account` from every address; returns how many addresses were waiting
    or counting."""
    return changed_rows(session, delete(SignInThrottle).where(SignInThrottle.account == account))
