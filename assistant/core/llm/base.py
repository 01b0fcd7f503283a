"""The generation interface every backend implements."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

FinishReason = Literal["stop", "length"]


class ChatMessage(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass
class Usage:
    """Tokens one generation used, in the served model's tokens (OpenAI's `usage` fields).

    Attributes:
        prompt_tokens: tokens of the prompt (the chat template applied).
        completion_tokens: tokens generated.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """`prompt_tokens + completion_tokens`."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        """`{"prompt_tokens", "completion_tokens", "total_tokens"}`, as OpenAI's `usage` object."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass
class StreamResult:
    """How a `LLM.stream()` ended; the backend fills it in as the stream ends (exhausted or closed).

    Attributes:
        finish_reason: "stop" (the model ended its answer), "length" (cut at `max_tokens` or by the
            context window), or None while the stream runs, when the caller closed it first, or when
            the server did not say.
        usage: the tokens used; when the caller closed the stream early, those of the text it received.
    """

    finish_reason: FinishReason | None = None
    usage: Usage = field(default_factory=Usage)


def stop_list(stop: Sequence[str]) -> list[str]:
    """`stop` as the list the model servers take (`stop` of OpenAI's chat request, llama.cpp's `stop=`).

    Args:
        stop: stop sequences, in order; a single `str` counts as one sequence, not as its characters.

    Returns:
        A new list of the sequences ([] for none).

    Raises:
        ValueError: a sequence is empty (a server would stop before the first token, or refuse it).
    """
    stops = [stop] if isinstance(stop, str) else list(stop)
    if any(not s for s in stops):
        raise ValueError(f"empty stop sequence in {stops!r}")
    return stops


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
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        result: StreamResult | None = None,
        stop: Sequence[str] = (),
    ) -> AsyncIterator[str]:
        """Yield the answer as text deltas. Closing the iterator cancels the generation.

        Args:
            messages: the chat, system message first.
            max_tokens: answer length limit, in tokens.
            temperature: sampling temperature (0 = greedy).
            result: filled in when the stream ends (why, and the tokens used); None = not wanted.
            stop: stop sequences: the model server ends the generation where the first of them
                appears, yields none of its text, and says finish_reason "stop". A remote server
                may ignore them (an OpenAI-compatible one that does not implement `stop`): callers
                that must not show them check the text too.

        Raises:
            UpstreamUnavailableError: the model server cannot be reached.
            ValueError: a stop sequence is empty.
        """

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        result: StreamResult | None = None,
        stop: Sequence[str] = (),
    ) -> str:
        """The whole answer as one string; arguments and errors as `stream`."""
        stream = self.stream(messages, max_tokens=max_tokens, temperature=temperature, result=result, stop=stop)
        return "".join([d async for d in stream])

    async def aclose(self) -> None:  # noqa: B027 - optional hook: most backends hold nothing to release
        """Release the model or connection pool."""
