"""Admission towards the model: bounded slots, per-principal round robin, 429 beyond the queue."""

from __future__ import annotations

import asyncio

import pytest

from assistant.answering.admission import FairLimiter
from assistant.core.errors import OverloadedError
from assistant.core.settings import Settings


def run(coro):
    return asyncio.run(coro)


def test_waiting_requests_are_served_round_robin_across_principals():
    async def scenario() -> list[str]:
        limiter = FairLimiter(max_concurrency=1, queue_max=10, per_principal_queue_max=10)
        holder = limiter.admit("h")
        await holder.acquire()
        order: list[str] = []
        tickets = [limiter.admit(k) for k in ("a", "a", "a", "b", "c")]

        async def take(ticket) -> None:
            await ticket.acquire()
            order.append(ticket.key)
            ticket.close()

        tasks = [asyncio.create_task(take(t)) for t in tickets]
        await asyncio.sleep(0)
        holder.close()
        await asyncio.gather(*tasks)
        assert limiter.active == 0 and limiter.pending == 0 and limiter.queued == 0
        return order

    assert run(scenario()) == ["a", "b", "c", "a", "a"]


def test_beyond_the_queue_and_the_per_principal_cap_requests_are_refused():
    async def scenario() -> None:
        limiter = FairLimiter(max_concurrency=2, queue_max=1, per_principal_queue_max=2)
        kept = [limiter.admit("a"), limiter.admit("a")]
        with pytest.raises(OverloadedError) as per_principal:
            limiter.admit("a")
        assert "llm_queue_max_per_principal=2" in per_principal.value.message
        kept.append(limiter.admit("b"))  # 3 admitted, 2 slots: one may wait
        with pytest.raises(OverloadedError) as full:
            limiter.admit("c")
        assert full.value.code == "overloaded" and int(full.value.headers["Retry-After"]) >= 1
        kept[0].close()
        limiter.admit("c").close()  # room again
        for t in kept:
            t.close()
        assert limiter.pending == 0 and limiter.refused == 2

    run(scenario())


def test_a_wait_past_the_timeout_is_refused_and_leaves_nothing_behind():
    async def scenario() -> None:
        # Holds predicted short (admitted), the one ahead holds its slot longer than that: refused after the wait.
        limiter = FairLimiter(max_concurrency=1, queue_max=5, per_principal_queue_max=5, queue_timeout_s=0.05,
                              hold_s=0.01)
        holder = limiter.admit("h")
        await holder.acquire()
        late = limiter.admit("x")
        with pytest.raises(OverloadedError):
            await late.acquire()
        late.close()
        holder.close()
        assert (limiter.active, limiter.pending, limiter.queued) == (0, 0, 0)

    run(scenario())


def test_a_cancelled_waiter_gives_its_place_back():
    async def scenario() -> None:
        limiter = FairLimiter(max_concurrency=1, queue_max=5, per_principal_queue_max=5)
        holder = limiter.admit("h")
        await holder.acquire()
        waiter = limiter.admit("w")
        task = asyncio.create_task(waiter.acquire())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        waiter.close()
        nxt = limiter.admit("n")
        holder.close()
        await asyncio.wait_for(nxt.acquire(), 1)
        nxt.close()
        assert (limiter.active, limiter.pending, limiter.queued) == (0, 0, 0)

    run(scenario())


@pytest.mark.parametrize("kwargs", [{"max_concurrency": 0}, {"per_principal_queue_max": 0}, {"queue_max": -1}])
def test_impossible_limits_are_refused(kwargs):
    values = {"max_concurrency": 1, "queue_max": 0, "per_principal_queue_max": 1, **kwargs}
    with pytest.raises(ValueError):
        FairLimiter(**values)


def test_slots_and_queue_timeout_follow_the_backend_unless_set(tmp_path):
    def limiter(**overrides) -> FairLimiter:
        return FairLimiter.from_settings(Settings(_env_file=None, data_dir=tmp_path, **overrides))

    in_process = limiter(llm_backend="llama_cpp")  # one model in this process: one answer at a time
    assert (in_process.max_concurrency, in_process.queue_timeout_s) == (1, 300.0)
    served = limiter(llm_backend="openai")
    assert (served.max_concurrency, served.queue_timeout_s) == (64, 30.0)
    chosen = limiter(llm_backend="llama_cpp", llm_max_concurrency=2, llm_queue_timeout_s=12)
    assert (chosen.max_concurrency, chosen.queue_timeout_s) == (2, 12.0)


def test_a_predicted_wait_beyond_the_timeout_is_refused_at_admission():
    async def scenario() -> None:
        limiter = FairLimiter(max_concurrency=2, queue_max=10, per_principal_queue_max=10, queue_timeout_s=4.0)
        first = [limiter.admit("a"), limiter.admit("b")]  # two free slots: no wait predicted
        assert limiter.predicted_wait_s() == pytest.approx(2.5)  # a third waits half a round of 5 s holds
        third = limiter.admit("c")
        assert limiter.predicted_wait_s() == pytest.approx(5.0)
        with pytest.raises(OverloadedError) as late:
            limiter.admit("d")
        assert "llm_queue_timeout_s=4.0" in late.value.message and int(late.value.headers["Retry-After"]) >= 1
        for t in (*first, third):
            t.close()
        assert limiter.predicted_wait_s() == 0.0 and limiter.refused == 1

    run(scenario())
