"""Streaming chat: server-sent events `token`..., then `citations`, then `done` (or `error`)."""

from __future__ import annotations

import copy
import logging
from typing import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas import ChatRequest
from assistant.api.sse import SSE_HEADERS, paced_stream, render_sse_events
from assistant.answering import Answerer
from assistant.composition import Assistant
from assistant.core.auth.audit import record_event
from assistant.core.errors import AssistantError
from assistant.core.questions import check_query

router = APIRouter(prefix="/api")
log = logging.getLogger(__name__)


class _AuditedRetriever:
    """Wraps the shared retriever for one request: each retrieval writes an audit row with its chunk IDs.

    Written at retrieval time, so the row exists even when generation fails afterwards.
    """

    def __init__(self, retriever, *, db, details: dict):
        self._retriever = retriever
        self._db = db
        self._details = details

    def retrieve(self, query: str, *, principal, **kwargs):
        chunks = self._retriever.retrieve(query, principal=principal, **kwargs)
        self._record(query, principal, chunks)
        return chunks

    def search(self, query: str, *, principal, **kwargs):
        retrieval = self._retriever.search(query, principal=principal, **kwargs)
        self._record(query, principal, retrieval.chunks)
        return retrieval

    def audit_cached(self, query: str, *, principal, chunk_ids: list[str]) -> None:
        """Audit an answer served from the answer cache (no retrieval ran): the chunks it cites."""
        record_event(
            self._db, principal=principal, action="chat", query=query, chunk_ids=chunk_ids,
            details={**self._details, "cached": True},
        )

    def _record(self, query: str, principal, chunks) -> None:
        record_event(
            self._db, principal=principal, action="chat", query=query,
            chunk_ids=[c.chunk_id for c in chunks], details=self._details,
        )

    def __getattr__(self, name: str):
        return getattr(self._retriever, name)


def audited_answerer(assistant: Assistant, request: Request, **details) -> Answerer:
    """The shared answerer with this request's audited retriever (a shallow copy: the same models).

    Args:
        details: extra audit details (the auth method is always recorded).
    """
    answerer = copy.copy(assistant.answerer)
    answerer.retriever = _AuditedRetriever(
        assistant.answerer.retriever, db=assistant.resources.db,
        details={"auth": request.state.auth_method, **details},
    )
    return answerer


@router.post("/chat")
async def chat(body: ChatRequest, assistant: AssistantDep, principal: PrincipalDep, request: Request) -> StreamingResponse:
    """Answer `question` from the documents the caller may read, as server-sent events; audited.

    The events are `Answerer.stream`'s: `token` (`text`)..., `citations`, then `done` with `answer`,
    `abstained`, `cached`, `finish_reason` ("length" when the answer was cut) and `usage` (tokens).

    Raises:
        OverloadedError: too many requests wait for the model (429 with Retry-After, before streaming).
    """
    check_query(body.question)  # a blank question is a 400 here, not an error event inside a 200 stream
    ticket = assistant.answerer.admit(principal)
    history = [{"role": t.role, "content": t.content} for t in body.history]
    answerer = audited_answerer(assistant, request)

    async def events() -> AsyncIterator[tuple[str, dict]]:
        try:
            async for event in answerer.stream(body.question, principal=principal, history=history, ticket=ticket):
                kind = event.pop("type")
                yield kind, event
        except AssistantError as exc:
            yield "error", {"code": exc.code, "message": exc.message}
        except Exception as exc:  # the stream has started: report in-band, never hang the client
            log.exception("chat stream failed")
            yield "error", {"code": "internal_error", "message": f"{type(exc).__name__}"}

    settings = request.app.state.settings
    body_stream = paced_stream(
        events(), render=render_sse_events, heartbeat_s=settings.sse_heartbeat_s,
        coalesce_s=settings.sse_coalesce_ms / 1000,
    )
    # The ticket is closed by the stream; the background task also closes it if the client left first.
    return StreamingResponse(
        body_stream, media_type="text/event-stream", headers=SSE_HEADERS,
        background=BackgroundTask(ticket.close) if ticket else None,
    )
