"""The request of the OpenAI-compatible `/v1/chat/completions` (`assistant.api.routes.openai_compat`):
the fields we use of OpenAI's, the model it names, and what it changes of the server's generation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from assistant.answering.request import GenerationParams
from assistant.core.errors import InvalidRequestError

# The one model `/v1` serves: retrieval-augmented answers from the documents the caller may read.
RAG_MODEL = "assistant-rag"


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str = ""


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text (text parts joined; other parts ignored)."""
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


MAX_CLIENT_STOPS = 4  # OpenAI's limit for `stop`


class ChatCompletionRequest(BaseModel):
    """The fields we use of OpenAI's chat completion request.

    `stop` ends the answer at the caller's sequences too (the product's own always apply). What this
    endpoint cannot honour is refused with a 400 rather than silently ignored: `n` other than 1, and
    tool or function calling (the model answers from documents; it calls no tools). Other fields
    (`top_p`, `user`, `response_format`...) are accepted and ignored.
    """

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[Message] = Field(min_length=1, max_length=100)
    stream: StrictBool = False  # "yes" is a client bug to report, not a truthy value
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    n: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    functions: list[dict[str, Any]] | None = None

    def stop_sequences(self) -> tuple[str, ...]:
        """The caller's stop sequences (at most `MAX_CLIENT_STOPS`, none empty).

        Raises:
            InvalidRequestError: too many, or an empty one.
        """
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > MAX_CLIENT_STOPS:
            raise InvalidRequestError(f"'stop' has {len(stops)} sequences; at most {MAX_CLIENT_STOPS} are accepted")
        if any(not s for s in stops):
            raise InvalidRequestError("'stop' contains an empty sequence")
        return tuple(stops)

    def generation_params(self, defaults: GenerationParams) -> GenerationParams:
        """This request's generation parameters, from the server's `defaults`: `max_completion_tokens`
        (or the older `max_tokens`) capped at the server's limit, the request's `temperature` if set, and
        its stop sequences after the product's own (duplicates dropped).

        Raises:
            InvalidRequestError: a bad `stop` (see `stop_sequences`).
        """
        limit = self.max_completion_tokens or self.max_tokens
        return replace(
            defaults,
            max_tokens=min(defaults.max_tokens, limit) if limit else defaults.max_tokens,
            temperature=defaults.temperature if self.temperature is None else self.temperature,
            stop=tuple(dict.fromkeys(defaults.stop + self.stop_sequences())),
        )

    def check_supported(self) -> None:
        """Refuse what this endpoint cannot do instead of ignoring it.

        Raises:
            InvalidRequestError: `n` other than 1 (code `unsupported_parameter`), or tools / functions
                offered for the model to call (code `unsupported_parameter`).
        """
        if self.n is not None and self.n != 1:
            raise InvalidRequestError(
                f"'n' is {self.n}; this endpoint returns one choice per request (n=1)", code="unsupported_parameter"
            )
        if (self.tools and self.tool_choice != "none") or self.functions:
            raise InvalidRequestError(
                f"'{'tools' if self.tools else 'functions'}' is not supported: the '{RAG_MODEL}' model answers from "
                "documents with citations and calls no tools", code="unsupported_parameter",
            )
