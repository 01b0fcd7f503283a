"""The events of an answer as it is found, written and checked: one frozen class per event type.

`Answerer.stream` yields them (docs/architecture.md, "Chat events", says when each comes); the faces
send them: `POST /api/chat` as server-sent events named `name` whose data is `to_dict()` (the wire
format the web chat reads), `/v1/chat/completions` as OpenAI chunks, the CLI and the helpdesk read
their fields. `Retrieved` is internal to the answerer (the chunks found, before they are numbered
sources) and never sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from assistant.core.llm import FinishReason, Usage
from assistant.retrieval import RetrievedChunk


class SentEvent:
    """What every event a client is sent has: its `name` (the SSE event's) and its data (`to_dict`)."""

    name: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """The event's JSON data, as `POST /api/chat` sends it."""
        raise NotImplementedError

    def sse(self) -> tuple[str, dict[str, Any]]:
        """`(name, to_dict())`: the SSE event as `api.sse.render_sse_events` takes it."""
        return self.name, self.to_dict()


@dataclass(frozen=True)
class Retrieved:
    """Internal: the chunks an answer is written from (`sources`, prompt order), or with `preliminary`
    those found before the final search ends (shown while `stage` runs: "translating", "reading")."""

    sources: list[RetrievedChunk]
    preliminary: bool = False
    stage: str | None = None


@dataclass(frozen=True)
class Sources(SentEvent):
    """The numbered sources of the prompt (`citations.source_entries`, no text); `preliminary` ones are
    replaced by the next `Sources`."""

    name: ClassVar[str] = "sources"
    sources: list[dict]
    preliminary: bool = False

    def to_dict(self) -> dict[str, Any]:
        """`{"sources": [...]}`, with `"preliminary": true` when preliminary."""
        return {"sources": self.sources, "preliminary": True} if self.preliminary else {"sources": self.sources}


@dataclass(frozen=True)
class Status(SentEvent):
    """What the answer waits for: `stage` "translating", "reading" (with `sources`, how many), "writing"
    (at the first token) or "checking" (with `sentences`, how many are checked)."""

    name: ClassVar[str] = "status"
    stage: str
    sources: int | None = None
    sentences: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """`{"stage"}`, with `"sources"` and `"sentences"` where they are set."""
        data: dict[str, Any] = {"stage": self.stage}
        if self.sources is not None:
            data["sources"] = self.sources
        if self.sentences is not None:
            data["sentences"] = self.sentences
        return data


@dataclass(frozen=True)
class Token(SentEvent):
    """Text of the answer: a delta of the draft as the model writes it, or (without a draft) the checked answer."""

    name: ClassVar[str] = "token"
    text: str

    def to_dict(self) -> dict[str, Any]:
        """`{"text"}`."""
        return {"text": self.text}


@dataclass(frozen=True)
class DraftSentence(SentEvent):
    """Sentence `index` (0-based) of the draft is complete and shows `text`; the draft after it is `rest`."""

    name: ClassVar[str] = "sentence"
    index: int
    text: str
    rest: str

    def to_dict(self) -> dict[str, Any]:
        """`{"index", "text", "rest"}`."""
        return {"index": self.index, "text": self.text, "rest": self.rest}


@dataclass(frozen=True)
class Revise(SentEvent):
    """After the check, sentence `index` of the draft becomes `text` ("" when it was withdrawn)."""

    name: ClassVar[str] = "revise"
    index: int
    text: str

    @property
    def state(self) -> str:
        """`kept`, or `withdrawn` when `text` is blank."""
        return "kept" if self.text.strip() else "withdrawn"

    def to_dict(self) -> dict[str, Any]:
        """`{"index", "text", "state"}`."""
        return {"index": self.index, "text": self.text, "state": self.state}


@dataclass(frozen=True)
class Replace(SentEvent):
    """`text` replaces everything sent of the answer before it (a quote, "not found", the language note;
    "" clears a draft before a language retry)."""

    name: ClassVar[str] = "replace"
    text: str

    def to_dict(self) -> dict[str, Any]:
        """`{"text"}`."""
        return {"text": self.text}


@dataclass(frozen=True)
class Citations(SentEvent):
    """The sources the checked answer cites (`Citation.to_dict` each)."""

    name: ClassVar[str] = "citations"
    citations: list[dict]

    def to_dict(self) -> dict[str, Any]:
        """`{"citations": [...]}`."""
        return {"citations": self.citations}


@dataclass(frozen=True)
class Done(SentEvent):
    """The last event: the checked `answer` and what became of it.

    Attributes:
        answer: the checked text (the tokens joined, or the replacement).
        abstained: the documents did not hold the answer ("not found").
        cached: served from the answer cache.
        finish_reason: "length" when the answer was cut at `max_tokens`, else "stop".
        usage: tokens of this request's answer generation (zeros when no model ran).
        citations: the `Citations` event's, for callers that read only `Done` (not sent with it).
        grounding: `grounded_stream.grounding_report` (or `part_answers.combined_grounding`); None
            when no model generated the answer.
        parts: a question of several parts: `[{"text", "question", "query", "covered", "chunk_ids",
            "grounding"}]` per part (`part_answers`); None otherwise.
        closest: documents to open with a "not found" (`citations.closest_documents`); None = not sent.
        quoted: a quote of a passage replaced the model's answer; None = not sent.
        adapter: the LoRA adapter that wrote the answer (None: the base model); not sent.
    """

    name: ClassVar[str] = "done"
    answer: str
    abstained: bool
    cached: bool
    finish_reason: FinishReason
    usage: Usage
    citations: list[dict]
    grounding: dict | None = None
    parts: list[dict] | None = None
    closest: list[dict] | None = None
    quoted: bool | None = None
    adapter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """`{"answer", "abstained", "cached", "finish_reason", "usage"}`, then `"grounding"`, `"parts"`,
        `"closest"` and `"quoted"` where they are set; never `citations` or `adapter`."""
        data: dict[str, Any] = {
            "answer": self.answer, "abstained": self.abstained, "cached": self.cached,
            "finish_reason": self.finish_reason, "usage": self.usage.to_dict(),
        }
        for key in ("grounding", "parts", "closest", "quoted"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data


@dataclass(frozen=True)
class Error(SentEvent):
    """The answer failed after its stream started: `code` (an `AssistantError` code, or "internal_error") and `message`."""

    name: ClassVar[str] = "error"
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        """`{"code", "message"}`."""
        return {"code": self.code, "message": self.message}


# What a reader's client is sent, in the order docs/architecture.md gives.
AnswerEvent = Sources | Status | Token | DraftSentence | Revise | Replace | Citations | Done | Error
