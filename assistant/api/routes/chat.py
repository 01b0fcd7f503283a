"""Streaming chat: server-sent events `sources`, `status`, the draft (`token`, `sentence`), its check
(`revise` or `replace`), then `citations` and `done` (or `error`); a question that names a
conversation is stored there with its answer."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from assistant.adapters.store import record_answer_adapter
from assistant.answering.events import Citations, Done, Error, Token
from assistant.answering.resubmission import QuestionsInFlight
from assistant.answering.store import Exchange, MessagePublic, add_answer, get_conversation, start_exchange
from assistant.api.audit_origin import request_origin
from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas.chat import ChatRequest
from assistant.api.sse import SSE_HEADERS, paced_stream, render_sse_events
from assistant.compliance.audit import record_event
from assistant.composition import Assistant
from assistant.core.db.session import Database
from assistant.core.db.usage import record_usage
from assistant.core.errors import AssistantError
from assistant.core.principals import Principal
from assistant.core.questions import check_query

router = APIRouter(prefix="/api")
log = logging.getLogger(__name__)


class ChatAudit:
    """One request's audit trail, as `Answerer.stream`'s `audit` sink (`AuditSink`): an `audit_events`
    row of action `chat` per retrieval, with the chunk IDs the reader was shown, and one per answer
    served from the answer cache (details `cached: true`, the chunks it cites).

    Rows are written as it happens, so a retrieval's row exists even when generation fails afterwards.

    Args:
        db: the SQL database holding `audit_events`.
        details: recorded with every row (the auth method, the endpoint, a ticket ID...).
    """

    def __init__(self, db: Database, *, details: dict, origin: dict | None = None):
        self._db = db
        self._details = details
        self._origin = origin or {}

    def retrieved(
        self, query: str, *, principal: Principal, chunk_ids: list[str], doc_ids: list[str] | None = None
    ) -> None:
        record_event(
            self._db, principal=principal, action="chat", query=query, chunk_ids=chunk_ids, doc_ids=doc_ids or [],
            details=self._details, **self._origin,
        )

    def served_from_cache(
        self, question: str, *, principal: Principal, chunk_ids: list[str], doc_ids: list[str] | None = None
    ) -> None:
        record_event(
            self._db, principal=principal, action="chat", query=question, chunk_ids=chunk_ids, doc_ids=doc_ids or [],
            details={**self._details, "cached": True}, **self._origin,
        )


def request_audit(assistant: Assistant, request: Request, **details) -> ChatAudit:
    """The audit trail of this request (`request.state.auth_method` is always recorded, with the
    client's address and the request ID: `request_origin`).

    Args:
        details: extra audit details, e.g. `endpoint="helpdesk"`.
    """
    return ChatAudit(
        assistant.resources.db, details={"auth": request.state.auth_method, **details}, origin=request_origin(request)
    )


def replayed_answer(answer: MessagePublic, conversation_id: str) -> list[tuple[str, dict]]:
    """The events that give a resubmitted question its stored answer (`answering.resubmission`): the
    whole text at once (`replace`), its `citations`, and `done` with `replayed: true` and the answer's
    `message_id`."""
    return [
        ("replace", {"text": answer.content}),
        ("citations", {"citations": answer.citations}),
        ("done", {"answer": answer.content, "abstained": answer.abstained, "cached": True, "finish_reason": "stop",
                  "usage": None, "replayed": True, "conversation_id": conversation_id, "message_id": answer.id}),
    ]


def questions_in_flight(request: Request) -> QuestionsInFlight:
    """This app's `QuestionsInFlight` (made on first use)."""
    state = request.app.state
    if not hasattr(state, "questions_in_flight"):
        state.questions_in_flight = QuestionsInFlight()
    return state.questions_in_flight


@router.post("/chat")
async def chat(
    body: ChatRequest, assistant: AssistantDep, principal: PrincipalDep, request: Request,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> StreamingResponse:
    """Answer `question` from the documents the caller may read, as server-sent events; audited.

    The events are `Answerer.stream`'s with its draft (docs/architecture.md, "Chat events"): `sources` and
    `status` as soon as retrieval ends, draft `token`s as the model writes them, `sentence` per completed
    sentence, `status` checking, then `revise` per sentence (its checked text, "" when withdrawn) or one
    `replace` (the whole answer replaced: a quote, or "not found"), `citations`, then `done` with
    `answer` (the checked text), `abstained`, `cached`, `finish_reason` ("length" when the answer was
    cut), `usage` (tokens) and `closest` (documents to open, with a "not found"). With `conversation_id`, the question is
    stored before the stream starts and the answer with its citations before `done`, which then also
    carries `conversation_id` and `message_id` (the answer's ID, to rate it).

    One question sent twice into a conversation is stored once (`answering.resubmission`): send an
    `Idempotency-Key` header per question (the web app does); a resubmission already answered gets the
    stored answer (`replayed_answer`).

    Raises:
        NotFoundError: `conversation_id` names no conversation of the caller's (404, before streaming).
        ConflictError: `question_in_progress`, the same question is being answered (409).
        OverloadedError: too many requests wait for the model (429 with Retry-After, before streaming).
    """
    check_query(body.question)  # a blank question is a 400 here, not an error event inside a 200 stream
    db = assistant.resources.db
    conversation_id = body.conversation_id
    if conversation_id is not None:
        await run_in_threadpool(get_conversation, db, conversation_id, user_id=principal.user_id)
    ticket = assistant.answerer.admit(principal)
    history = [{"role": t.role, "content": t.content} for t in body.history]
    in_flight = questions_in_flight(request)
    question_id: int | None = None
    if conversation_id is not None:
        def store_question() -> Exchange:
            with in_flight.lock:  # the check and the insert of two copies cannot interleave
                exchange = start_exchange(
                    db, conversation_id, user_id=principal.user_id, question=body.question,
                    regenerate=body.regenerate, idempotency_key=idempotency_key, in_flight=in_flight,
                )
                if exchange.answered is None:
                    in_flight.add(exchange.question_id)
                return exchange

        try:
            exchange = await run_in_threadpool(store_question)
        except BaseException:
            if ticket:
                ticket.close()
            raise
        if exchange.answered is not None:
            if ticket:
                ticket.close()
            replay = replayed_answer(exchange.answered, exchange.conversation_id)
            return StreamingResponse(iter([render_sse_events(replay)]), media_type="text/event-stream", headers=SSE_HEADERS)
        history = exchange.history
        question_id = exchange.question_id
    if body.regenerate:  # a new answer, not the cached one the reader asked to replace
        await run_in_threadpool(assistant.answerer.forget_answer, body.question, principal=principal)
    audit = request_audit(assistant, request)

    async def events() -> AsyncIterator[tuple[str, dict]]:
        answering = assistant.answerer.stream(
            body.question, principal=principal, history=history, ticket=ticket, audit=audit, draft=True
        )
        citations: list[dict] = []
        started = time.perf_counter()
        try:
            async for event in answering:
                if type(event) is Token:  # most events: a draft token, nothing to record
                    yield "token", {"text": event.text}
                    continue
                data = event.to_dict()
                if isinstance(event, Citations):
                    citations = event.citations
                if isinstance(event, Done) and conversation_id is None:  # counted where no message row counts it
                    await run_in_threadpool(
                        lambda: record_usage(db, endpoint="chat", abstained=event.abstained,
                                             duration_s=time.perf_counter() - started)
                    )
                if isinstance(event, Done) and conversation_id is not None:
                    stored = await run_in_threadpool(
                        add_answer, db, conversation_id, user_id=principal.user_id, answer=event.answer,
                        citations=citations, abstained=event.abstained,
                    )
                    data = {**data, "conversation_id": conversation_id, "message_id": stored.id}
                    if event.adapter:  # which LoRA adapter wrote it (canary against live feedback)
                        await run_in_threadpool(record_answer_adapter, db, stored.id, event.adapter)
                yield event.name, data
        except AssistantError as exc:
            yield Error(exc.code, exc.message).sse()
        except Exception as exc:  # the stream has started: report in-band, never hang the client
            log.exception("chat stream failed")
            yield Error("internal_error", f"{type(exc).__name__}").sse()
        finally:
            if question_id is not None:
                in_flight.discard(question_id)

    settings = request.app.state.settings
    body_stream = paced_stream(
        events(), render=render_sse_events, heartbeat_s=settings.server.sse_heartbeat_s,
        coalesce_s=settings.server.sse_coalesce_ms / 1000,
    )
    def finish() -> None:  # also when the client left before the stream started
        if ticket:
            ticket.close()
        if question_id is not None:
            in_flight.discard(question_id)

    # The ticket is closed by the stream; the background task also closes it if the client left first.
    return StreamingResponse(
        body_stream, media_type="text/event-stream", headers=SSE_HEADERS, background=BackgroundTask(finish),
    )
