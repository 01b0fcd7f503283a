"""Admission towards the model: at most N generations in flight, a bounded fair queue, 429 beyond it.

Waiting requests are served round robin across principals (each principal has its own FIFO; the next
free slot goes to the principal after the one served last), so one busy service account cannot starve
the people behind it. This is the per-flow round robin of fair queuing (J. Nagle, "On packet switches
with infinite storage", IEEE Trans. Communications, 1987) with requests in place of packets.

A request is admitted (`admit`) before its response starts, so that a full queue, or a predicted wait
for a slot longer than the queue's timeout (`predicted_wait_s`), answers a plain `429 overloaded` with
`Retry-After` instead of an error inside the stream after the wait; it takes its slot (`acquire`) only when it needs the model, after
retrieval. The limits are per process: with several API processes, divide vLLM's `max-num-seqs`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque

from assistant.core.errors import OverloadedError

# Weight of the newest sample in the moving average of how long a slot is held.
HOLD_EWMA_WEIGHT = 0.1


class Ticket:
    """One admitted request. `acquire()` waits for a model slot; `close()` gives back what it holds.

    Use `async with ticket:` or call `close()` in a `finally`; both are idempotent.
    """

    def __init__(self, limiter: FairLimiter, key: str):
        self._limiter = limiter
        self.key = key
        self.granted = False
        self.closed = False
        self.waited_s = 0.0
        self._granted_at = 0.0
        self._future: asyncio.Future | None = None

    async def acquire(self) -> None:
        """Wait (in the principal's queue) until a model slot is ours; returns at once if it already is.

        Raises:
            OverloadedError: no slot came within the limiter's `queue_timeout_s`.
        """
        if self.granted:
            return
        if self.closed:
            raise RuntimeError("acquire() on a closed ticket")
        await self._limiter._acquire(self)

    def close(self) -> None:
        """Release the slot (or the place in the queue); safe to call more than once."""
        if not self.closed:
            self.closed = True
            self._limiter._release(self)

    async def __aenter__(self) -> Ticket:
        await self.acquire()
        return self

    async def __aexit__(self, *_exc) -> None:
        self.close()


# (slots, queue timeout in seconds) per LLM backend when the settings leave them unset. vLLM batches
# up to its max-num-seqs; llama.cpp in process answers one question at a time, each in 20 s to
# 2 minutes on a 2-core CPU, so its queue waits longer.
BACKEND_LIMITS: dict[str, tuple[int, float]] = {"openai": (64, 30.0), "llama_cpp": (1, 300.0)}


class FairLimiter:
    """Bounded concurrency with a bounded per-principal round-robin queue. One per process and event loop.

    Args:
        max_concurrency: slots, i.e. generations in flight at once.
        queue_max: admitted requests that do not hold a slot yet, all principals together, beyond
            the free slots; one more is refused.
        per_principal_queue_max: admitted requests without a slot per principal; one more is refused.
        queue_timeout_s: longest wait for a slot, in seconds.
        hold_s: first estimate of how long a slot is held, in seconds (then a moving average of the
            holds seen), for `predicted_wait_s` and `Retry-After`.
        clock: monotonic seconds (tests may pass their own).

    Raises:
        ValueError: a limit below 1 (queue_max may be 0: no waiting at all).
    """

    def __init__(
        self,
        *,
        max_concurrency: int,
        queue_max: int,
        per_principal_queue_max: int,
        queue_timeout_s: float = 30.0,
        hold_s: float = 5.0,
        clock=time.monotonic,
    ):
        if max_concurrency < 1 or per_principal_queue_max < 1 or queue_max < 0:
            raise ValueError(
                f"max_concurrency={max_concurrency} and per_principal_queue_max={per_principal_queue_max} must be"
                f" >= 1 and queue_max={queue_max} >= 0"
            )
        self.max_concurrency = max_concurrency
        self.queue_max = queue_max
        self.per_principal_queue_max = per_principal_queue_max
        self.queue_timeout_s = queue_timeout_s
        self._clock = clock
        self.active = 0
        self._pending: dict[str, int] = {}  # admitted, no slot yet, per principal
        self._waiting: OrderedDict[str, deque[Ticket]] = OrderedDict()  # round-robin order of principals
        self._hold_s = hold_s  # moving average of how long a slot is held, for Retry-After
        self.refused = 0

    @classmethod
    def from_settings(cls, settings) -> FairLimiter:
        """The limiter configured by `ASSISTANT_LLM_MAX_CONCURRENCY` and `ASSISTANT_LLM_QUEUE_*`.

        Unset, slots and queue timeout follow the backend (`BACKEND_LIMITS`): the in-process
        llama.cpp model generates one answer at a time, so it gets one slot, and the queue (fair
        across principals, bounded, with `Retry-After`) does the waiting instead of a lock that
        would admit 64 chats and serve them in no particular order.
        """
        slots, timeout_s = BACKEND_LIMITS.get(settings.llm.backend, BACKEND_LIMITS["openai"])
        return cls(
            max_concurrency=settings.llm.max_concurrency or slots,
            queue_max=settings.llm.queue_max,
            per_principal_queue_max=settings.llm.queue_max_per_principal,
            queue_timeout_s=settings.llm.queue_timeout_s or timeout_s,
        )

    @property
    def pending(self) -> int:
        """Admitted requests that hold no slot yet (retrieving or queued)."""
        return sum(self._pending.values())

    @property
    def queued(self) -> int:
        """Requests waiting in the queue for a slot."""
        return sum(len(q) for q in self._waiting.values())

    def admit(self, key: str) -> Ticket:
        """Admit a request of principal `key` (its `scope_key` or name), or refuse it at once.

        Returns:
            A ticket; the caller must `close()` it.

        Raises:
            OverloadedError: the queue is full, this principal has `per_principal_queue_max`
                requests waiting already, or the predicted wait for a slot (`predicted_wait_s`)
                exceeds `queue_timeout_s`; `Retry-After` estimates when a slot frees up (seconds).
        """
        mine = self._pending.get(key, 0)
        free = self.max_concurrency - self.active
        if mine >= self.per_principal_queue_max:
            self.refused += 1
            raise OverloadedError(
                f"principal '{key}' already has {mine} requests waiting for the model"
                f" (llm_queue_max_per_principal={self.per_principal_queue_max})",
                retry_after_s=self.retry_after_s(),
            )
        if self.pending - free >= self.queue_max:
            self.refused += 1
            raise OverloadedError(
                f"{self.pending} requests are waiting for the model, {self.active} generating"
                f" (llm_max_concurrency={self.max_concurrency}, llm_queue_max={self.queue_max})",
                retry_after_s=self.retry_after_s(),
            )
        wait_s = self.predicted_wait_s()
        if wait_s > self.queue_timeout_s:
            self.refused += 1
            raise OverloadedError(
                f"a model slot would free up in about {wait_s:.0f} s, beyond llm_queue_timeout_s="
                f"{self.queue_timeout_s} ({self.active} generating, {self.pending} waiting)",
                retry_after_s=self.retry_after_s(),
            )
        self._pending[key] = mine + 1
        return Ticket(self, key)

    def predicted_wait_s(self) -> float:
        """Seconds a request admitted now would likely wait for a slot: 0 while the requests already
        admitted leave one free; else the rounds of slot holds ahead of it (those admitted beyond
        the free slots, and itself, over `max_concurrency`) times the moving average hold time."""
        free = self.max_concurrency - self.active
        ahead = self.pending - free + 1
        return 0.0 if ahead <= 0 else ahead / self.max_concurrency * self._hold_s

    def retry_after_s(self) -> int:
        """Whole seconds until a queued request would likely get a slot (at least 1)."""
        rounds = (self.pending + 1) / self.max_concurrency
        return max(1, math.ceil(rounds * self._hold_s))

    async def _acquire(self, ticket: Ticket) -> None:
        start = self._clock()
        if self.active < self.max_concurrency and not self._waiting:
            self._grant(ticket)
            return
        future = asyncio.get_running_loop().create_future()
        ticket._future = future
        self._waiting.setdefault(ticket.key, deque()).append(ticket)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout=self.queue_timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if not ticket.granted:
                self._unqueue(ticket)
                if isinstance(exc, asyncio.TimeoutError):
                    raise OverloadedError(
                        f"no model slot freed up within llm_queue_timeout_s={self.queue_timeout_s}"
                        f" ({self.active} generating, {self.queued} waiting)",
                        retry_after_s=self.retry_after_s(),
                    ) from None
            raise
        finally:
            ticket.waited_s = self._clock() - start

    def _grant(self, ticket: Ticket) -> None:
        self._pending[ticket.key] -= 1
        if not self._pending[ticket.key]:
            del self._pending[ticket.key]
        self.active += 1
        ticket.granted = True
        ticket._granted_at = self._clock()
        if ticket._future is not None and not ticket._future.done():
            ticket._future.set_result(None)

    def _unqueue(self, ticket: Ticket) -> None:
        queue = self._waiting.get(ticket.key)
        if queue is not None and ticket in queue:
            queue.remove(ticket)
            if not queue:
                del self._waiting[ticket.key]

    def _release(self, ticket: Ticket) -> None:
        if ticket.granted:
            self.active -= 1
            held = self._clock() - ticket._granted_at
            self._hold_s += HOLD_EWMA_WEIGHT * (held - self._hold_s)
        else:
            self._unqueue(ticket)
            self._pending[ticket.key] -= 1
            if not self._pending[ticket.key]:
                del self._pending[ticket.key]
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to waiting principals in turn: the head of the first queue, which then
        moves to the back of the order."""
        while self.active < self.max_concurrency and self._waiting:
            key, queue = next(iter(self._waiting.items()))
            ticket = queue.popleft()
            del self._waiting[key]
            if queue:
                self._waiting[key] = queue  # re-inserted last: round robin
            self._grant(ticket)
