"""Password sign-in throttling per account name and client address, with exponential back-off.

A lock per account lets anyone who knows a user name keep that user out. Here failures count per
(account, address) pair: a guesser at one address slows down only itself, and the owner signs in from
elsewhere (OWASP Authentication Cheat Sheet, "Account Lockout": prefer throttling to lockout, and key it
on more than the account). After `free_failures` failures the pair waits `base_s`, doubled on each
further failure, at most `max_s`. The state is in SQL, so every API process sees the same counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from assistant.auth import store as throttle_db
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
    def from_settings(cls, settings) -> ThrottlePolicy:
        """`login_max_failures`, `login_backoff_base_s` and `login_failure_window_s` (cap and memory)."""
        return cls(
            free_failures=settings.auth.login_max_failures, base_s=settings.auth.login_backoff_base_s,
            max_s=float(settings.auth.login_failure_window_s), forget_s=float(settings.auth.login_failure_window_s),
        )

    def backoff_s(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures: 0 below `free_failures`, then
        `base_s * 2**(failures - free_failures)`, at most `max_s`."""
        if failures < self.free_failures:
            return 0.0
        return min(self.base_s * 2 ** min(failures - self.free_failures, 60), self.max_s)


def _key(account: str, address: str) -> tuple[str, str]:
    return account.strip()[:255], (address or "unknown")[:64]


def wait_s(db: Database, account: str, address: str, *, now: datetime | None = None) -> float:
    """Seconds the pair must still wait before its next attempt is checked; 0 when it may try now."""
    now = now or datetime.now(UTC)
    until = throttle_db.blocked_until(db, *_key(account, address))
    return 0.0 if until is None else max(0.0, (until - now).total_seconds())


def record_failure(
    db: Database, account: str, address: str, *, policy: ThrottlePolicy, now: datetime | None = None
) -> float:
    """Count one failed sign-in of the pair; returns the seconds it must now wait (0 while under
    `policy.free_failures`). Failures older than `policy.forget_s` are forgotten first."""
    now = now or datetime.now(UTC)
    for _ in range(2):  # two processes may insert the pair's first row at once: the loser updates it
        wait = throttle_db.add_failure(
            db, *_key(account, address), now=now, forget_s=policy.forget_s, backoff_s=policy.backoff_s
        )
        if wait is not None:
            return wait
    return policy.backoff_s(policy.free_failures)


def clear_pair(db: Database, account: str, address: str) -> None:
    """Forget the pair's failures (after a successful sign-in from that address)."""
    throttle_db.clear_pair(db, *_key(account, address))


def clear_account(db: Database, account: str) -> int:
    """Forget every failure of `account` from every address (an admin's unlock, a password reset);
    returns how many addresses were waiting or counting."""
    return throttle_db.clear_account(db, account.strip())
