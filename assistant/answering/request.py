"""What one request brings to `Answerer.stream`/`answer` besides its question: how to generate, and
where to report what the reader was shown.

`GenerationParams` is a value: the server's own come from settings (`GenerationParams.from_settings`),
a client's are derived from them (the OpenAI route's `ChatCompletionRequest.generation_params`, as
vLLM's protocol objects build its `SamplingParams`). The answer cache holds answers generated with the
server's parameters only, so a request is served from it or stored in it only when its parameters
equal the answerer's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from assistant.answering.stops import STOP_SEQUENCES
from assistant.core.principals import Principal

if TYPE_CHECKING:
    from assistant.core.settings import Settings


@dataclass(frozen=True)
class GenerationParams:
    """How one answer is generated.

    Attributes:
        max_tokens: answer length limit, in the served model's tokens (>= 1); the prompt's budget
            keeps this much of the context window free.
        temperature: sampling temperature in [0, 2] (0 = greedy).
        stop: stop sequences, in order: the product's `STOP_SEQUENCES`, then any a caller adds. The
            backend ends the generation at the first of them and `StopFilter` cuts there as well.

    Raises:
        ValueError: `max_tokens` below 1, a temperature outside [0, 2], or an empty stop sequence.
    """

    max_tokens: int = 320
    temperature: float = 0.1
    stop: tuple[str, ...] = STOP_SEQUENCES

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")
        if isinstance(self.stop, str) or any(not s for s in self.stop):
            raise ValueError(f"stop must be a tuple of non-empty sequences, got {self.stop!r}")

    @classmethod
    def from_settings(cls, settings: Settings) -> GenerationParams:
        """The server's parameters: `ASSISTANT_LLM_MAX_TOKENS`, `ASSISTANT_LLM_TEMPERATURE` and the
        product's stop sequences."""
        return cls(max_tokens=settings.llm.max_tokens, temperature=settings.llm.temperature)


class AuditSink(Protocol):
    """Where one request's answering reports the chunks its reader was shown, as it happens.

    The API writes an audit row per call (`assistant.api.routes.chat.ChatAudit`); a caller without
    an audit trail (the CLI, evaluation) passes none.
    """

    def retrieved(
        self, query: str, *, principal: Principal, chunk_ids: list[str], doc_ids: list[str] | None = None
    ) -> None:
        """The retrieval for `query` (the question, or its standalone rewrite) returned `chunk_ids`
        of documents `doc_ids`, best first. Called before generation, so the record exists even when
        generation fails."""

    def served_from_cache(
        self, question: str, *, principal: Principal, chunk_ids: list[str], doc_ids: list[str] | None = None
    ) -> None:
        """`question` was answered from the answer cache (no retrieval ran); the answer cites `chunk_ids`
        of documents `doc_ids`."""
