"""Password sign-in throttling per account name and client address, with exponential back-off.

A lock per account lets anyone who knows a user name keep that user out. Here failures count per
(account, address) pair: a guesser at one address slows down only itself, and the owner signs in from
elsewhere (OWASP Authentication Cheat Sheet, "Account Lockout": prefer throttling to lockout, and key it
on more than the account). After `free_failures` failures the pair waits `base_s`, doubled on each
further failure, at most `max_s`. The state is in SQL, so every API process sees the same counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from assistant.core.db.models import SignInThrottle
from assistant.core.db.session import Database


@dataclass(frozen=True)
class ThrottlePolicy:
    """Failures allowed before the back-off (`free_failures`), its first wait and its cap (seconds), and
    how long a pair's failures are remembered after the last one (`forget_s`)."""

    free_failures: int = 10
    base_s: float = 2.0
    max_s: float = 900.0
    forget_s: float = 900.0

    @classmethod
    def from_settings(cls, settings) -> "ThrottlePolicy":
        """`login_max_failures`, `login_backoff_base_s` and `login_failure_window_s` (cap and memory)."""
        return cls(
            free_failures=settings.login_max_failures, base_s=settings.login_backoff_base_s,
            max_s=float(settings.login_failure_window_s), forget_s=float(settings.login_failure_window_s),
        )

    def backoff_s(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures: 0 below `free_failures`, then
        `base_s * 2**(failures - free_failures)`, at most `max_s`."""
        if failures < self.free_failures:
            return 0.0
        return min(self.base_s * 2 ** min(failures - self.free_failures, 60), self.max_s)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)  # SQLite returns naive datetimes


def _key(account: str, address: str) -> tuple[str, str]:
    return account.strip()[:255], (address or "unknown")[:64]


def wait_s(db: Database, account: str, address: str, *, now: datetime | None = None) -> float:
    """Seconds the pair must still wait before its next attempt is checked; 0 when it may try now."""
    now = now or datetime.now(timezone.utc)
    with db.session() as session:
        row = session.get(SignInThrottle, _key(account, address))
        if row is None or row.blocked_until is None:
            return 0.0
        return max(0.0, (_aware(row.blocked_until) - now).total_seconds())


def record_failure(
    db: Database, account: str, address: str, *, policy: ThrottlePolicy, now: datetime | None = None
) -> float:
    """Count one failed sign-in of the pair; returns the seconds it must now wait (0 while under
    `policy.free_failures`). Failures older than `policy.forget_s` are forgotten first."""
    now = now or datetime.now(timezone.utc)
    key = _key(account, address)
    for _ in range(2):  # two processes may insert the pair's first row at once: the loser updates it
        try:
            with db.session() as session:
                row = session.get(SignInThrottle, key, with_for_update=True)
                if row is None:
                    row = SignInThrottle(account=key[0], address=key[1], failures=0, last_failure_at=now)
                    session.add(row)
                elif (now - _aware(row.last_failure_at)).total_seconds() > policy.forget_s:
                    row.failures = 0
                row.failures += 1
                row.last_failure_at = now
                wait = policy.backoff_s(row.failures)
                row.blocked_until = now + timedelta(seconds=wait) if wait else None
                return wait
        except IntegrityError:
            continue
    return policy.backoff_s(policy.free_failures)


def clear_pair(db: Database, account: str, address: str) -> None:
    """Forget the pair's failures (after a successful sign-in from that address)."""
    with db.session() as session:
        session.execute(
            delete(SignInThrottle).where(
                SignInThrottle.account == _key(account, address)[0], SignInThrottle.address == _key(account, address)[1]
            )
        )


def clear_account(db: Database, account: str) -> int:
    """Forget every failure of `account` from every address (an admin's unlock, a password reset);
    returns how many addresses were waiting or counting."""
    with db.session() as session:
        result = session.execute(delete(SignInThrottle).where(SignInThrottle.account == account.strip()))
        return result.rowcount or 0
