"""Answer a question: retrieve what the reader may open, build the prompt, stream, cite."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator, Sequence

from assistant.answering.citations import Citation, make_citations
from assistant.answering.stops import StopFilter
from assistant.answering.packing import pack_context
from assistant.answering.prompt import NO_ANSWER, SYSTEM_PROMPT, build_messages, format_source, question_lang
from assistant.core.llm import LLM, ChatMessage
from assistant.core.principals import Principal
from assistant.retrieval import RetrievedChunk, Retriever
from assistant.retrieval.abstention import AbstentionRule

# Room kept free in the context window beyond the answer: chat-template tokens and estimate error.
TEMPLATE_MARGIN_TOKENS = 64


@dataclass
class Answer:
    """A finished answer. `abstained` is True when the documents did not contain it."""

    answer: str
    citations: list[Citation]
    chunks: list[RetrievedChunk] = field(default_factory=list)
    abstained: bool = False

    def to_dict(self) -> dict:
        return {
            "answer": self.answer,
            "abstained": self.abstained,
            "citations": [c.to_dict() for c in self.citations],
        }


class Answerer:
    """Composes retrieval and generation.

    Args:
        retriever: finds chunks the principal may read.
        llm: generation backend.
        top_k: chunks retrieved per question.
        min_relevance: cosine floor of the abstention rule (`AbstentionRule.for_model`): below it a
            chunk is no evidence that the documents answer the question.
        abstention: the rule that decides, before generation, that the documents hold no answer
            (a small model would otherwise invent one); default: the one calibrated for the
            retriever's embedding model.
        max_tokens / temperature: generation settings.
    """

    def __init__(
        self,
        *,
        retriever: Retriever,
        llm: LLM,
        top_k: int = 5,
        min_relevance: float | None = None,
        abstention: AbstentionRule | None = None,
        max_tokens: int = 320,
        temperature: float = 0.1,
    ):
        self.retriever = retriever
        self.llm = llm
        self.top_k = top_k
        self.abstention = abstention or AbstentionRule.for_model(
            getattr(retriever.embedder, "name", ""), min_relevance=min_relevance
        )
        self.max_tokens = max_tokens
        self.temperature = temperature

    def prepare(
        self, question: str, *, principal: Principal, history: Sequence[ChatMessage] = ()
    ) -> tuple[list[RetrievedChunk], list[ChatMessage] | None]:
        """Retrieve and build the prompt. Returns `(sources, messages)`; messages is None to abstain."""
        retrieval = self.retriever.search(question, principal=principal, top_k=self.top_k)
        chunks = retrieval.chunks
        if self.abstention.abstains(retrieval):
            return chunks, None
        budget = (
            self.llm.context_tokens
            - self.max_tokens
            - self.llm.count_tokens(SYSTEM_PROMPT)
            - self.llm.count_tokens(question)
            - sum(self.llm.count_tokens(m["content"]) for m in history)
            - TEMPLATE_MARGIN_TOKENS
        )
        sources = pack_context(
            chunks, budget_tokens=max(budget, 0), count_tokens=self.llm.count_tokens, format_source=format_source
        )
        if not sources:
            return chunks, None
        return sources, build_messages(question, sources, history)

    async def stream(
        self, question: str, *, principal: Principal, history: Sequence[ChatMessage] = ()
    ) -> AsyncIterator[dict]:
        """Events: `{"type": "token", "text"}` as generated, then `{"type": "citations", "citations"}`,
        then `{"type": "done", "answer", "abstained"}`."""
        sources, messages = await asyncio.to_thread(self.prepare, question, principal=principal, history=history)
        if messages is None:
            text = NO_ANSWER[question_lang(question)]
            yield {"type": "token", "text": text}
            yield {"type": "citations", "citations": []}
            yield {"type": "done", "answer": text, "abstained": True}
            return
        parts: list[str] = []
        async for text in self._generate(messages):
            parts.append(text)
            yield {"type": "token", "text": text}
        answer = "".join(parts).strip()
        citations = make_citations(answer, sources)
        yield {"type": "citations", "citations": [c.to_dict() for c in citations]}
        yield {"type": "done", "answer": answer, "abstained": False}

    async def answer(
        self, question: str, *, principal: Principal, history: Sequence[ChatMessage] = ()
    ) -> Answer:
        """The whole answer with its citations (non-streaming)."""
        sources, messages = await asyncio.to_thread(self.prepare, question, principal=principal, history=history)
        if messages is None:
            return Answer(NO_ANSWER[question_lang(question)], [], sources, abstained=True)
        text = "".join([t async for t in self._generate(messages)]).strip()
        return Answer(text, make_citations(text, sources), sources)

    async def _generate(self, messages: list[ChatMessage]) -> AsyncIterator[str]:
        """The model's deltas up to the first stop sequence; the upstream stream is closed there."""
        stops = StopFilter()
        stream = self.llm.stream(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        try:
            async for delta in stream:
                text = stops.push(delta)
                if text:
                    yield text
                if stops.stopped:
                    break
            tail = stops.flush()
            if tail:
                yield tail
        finally:
            await stream.aclose()
