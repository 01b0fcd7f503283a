"""The generation interface every backend implements."""

from __future__ import annotations

import abc
from typing import AsyncIterator, TypedDict


class ChatMessage(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


class LLM(abc.ABC):
    """A chat model that streams text deltas.

    Attributes:
        name: model name reported to clients.
        context_tokens: the model's context window (prompt + answer), in its own tokens.
    """

    name: str
    context_tokens: int

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the served model's tokenizer (an upper estimate where it is remote)."""

    @abc.abstractmethod
    def stream(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float
    ) -> AsyncIterator[str]:
        """Yield the answer as text deltas. Closing the iterator cancels the generation.

        Raises:
            UpstreamUnavailableError: the model server cannot be reached.
        """

    async def complete(self, messages: list[ChatMessage], *, max_tokens: int, temperature: float) -> str:
        """The whole answer as one string."""
        parts = [d async for d in self.stream(messages, max_tokens=max_tokens, temperature=temperature)]
        return "".join(parts)

    async def aclose(self) -> None:
        """Release the model or connection pool."""
