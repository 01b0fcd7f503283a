"""Answer a question: retrieve what the reader may open, build the prompt, stream, cite."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from assistant.adapters.routing import AdapterRouter, RoutedLLM
from assistant.answering.admission import FairLimiter, Ticket
from assistant.answering.budget import plan_budget
from assistant.answering.cache import AnswerCache
from assistant.answering.citations import Citation, closest_documents, make_citations, source_entries
from assistant.answering.events import AnswerEvent, Citations, Done, Retrieved, Sources, Status, Token
from assistant.answering.focus import focused_source, question_terms
from assistant.answering.grounded_stream import GroundedStream, combined_result, grounder_for, grounding_report
from assistant.answering.markdown import tidy
from assistant.answering.packing import pack_context
from assistant.answering.part_answers import answer_parts
from assistant.answering.parts import split_question
from assistant.answering.prompt import NO_ANSWER, SYSTEM_PROMPT, build_messages, format_source
from assistant.answering.request import AuditSink, GenerationParams
from assistant.answering.rewrite import rewrite_query, translate_question
from assistant.answering.stops import STOP_SEQUENCES, StopFilter
from assistant.answering.table_answers import (
    answer_from_tables,
    cards_for_question,
    document_evidence,
    table_cards,
    table_follow_up,
)
from assistant.core import metrics
from assistant.core.language import question_language
from assistant.core.llm import LLM, ChatMessage, FinishReason, StreamResult, Usage
from assistant.core.principals import Principal
from assistant.core.questions import check_query
from assistant.retrieval import RetrievedChunk, Retriever
from assistant.retrieval.abstention import AbstentionRule

# Room kept free in the context window beyond the answer: chat-template tokens and estimate error, and
# the answer reminder and language retry instruction added to the question (`prompt.ANSWER_REMINDER`).
TEMPLATE_MARGIN_TOKENS = 128


@dataclass
class Answer:
    """A finished answer. `abstained` is True when the documents did not contain it.

    `finish_reason` is "length" when the answer was cut at `max_tokens`, else "stop"; `usage` holds
    the tokens its generation used (`Answerer.stream`'s `done` event says which are counted);
    `grounding` what grounding made of the generated answer (`grounding_report`; None when no model ran).
    """

    answer: str
    citations: list[Citation]
    chunks: list[RetrievedChunk] = field(default_factory=list)
    abstained: bool = False
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    grounding: dict | None = None

    def to_dict(self) -> dict:
        return {
            "answer": self.answer,
            "abstained": self.abstained,
            "citations": [c.to_dict() for c in self.citations],
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_dict(),
        }


# Room of a focused source in the other language than the question's, in multiples of `source_tokens`.
# It was 1.5 when such a source was focused around the words of the dictionary translation (the 1.5B model
# echoed a Chinese question given 100 tokens of an English page chosen that way, fresh-user trial). It is
# focused around the words of the chat model's translation of the question now, and at 1.5 the 194 tokens
# that the 768-token window leaves for sources held one English source: the answering page, second or
# third for 5 of the 9 declined Chinese questions about English pages, never reached the model. At 1.0
# (two sources): key fact 9 -> 12 of 21, cited answering page 12 -> 15, declined 9 -> 6, Chinese pages
# unchanged (bench/bench_crosslingual_answers.py, docs/notes/answer-grounding-investigations.md,
# "Two English sources for a Chinese question").
CROSS_LINGUAL_SOURCE_FACTOR = 1.0
# A focused source that does not fit the room the sources before it leave is focused again to that room
# (`pack_context`'s `refit`): the answering page, second or third, then reaches the 768-token window's
# prompt: held-aside answer file packed en 0.55 -> 0.60, zh 0.65 -> 0.72, key fact zh 0.50 -> 0.55, en
# 0.38 and the development split unchanged, 13-27 prompt tokens more (bench/bench_context_recall.py).
REFIT_SOURCES = True


class Answerer:
    """Composes retrieval and generation.

    Args:
        retriever: finds chunks the principal may read.
        llm: generation backend.
        top_k: chunks retrieved per question.
        abstention: the rule that decides, before generation, that the documents hold no answer
            (a small model would otherwise invent one): `AbstentionRule.for_model` of the embedding
            model that the retriever's index was built with.
        defaults: the server's generation parameters, used when a request brings none.
        limiter: admission towards the model (bounded concurrency, fair queue); None = unbounded.
        cache: answer cache for questions asked without history and with the `defaults`; None = no cache.
        rewrite: how follow-ups become standalone retrieval queries: `llm` or `rules`.
        source_tokens: cap on each source's text in the prompt (`focus.focus_text` keeps the sentences
            about the question); None = whole chunks.
        translate_questions: a Chinese question is translated into English by `llm`
            (`rewrite.translate_question`) and searched together with its translation.
        translate_timeout_s: longest wait for that translation, in seconds; then the question is searched alone.
        one_source_per_document: a document's retrieved chunks are one source in the prompt
            (`pack_context`), focused as one; None: when sources are focused (`source_tokens`).
        tables_dir: the documents' queryable tables (`Settings.tables_dir`): when the best source is a
            table card, the question is answered by a checked SELECT (`table_answers`); None: never.
        refit_sources: a focused source that does not fit the room the sources before it leave is focused
            again to that room (`pack_context`'s `refit`), instead of being left out.

    A question of several parts (`parts.split_question`, asked without history) is answered part by
    part and composed (`part_answers.answer_parts`); `split_parts` False answers it whole.
    """

    split_parts = True

    def __init__(
        self,
        *,
        retriever: Retriever,
        llm: LLM,
        top_k: int = 5,
        abstention: AbstentionRule,
        defaults: GenerationParams = GenerationParams(),
        limiter: FairLimiter | None = None,
        cache: AnswerCache | None = None,
        rewrite: str = "rules",
        source_tokens: int | None = None,
        translate_questions: bool = False,
        translate_timeout_s: float = 15.0,
        tables_dir: Path | None = None,
        one_source_per_document: bool | None = None,
        refit_sources: bool = REFIT_SOURCES,
    ):
        self.retriever = retriever
        self.llm = llm
        self.top_k = top_k
        self.abstention = abstention
        self.defaults = defaults
        self.limiter = limiter
        self.cache = cache
        self.rewrite = rewrite
        self.source_tokens = source_tokens
        self.translate_questions = translate_questions
        self.translate_timeout_s = translate_timeout_s
        self.tables_dir = tables_dir
        self.one_source_per_document = source_tokens is not None if one_source_per_document is None else one_source_per_document
        self.refit_sources = refit_sources

    def prepare(
        self,
        question: str,
        *,
        principal: Principal,
        history: Sequence[ChatMessage] = (),
        query: str | None = None,
        translation: str | None = None,
        params: GenerationParams | None = None,
        audit: AuditSink | None = None,
    ) -> tuple[list[RetrievedChunk], list[ChatMessage] | None]:
        """Retrieve with `query` (default: the question) and build the prompt within the model's context
        (history trimmed oldest first, `params.max_tokens` kept free for the answer; default: `defaults`).
        A `translation` of the query (`rewrite.translate_question`) is searched with it; the sources
        are focused on the query alone. The retrieval is reported to `audit`. Returns `(sources,
        messages)`; messages is None to abstain."""
        params = params or self.defaults
        query = query or question
        searched = f"{query} {translation}" if translation else query
        with metrics.RETRIEVAL_SECONDS.time():
            retrieval = self.retriever.search(query, principal=principal, top_k=self.top_k, translation=translation)
        chunks = retrieval.chunks
        if audit is not None:
            audit.retrieved(
                searched, principal=principal, chunk_ids=[c.chunk_id for c in chunks], doc_ids=[c.doc_id for c in chunks]
            )
        if self.abstention.abstains(retrieval):
            return chunks, None
        budget = self._budget(question, history, params)
        shape = self._focus(query, translation) if self.source_tokens else None
        sources = pack_context(
            chunks, budget_tokens=budget.sources_tokens, count_tokens=self.llm.count_tokens, format_source=format_source,
            shape=shape, one_source_per_document=self.one_source_per_document,
            refit=self._refit(shape) if shape is not None else None,
        )
        if not sources:
            return chunks, None
        return sources, build_messages(budget.question, sources, budget.history)

    def document_messages(
        self, question: str, sources: Sequence[RetrievedChunk], *, history: Sequence[ChatMessage], params: GenerationParams
    ) -> list[ChatMessage] | None:
        """The prompt for `question` over `sources` (packed by `prepare`, some of them left out), or None
        without sources (abstain)."""
        if not sources:
            return None
        budget = self._budget(question, history, params)
        return build_messages(budget.question, list(sources), budget.history)

    def _budget(self, question: str, history: Sequence[ChatMessage], params: GenerationParams):
        return plan_budget(
            question, history, context_tokens=self.llm.context_tokens, max_tokens=params.max_tokens,
            system_prompt=SYSTEM_PROMPT, count_tokens=self.llm.count_tokens, margin_tokens=TEMPLATE_MARGIN_TOKENS,
        )

    def _focus(self, question: str, translation: str | None = None):
        """A `pack_context` shape that cuts each source in `question`'s language to `source_tokens`
        around `question`'s words (`focus.focused_source`: the whole text kept in `full_text`). A source
        in the other language is cut around the words of the model's `translation` of the question, to
        `CROSS_LINGUAL_SOURCE_FACTOR` times as many tokens; without a translation it stays whole (and
        a long one may then not fit the window at all). The shape takes another cap as `max_tokens`
        (`_refit`)."""
        terms = question_terms(question, self.retriever.translate)
        lang = question_language(question)
        across = question_terms(translation) if translation else None

        def shape(chunk: RetrievedChunk, max_tokens: int | None = None) -> RetrievedChunk:
            if across is not None and chunk.lang and chunk.lang != lang:
                return focused_source(
                    chunk, across, lang=chunk.lang,
                    max_tokens=max_tokens or int(CROSS_LINGUAL_SOURCE_FACTOR * self.source_tokens),
                    count_tokens=self.llm.count_tokens,
                )
            return focused_source(
                chunk, terms, lang=lang, max_tokens=max_tokens or self.source_tokens, count_tokens=self.llm.count_tokens,
            )

        return shape

    def _refit(self, shape):
        """A `pack_context` refit: the source focused again from its whole text (`full_text`) by `shape`
        (`_focus`'s), to the room left; None when `refit_sources` is off."""
        if not self.refit_sources:
            return None
        return lambda chunk, room: shape(replace(chunk, text=chunk.full_text or chunk.text, full_text=None), room)

    async def search(self, query: str, *, principal: Principal, top_k: int = 10) -> list[RetrievedChunk]:
        """The `top_k` chunks `principal` may read that best match `query`, searched as a question is
        answered: a Chinese query with the chat model's translation when `translate_questions` is on
        (about a second on 2 cores, none after `translate_timeout_s`). For `POST /api/search` and
        `assistant search`, so that search finds what the answer would.

        Raises:
            InvalidRequestError: `query` is blank, too long or not Unicode text (`check_query`).
        """
        check_query(query)
        translation = await self.translation(query) if self.translates(query) else None
        return await asyncio.to_thread(
            lambda: self.retriever.search(
                query, principal=principal, top_k=top_k, evidence=False, translation=translation
            ).chunks
        )

    def translates(self, query: str) -> bool:
        """Whether `query` is searched with its translation (`translate_questions`, a Chinese query)."""
        return self.translate_questions and question_language(query) == "zh"

    async def translation(self, query: str, *, llm: LLM | None = None) -> str | None:
        """The chat model's English translation of the Chinese `query` (`rewrite.translate_question`),
        None when it failed or took over `translate_timeout_s`. The model is loaded (on first use)
        before the timeout starts. `llm`: the model that translates (default: `llm`, for no principal)."""
        llm = llm or self.llm
        await asyncio.to_thread(llm.count_tokens, query)
        return await translate_question(query, llm=llm, timeout_s=self.translate_timeout_s)

    def admit(self, principal: Principal) -> Ticket | None:
        """Admit one request of `principal` towards the model (before a response starts).

        Returns:
            A ticket to pass to `stream`/`answer` (which close it), or None without a limiter.

        Raises:
            OverloadedError: the queue is full (HTTP 429 with Retry-After).
        """
        return self.limiter.admit(principal.name) if self.limiter else None

    async def stream(
        self,
        question: str,
        *,
        principal: Principal,
        history: Sequence[ChatMessage] = (),
        ticket: Ticket | None = None,
        params: GenerationParams | None = None,
        audit: AuditSink | None = None,
        draft: bool = False,
    ) -> AsyncIterator[AnswerEvent]:
        """Events (`assistant.answering.events`): a `Token` with the checked answer (`GroundedStream`),
        possibly one `Replace` whose text replaces all tokens sent before it (an answer declined
        after some of it was sent), then `Citations`, then `Done` (`answer`, `abstained`, `cached`,
        `finish_reason`, `usage`); `answer` is the grounded text (the tokens joined, or the
        replacement); `grounding` (`grounding_report`: the supported share and the sentences removed)
        when the model generated it (a cached answer: the report stored with it, None in entries from
        before reports were stored), None for an abstention before generation;
        `adapter` the LoRA adapter that wrote the answer.

        `finish_reason` is "length" when the answer was cut at `max_tokens` (a cached answer keeps the
        one it was generated with), else "stop" (the model ended it, a stop sequence did, or no model
        ran). `usage` is `{"prompt_tokens", "completion_tokens", "total_tokens"}` of this request's
        answer generation, as the backend reports or counts them (`LLM.stream`): all zeros for a
        cached answer or an abstention (no generation); an LLM rewrite of a follow-up is not included.

        The answer cache serves and stores only answers to questions without history generated
        with the `defaults` (`params` None or equal to them).

        With `draft` (the web chat, docs/architecture.md "Chat events"), the sources come first, as
        `Sources` (`citations.source_entries`) with `Status("reading", sources=n)` (a Chinese question
        that is translated first sends the sources found for the question alone, `preliminary`, with
        `Status("translating")`, then the final ones), then the draft as it is written and its check
        (`GroundedStream`: `Status` writing/checking, draft `Token`s, `DraftSentence`, `Revise` or
        `Replace`); `Done` then also holds `closest` (`citations.closest_documents`) when the answer is
        "not found", and `quoted`.

        Args:
            ticket: this request's admission (`admit`); default: admitted here. Closed at the end.
            params: this request's generation parameters; default: `defaults`.
            audit: told of the retrieval (or of the cached answer served instead); None = not audited.

        Raises:
            OverloadedError: no model slot (queue full, or the wait exceeded its limit).
        """
        events = self._events(
            question, principal=principal, history=history, ticket=ticket, params=params, audit=audit, draft=draft
        )
        async for event in events:
            if isinstance(event, Retrieved):
                if draft:  # preliminary sources are replaced by the next `Sources`
                    yield Sources(source_entries(event.sources), preliminary=event.preliminary)
                    stage = event.stage if event.preliminary else "reading"
                    yield Status(stage, sources=len(event.sources))
                continue
            yield event

    async def answer(
        self,
        question: str,
        *,
        principal: Principal,
        history: Sequence[ChatMessage] = (),
        ticket: Ticket | None = None,
        params: GenerationParams | None = None,
        audit: AuditSink | None = None,
    ) -> Answer:
        """The whole answer with its citations (non-streaming); arguments and errors as `stream`."""
        sources: list[RetrievedChunk] = []
        events = self._events(question, principal=principal, history=history, ticket=ticket, params=params, audit=audit)
        async for event in events:
            if isinstance(event, Retrieved):
                sources = event.sources
            elif isinstance(event, Done):
                done = event
        citations = [Citation(**c) for c in done.citations]
        return Answer(
            done.answer, citations, sources, abstained=done.abstained, finish_reason=done.finish_reason,
            usage=Usage(done.usage.prompt_tokens, done.usage.completion_tokens), grounding=done.grounding,
        )

    def cacheable(self, *, history: Sequence[ChatMessage], params: GenerationParams) -> bool:
        """Whether the answer cache may serve and store this request's answer: a cache is configured,
        the question comes without history, and it is generated with the `defaults` (the cache's
        entries are keyed by the server's settings, `cache.index_version`)."""
        return self.cache is not None and not history and params == self.defaults

    def with_model(self, llm: LLM, *, params: GenerationParams) -> Answerer:
        """This answerer's retrieval, abstention, prompt and grounding with another model `llm` and
        `params`, without cache or admission queue: how one adapter's answers are scored against
        another's (`finetune.evaluate`)."""
        return Answerer(
            retriever=self.retriever, llm=llm, top_k=self.top_k, abstention=self.abstention, defaults=params,
            rewrite=self.rewrite, source_tokens=self.source_tokens, translate_questions=self.translate_questions,
            translate_timeout_s=self.translate_timeout_s, tables_dir=self.tables_dir,
        )

    def forget_answer(self, question: str, *, principal: Principal) -> None:
        """Drop the cached answer to `question` in `principal`'s ACL scope (from the adapter that answers
        them now), so that it is generated again: called when a reader rates an answer down (fresh-user
        trial: a wrong answer, rated down, kept being served from the cache in 0.05 s). No-op without a cache."""
        if self.cache is not None:
            self.cache.forget(question, principal=principal, adapter=self.serving_adapter(principal))

    def model_for(self, principal: Principal) -> LLM:
        """The model that answers `principal`: with adapter routing, the router's model for them
        (`AdapterRouter.for_principal`: each generation goes to their adapter, and it names the adapter
        of its last one); else `llm`."""
        return self.llm.for_principal(principal) if isinstance(self.llm, AdapterRouter) else self.llm

    def serving_adapter(self, principal: Principal) -> str | None:
        """The name of the LoRA adapter that answers `principal` now (`AdapterRouter.choose`; None: the
        base model, or a model without adapter routing). The answer cache keys its entries by it, so
        that an answer is reused only for readers whom the same adapter answers."""
        if not isinstance(self.llm, AdapterRouter):
            return None
        adapter = self.llm.choose(principal)
        return adapter.name if adapter is not None else None

    async def _events(
        self,
        question: str,
        *,
        principal: Principal,
        history: Sequence[ChatMessage],
        ticket: Ticket | None,
        params: GenerationParams | None,
        audit: AuditSink | None,
        draft: bool = False,
        query: str | None = None,
    ) -> AsyncIterator[Retrieved | AnswerEvent]:
        """`stream`'s events, the sources as internal `Retrieved` events (a first one before the answer).
        `query`: what to search for instead of the question (a part of a question, `part_answers`)."""
        check_query(question)
        started = time.perf_counter()
        llm = self.model_for(principal)  # the adapter router picks this reader's adapter
        ticket = ticket or self.admit(principal)
        history = list(history)
        params = params or self.defaults
        cache = self.cache if self.cacheable(history=history, params=params) else None
        try:
            if cache is not None:
                adapter = await asyncio.to_thread(self.serving_adapter, principal)
                hit = await asyncio.to_thread(cache.get, question, principal=principal, adapter=adapter)
                metrics.ANSWER_CACHE.labels("miss" if hit is None else "hit").inc()
                if hit is not None:
                    if audit is not None:
                        cited = [c["chunk_id"] for c in hit.citations]
                        docs = [c["doc_id"] for c in hit.citations]
                        await asyncio.to_thread(
                            audit.served_from_cache, question, principal=principal, chunk_ids=cited, doc_ids=docs
                        )
                    text = tidy(hit.answer)  # an answer cached before fences were balanced
                    yield Retrieved([])
                    yield Token(text)
                    yield Citations(hit.citations)
                    # The adapter that wrote it, and what the evidence check made of it then.
                    yield Done(text, abstained=False, cached=True, finish_reason=hit.finish_reason, usage=Usage(),
                               citations=hit.citations, grounding=hit.grounding, parts=hit.parts, quoted=hit.quoted,
                               adapter=hit.adapter)
                    return
            parts = split_question(question) if self.split_parts and not history else []
            if len(parts) > 1:  # several questions: each answered on its own, then composed (part_answers.py)
                async for event in answer_parts(
                    self, question, parts, principal=principal, ticket=ticket, params=params, audit=audit, cache=cache
                ):
                    yield event
                return
            query = query or question
            if history:
                use_llm = self.rewrite == "llm"
                if use_llm and ticket is not None:
                    await ticket.acquire()
                query = await rewrite_query(question, history, llm=llm if use_llm else None)
            translation = None
            if self.translates(query):
                # The translation waits for the chat model (a second on idle cores, up to its timeout
                # behind other answers): the sources found for the question alone are shown first, then
                # replaced by those found with its translation (issue 42: sources within 2 s).
                first = await asyncio.to_thread(
                    self.retriever.search, query, principal=principal, top_k=self.top_k, evidence=False
                )
                yield Retrieved(first.chunks, preliminary=True, stage="translating")
                if ticket is not None:
                    await ticket.acquire()
                translation = await self.translation(query, llm=llm)
            sources, messages = await asyncio.to_thread(
                self.prepare, question, principal=principal, history=history, query=query, translation=translation,
                params=params, audit=audit,
            )
            cards = table_cards(sources) if self.tables_dir is not None and messages is not None else {}
            prior = table_follow_up(history) if self.tables_dir is not None and query != question else None
            if prior is not None and prior[0] not in cards:
                # A follow-up on the previous answer's table that the condensed query misses (fresh-user
                # trial: "那Borg Metals呢？" after an English sum, searched as one mixed-language query,
                # found no card and was declined): the table is looked for with the earlier question.
                again, again_messages = await asyncio.to_thread(
                    self.prepare, question, principal=principal, history=history, query=prior[1], params=params,
                    audit=audit,
                )
                found_again = table_cards(again) if again_messages is not None else {}
                if prior[0] in found_again:
                    sources, messages, cards = again, again_messages, found_again
            earlier: str | None = None
            if cards and query != question:
                # The query was condensed from the conversation: a card found through earlier turns is
                # no evidence for this question (fresh-user trial: a password question after an asset
                # count got `12 AS password_length` beside the count, cited to the sheet). The table
                # path needs the card to be best for the question itself; else the question is
                # answered from what it finds alone, as if asked alone.
                alone_translation = None
                if self.translates(question):
                    if ticket is not None:
                        await ticket.acquire()
                    alone_translation = await self.translation(question, llm=llm)
                alone, alone_messages = await asyncio.to_thread(
                    self.prepare, question, principal=principal, history=history, query=question,
                    translation=alone_translation, params=params, audit=audit,
                )
                # A follow-up on the table of the previous answer is answered from it with the earlier
                # question beside it, not the condensed query (which added both questions' conditions:
                # "And for Delta Tools?" summed Cobalt's and Delta's stock); one that finds no card alone
                # ("那Borg Metals呢？") keeps the table when nothing of its own supports it either.
                earlier = prior[1] if prior is not None and prior[0] in cards else None
                if not cards_for_question(cards, alone) and (
                    earlier is None or document_evidence(alone, supports=self.abstention.supports)
                ):
                    earlier = None
                    if alone_messages is not None:
                        sources, messages, query, translation = alone, alone_messages, question, alone_translation
                    else:  # nothing found for the question alone: the documents without the card, or none
                        sources = document_evidence(sources)
                        messages = self.document_messages(question, sources, history=history, params=params)
                    cards = table_cards(sources) if self.tables_dir is not None and messages is not None else {}
            yield Retrieved(sources)
            if cards:  # the best evidence is a table card: one checked SELECT answers (table_answers.py)
                if ticket is not None:
                    await ticket.acquire()
                found = await answer_from_tables(
                    question if earlier else query, cards, tables_dir=self.tables_dir, llm=llm, earlier=earlier,
                    lang=question_language(question),
                )
                if not (found.abstained and found.result is None
                        and document_evidence(sources, supports=self.abstention.supports)):
                    if ticket is not None:
                        ticket.close()
                    citations = [c.to_dict() for c in found.citations]
                    if cache is not None and not found.abstained:
                        # Cached as a generated answer is (the reader's ACL scope and adapter in the key,
                        # served only while every source document keeps its version and stays readable
                        # by the asker); a re-synced workbook has a new version, so new tables.
                        adapter = llm.served if isinstance(llm, RoutedLLM) else None
                        await asyncio.to_thread(
                            cache.put, question, principal=principal, answer=found.text, citations=citations,
                            doc_ids=[s.doc_id for s in sources], finish_reason="stop", adapter=adapter,
                        )
                    yield Token(found.text)
                    yield Citations(citations)
                    yield Done(found.text, abstained=found.abstained, cached=False, finish_reason="stop",
                               usage=found.usage, citations=citations,
                               closest=closest_documents(sources) if found.abstained else None)
                    return
                # The query was refused or failed, and documents found for the question support an
                # answer too: the documents answer it, never "not found" naming the table.
            if messages is None:
                text = NO_ANSWER[question_language(question)]
                yield Token(text)
                yield Citations([])
                yield Done(text, abstained=True, cached=False, finish_reason="stop", usage=Usage(), citations=[],
                           closest=closest_documents(sources))
                return
            if ticket is not None:
                await ticket.acquire()
            # --- grounding hook (assistant/answering/grounded_stream.py): sentences checked against the
            # sources before they are sent; a `replace` event when the answer is declined afterwards.
            topic = " ".join(dict.fromkeys(t for t in (question, query, translation) if t))
            grounder = grounder_for(sources, question, topic=topic, llm=llm, translate=self.retriever.translate)
            grounded = GroundedStream(question, grounder, draft=draft)
            attempts: list[StreamResult] = []

            def generate(prompt: list[ChatMessage]) -> AsyncIterator[str]:
                attempts.append(StreamResult())
                return self._generate(llm, prompt, attempts[-1], params)

            callers_stop = any(stop not in STOP_SEQUENCES for stop in params.stop)

            def cut() -> bool:
                # At its token limit, or wherever a caller's own stop sequence ended it: either way the
                # answer may end before its first fact, and is sent as it came.
                return bool(attempts) and (attempts[-1].finish_reason == "length" or callers_stop)

            async for event in grounded.events(generate, messages, cut=cut):
                if started is not None and isinstance(event, Token):
                    metrics.FIRST_TOKEN_SECONDS.observe(time.perf_counter() - started)
                    started = None
                yield event
            generated = combined_result(attempts)
            metrics.count_tokens(generated.usage.prompt_tokens, generated.usage.completion_tokens)
            # --- end of grounding hook
            if ticket is not None:
                ticket.close()  # the model is done: free the slot before the bookkeeping below
            answer = grounded.text
            citations = [c.to_dict() for c in make_citations(answer, sources)]
            report = grounding_report(grounded.verdicts, quoted=grounded.quoted)
            # The adapter that wrote it (routing may have moved since): that of the last generation,
            # the evidence check's included.
            adapter = llm.served if isinstance(llm, RoutedLLM) else None
            if grounded.declined:
                yield Citations([])
                yield Done(answer, abstained=True, cached=False, finish_reason=generated.finish_reason,
                           usage=generated.usage, citations=[], grounding=report, closest=closest_documents(sources),
                           adapter=adapter)
                return
            if cache is not None and answer:
                await asyncio.to_thread(
                    cache.put, question, principal=principal, answer=answer, citations=citations,
                    doc_ids=[s.doc_id for s in sources], finish_reason=generated.finish_reason,
                    adapter=adapter, grounding=report, quoted=grounded.quoted,
                )
            yield Citations(citations)
            yield Done(answer, abstained=False, cached=False, finish_reason=generated.finish_reason,
                       usage=generated.usage, citations=citations, grounding=report, quoted=grounded.quoted,
                       adapter=adapter)
        finally:
            if ticket is not None:
                ticket.close()

    async def _generate(
        self, llm: LLM, messages: list[ChatMessage], result: StreamResult, params: GenerationParams
    ) -> AsyncIterator[str]:
        """`llm`'s deltas up to the first stop sequence (`params.stop`: `STOP_SEQUENCES` and a caller's),
        generated with `params.max_tokens` and `params.temperature`.

        The backend gets the stop sequences and ends the generation there itself, so that the server
        stops generating at once and reports its own finish reason and usage. `StopFilter` applies
        them once more as a safety net, for a server that ignores `stop` or does not cut exactly
        before it: the upstream stream is then closed at the stop sequence (usage is the backend's
        count of the text received, see `LLM.stream`).

        `result` is filled in once the deltas are exhausted: its `finish_reason` is "stop" when a stop
        sequence ended the answer or the backend did not say, else the backend's.
        """
        stops = StopFilter(params.stop)
        stream = llm.stream(
            messages, max_tokens=params.max_tokens, temperature=params.temperature, result=result, stop=params.stop,
        )
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
            if stops.stopped or result.finish_reason is None:
                result.finish_reason = "stop"
