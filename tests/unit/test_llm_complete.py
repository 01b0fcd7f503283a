"""`LLM.complete` under a caller's timeout: the cancellation reaches the model's stream, which closes, so
the model stops generating. A question translation given up after its timeout must not keep the
in-process model busy before the answer (suspected in a fresh-user trial; it does not)."""

from __future__ import annotations

import asyncio

import pytest

from assistant.core.llm import LLM


class EndlessModel(LLM):
    """A model that never finishes: one delta every 10 ms until its stream is closed."""

    name = "endless"
    context_tokens = 1024

    def __init__(self) -> None:
        self.closed = False
        self.deltas = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def stream(self, messages, *, max_tokens, temperature, result=None, stop=()):
        try:
            while True:
                await asyncio.sleep(0.01)
                self.deltas += 1
                yield "word "
        finally:
            self.closed = True


def test_a_timed_out_completion_closes_the_models_stream():
    model = EndlessModel()

    async def run() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(model.complete([], max_tokens=64, temperature=0.0), timeout=0.1)
        assert model.closed
        generated = model.deltas
        await asyncio.sleep(0.1)
        assert model.deltas == generated  # nothing generated after the timeout

    asyncio.run(run())
