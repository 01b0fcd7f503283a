"""The `openai` LLM backend against a real llama.cpp OpenAI-compatible server (vLLM's stand-in):
streaming, cancellation, read timeouts, an outage that opens the circuit breaker, and recovery."""

from __future__ import annotations

import asyncio
import time

import pytest

from assistant.core.errors import UpstreamUnavailableError
from assistant.core.llm.base import StreamResult
from assistant.core.llm.breaker import CircuitBreaker
from assistant.core.llm.openai_compat import OpenAICompatLLM

# SmolLM2-135M writes hundreds of tokens for this one: long enough to cancel mid-way.
STORY = [{"role": "user", "content": "Write a very long, detailed story about a lighthouse keeper. "
          "Use at least 1000 words."}]
HELLO = [{"role": "user", "content": "Say hello."}]
DISCONNECT_LINE = "Disconnected from client"  # what llama_cpp.server logs when a client goes away


async def _wait_for_log(server, text: str, *, after: int, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in server.log_text()[after:]:
            return True
        await asyncio.sleep(0.2)
    return False


def test_stream_yields_text_deltas_then_says_why_it_ended(llm_server):
    async def scenario() -> tuple[list[str], str, StreamResult, StreamResult]:
        llm = OpenAICompatLLM(llm_server.base_url, "assistant", read_timeout_s=120)
        try:
            story, hello = StreamResult(), StreamResult()
            deltas = [d async for d in llm.stream(STORY, max_tokens=24, temperature=0.0, result=story)]
            await llm.complete(HELLO, max_tokens=200, temperature=0.0, result=hello)
            return deltas, llm.breaker.state, story, hello
        finally:
            await llm.aclose()

    deltas, breaker_state, story, hello = asyncio.run(scenario())
    assert len(deltas) > 1, "the answer must arrive in pieces, not as one blob"
    assert all(isinstance(d, str) and d for d in deltas)
    assert "".join(deltas).strip()
    assert breaker_state == "closed"
    # llama_cpp.server sends no usage when streaming: the backend counts (an over-estimate, capped).
    assert story.finish_reason == "length"
    assert story.usage.prompt_tokens > 0 and 1 <= story.usage.completion_tokens <= 24
    assert hello.finish_reason == "stop" and 1 <= hello.usage.completion_tokens < 200


def test_closing_the_stream_stops_the_generation_upstream(llm_server):
    """The server runs one generation at a time and never interrupts it by itself
    (`--interrupt_requests false`, like vLLM): the second request can only be answered promptly
    because closing the first iterator closed its HTTP stream."""

    async def scenario() -> tuple[list[str], bool, str]:
        llm = OpenAICompatLLM(llm_server.base_url, "assistant", read_timeout_s=120)
        try:
            log_start = len(llm_server.log_text())
            closed = StreamResult()
            stream = llm.stream(STORY, max_tokens=1000, temperature=0.0, result=closed)
            received: list[str] = []
            async for delta in stream:
                received.append(delta)
                if len(received) == 3:
                    break
            await stream.aclose()
            # Closed before the end: no finish reason, and the tokens of the text received.
            assert closed.finish_reason is None and 1 <= closed.usage.completion_tokens < 1000
            disconnected = await _wait_for_log(llm_server, DISCONNECT_LINE, after=log_start)
            second = await asyncio.wait_for(llm.complete(HELLO, max_tokens=8, temperature=0.0), 60)
            return received, disconnected, second
        finally:
            await llm.aclose()

    received, disconnected, second = asyncio.run(scenario())
    assert len(received) == 3
    assert disconnected, "the server never saw the client go away"
    assert second.strip()


def test_a_slow_server_times_out_without_counting_as_down(llm_server):
    """No chunk within read_timeout_s is an UpstreamUnavailableError, but the server is up: the
    breaker must not count it (nor retry it: the server has the prompt already)."""

    async def scenario() -> tuple[UpstreamUnavailableError, int, str]:
        busy = OpenAICompatLLM(llm_server.base_url, "assistant", read_timeout_s=120)
        impatient = OpenAICompatLLM(llm_server.base_url, "assistant", read_timeout_s=1.0)
        occupying = busy.stream(STORY, max_tokens=1000, temperature=0.0)
        try:
            await occupying.__anext__()  # the server now generates the story and holds its lock
            with pytest.raises(UpstreamUnavailableError) as caught:
                await impatient.complete(HELLO, max_tokens=8, temperature=0.0)
            return caught.value, impatient.breaker.consecutive_failures, impatient.breaker.state
        finally:
            await occupying.aclose()
            await busy.aclose()
            await impatient.aclose()

    error, failures, state = asyncio.run(scenario())
    assert "within" in error.message
    assert error.headers["Retry-After"].isdigit()
    assert (failures, state) == (0, "closed")


def test_outage_opens_the_breaker_and_the_same_client_recovers(llm_server_factory):
    server = llm_server_factory()  # private: this test stops it
    cooldown_s = 2.0

    async def scenario() -> None:
        llm = OpenAICompatLLM(
            server.base_url, "assistant", connect_timeout_s=2.0, read_timeout_s=120,
            connect_retries=1, retry_backoff_s=0.05, retry_backoff_max_s=0.1,
            breaker_failure_threshold=3, breaker_cooldown_s=cooldown_s,
        )
        try:
            assert (await llm.complete(HELLO, max_tokens=4, temperature=0.0)).strip()

            server.stop()
            # First call: two connection attempts (one retry), both refused; the breaker counts both.
            started = time.monotonic()
            with pytest.raises(UpstreamUnavailableError) as first:
                await llm.complete(HELLO, max_tokens=4, temperature=0.0)
            assert time.monotonic() - started < 10, "a refused connection must fail in seconds"
            assert "unreachable after 2 connection attempt(s)" in first.value.message
            assert (llm.breaker.consecutive_failures, llm.breaker.state) == (2, "closed")

            # Second call: the third failure reaches the threshold; no retry once the breaker opened.
            with pytest.raises(UpstreamUnavailableError):
                await llm.complete(HELLO, max_tokens=4, temperature=0.0)
            assert (llm.breaker.consecutive_failures, llm.breaker.state) == (3, "open")

            # Third call: refused by the breaker without a connection attempt.
            with pytest.raises(UpstreamUnavailableError) as refused:
                await llm.complete(HELLO, max_tokens=4, temperature=0.0)
            assert "circuit breaker" in refused.value.message
            assert refused.value.code == "upstream_unavailable"
            assert 1 <= int(refused.value.headers["Retry-After"]) <= cooldown_s
            assert llm.breaker.consecutive_failures == 3

            server.start()  # same port: the operator restarted vLLM
            while llm.breaker.state == "open":
                await asyncio.sleep(0.1)
            assert llm.breaker.state == "half_open"
            # The probe goes through (the pool's dead keep-alive socket counts as a connection
            # failure and is retried), succeeds, and closes the breaker.
            assert (await llm.complete(HELLO, max_tokens=4, temperature=0.0)).strip()
            assert (llm.breaker.state, llm.breaker.consecutive_failures) == ("closed", 0)
            assert (await llm.complete(HELLO, max_tokens=4, temperature=0.0)).strip()
        finally:
            await llm.aclose()

    asyncio.run(scenario())


class _Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_half_open_breaker_lets_one_probe_through():
    clock = _Clock()
    breaker = CircuitBreaker("the test upstream", failure_threshold=2, cooldown_s=10.0, clock=clock)
    breaker.before_call()
    breaker.record_failure()
    breaker.before_call()
    breaker.record_failure()
    assert breaker.state == "open"
    clock.now_s += 4.2
    with pytest.raises(UpstreamUnavailableError) as refused:
        breaker.before_call()
    assert refused.value.headers == {"Retry-After": "6"}

    clock.now_s += 6.0
    breaker.before_call()  # the probe
    with pytest.raises(UpstreamUnavailableError):
        breaker.before_call()  # a concurrent caller waits for the probe's verdict
    breaker.record_failure()  # probe failed: open again for a full cool-down
    assert breaker.state == "open"
    assert breaker.retry_after_s() == 10

    clock.now_s += 10.0
    breaker.before_call()
    breaker.release()  # the probe was cancelled: the next caller probes instead
    breaker.before_call()
    breaker.record_success()
    assert (breaker.state, breaker.consecutive_failures) == ("closed", 0)


@pytest.mark.parametrize("threshold, cooldown_s", [(0, 1.0), (1, 0.0), (3, -1.0)])
def test_breaker_refuses_impossible_settings(threshold, cooldown_s):
    with pytest.raises(ValueError):
        CircuitBreaker("x", failure_threshold=threshold, cooldown_s=cooldown_s)
