"""A circuit breaker that makes calls to an unreachable upstream fail fast, then probes for recovery.

The pattern is Michael Nygard's (Release It!, 2007; Martin Fowler, "CircuitBreaker", 2014): after
`failure_threshold` consecutive failures the breaker opens and refuses calls for `cooldown_s`; then it
is half-open and lets exactly one probe call through. The probe's success closes it (normal service,
without restarting anything); its failure opens it again for another cool-down.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Literal

from assistant.core.errors import UpstreamUnavailableError
from assistant.core.metrics import LLM_ERRORS

BreakerState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """Counts consecutive failures of one upstream and refuses calls while it is believed down.

    Callers do `breaker.before_call()`, then exactly one of `record_success()`, `record_failure()`
    or `release()` (the call was abandoned without an answer either way, e.g. cancelled).

    Args:
        upstream: what is protected, for messages (e.g. "the LLM server at http://vllm:8000/v1").
        failure_threshold: consecutive failures that open the breaker (>= 1).
        cooldown_s: seconds the breaker stays open before it lets one probe through (> 0).
        clock: monotonic time in seconds; tests may pass their own.

    Raises:
        ValueError: a threshold below 1 or a cool-down that is not positive.
    """

    def __init__(
        self,
        upstream: str,
        *,
        failure_threshold: int = 5,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, got {failure_threshold}")
        if cooldown_s <= 0:
            raise ValueError(f"cooldown_s must be > 0, got {cooldown_s}")
        self.upstream = upstream
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state: BreakerState = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        """`closed` (calls pass), `open` (calls refused) or `half_open` (one probe may pass).

        An open breaker whose cool-down has run out reads as `half_open`.
        """
        with self._lock:
            self._advance()
            return self._state

    @property
    def consecutive_failures(self) -> int:
        """Failures recorded since the last success."""
        return self._failures

    def before_call(self) -> None:
        """Admit a call, or refuse it while the upstream is believed down.

        Raises:
            UpstreamUnavailableError: the breaker is open (Retry-After: the seconds left of the
                cool-down, rounded up), or half-open with its one probe already under way.
        """
        with self._lock:
            self._advance()
            if self._state == "closed":
                return
            if self._state == "half_open" and not self._probe_in_flight:
                self._probe_in_flight = True
                return
            retry_after_s = self._retry_after_s()
        LLM_ERRORS.labels("circuit_open").inc()
        raise UpstreamUnavailableError(
            f"{self.upstream} is unavailable: {self._failures} consecutive connection failures "
            f"opened the circuit breaker (threshold {self.failure_threshold}); "
            f"the next attempt is allowed in {retry_after_s} s",
            retry_after_s=retry_after_s,
        )

    def record_success(self) -> None:
        """The upstream answered: close the breaker and forget past failures."""
        with self._lock:
            self._state = "closed"
            self._failures = 0
            self._probe_in_flight = False

    def record_failure(self) -> None:
        """The upstream could not be reached: count it; open the breaker at the threshold or when a
        half-open probe failed."""
        LLM_ERRORS.labels("connection").inc()
        with self._lock:
            self._failures += 1
            probe_failed = self._state == "half_open"
            self._probe_in_flight = False
            if probe_failed or self._failures >= self.failure_threshold:
                self._state = "open"
                self._opened_at = self._clock()

    def release(self) -> None:
        """The admitted call ended without telling whether the upstream is up (e.g. it was
        cancelled before connecting): let the next call probe instead."""
        with self._lock:
            self._probe_in_flight = False

    def retry_after_s(self) -> int:
        """Whole seconds until an open breaker admits a probe (at least 1, for a Retry-After header)."""
        with self._lock:
            self._advance()
            return self._retry_after_s()

    def _advance(self) -> None:
        if self._state == "open" and self._clock() - self._opened_at >= self.cooldown_s:
            self._state = "half_open"
            self._probe_in_flight = False

    def _retry_after_s(self) -> int:
        if self._state != "open":
            return 1
        left_s = self.cooldown_s - (self._clock() - self._opened_at)
        return max(1, math.ceil(left_s))
