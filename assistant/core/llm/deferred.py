"""An `LLM` that opens its backend on first use, so that a process that only searches never loads a model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from assistant.core.llm.base import LLM, ChatMessage, StreamResult


class DeferredLLM(LLM):
    """Serves every `LLM` call with the backend that `open_backend` returns, asked for at each call.

    Args:
        open_backend: returns the process's backend, loading it the first time (`Resources.llm`,
            which keeps it, so later calls are cheap). That owner closes it: `aclose` here closes nothing.
    """

    def __init__(self, open_backend: Callable[[], LLM]):
        self._open_backend = open_backend

    @property
    def backend(self) -> LLM:
        """The backend, loaded on first use (llama.cpp: the GGUF model, seconds; OpenAI: a client)."""
        return self._open_backend()

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.backend.name

    @property
    def context_tokens(self) -> int:  # type: ignore[override]
        return self.backend.context_tokens

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        result: StreamResult | None = None,
        stop: Sequence[str] = (),
    ) -> AsyncIterator[str]:
        return self.backend.stream(messages, max_tokens=max_tokens, temperature=temperature, result=result, stop=stop)

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        result: StreamResult | None = None,
        stop: Sequence[str] = (),
    ) -> str:
        return await self.backend.complete(
            messages, max_tokens=max_tokens, temperature=temperature, result=result, stop=stop
        )

    async def aclose(self) -> None:
        """Nothing to release: the backend belongs to whoever `open_backend` gets it from."""
