"""Streaming chat: server-sent events `token`..., then `citations`, then `done` (or `error`)."""

from __future__ import annotations

import copy
import logging
from typing import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas import ChatRequest
from assistant.api.sse import SSE_HEADERS, sse_event
from assistant.core.auth.audit import record_event
from assistant.core.errors import AssistantError

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
        record_event(
            self._db, principal=principal, action="chat", query=query,
            chunk_ids=[c.chunk_id for c in chunks], details=self._details,
        )
        return chunks

    def __getattr__(self, name: str):
        return getattr(self._retriever, name)


@router.post("/chat")
async def chat(body: ChatRequest, assistant: AssistantDep, principal: PrincipalDep, request: Request) -> StreamingResponse:
    """Answer `question` from the documents the caller may read, as server-sent events; audited."""
    history = [{"role": t.role, "content": t.content} for t in body.history]
    answerer = copy.copy(assistant.answerer)  # shallow: the same models, this request's audited retriever
    answerer.retriever = _AuditedRetriever(
        assistant.answerer.retriever, db=assistant.resources.db, details={"auth": request.state.auth_method}
    )

    async def events() -> AsyncIterator[str]:
        try:
            async for event in answerer.stream(body.question, principal=principal, history=history):
                kind = event.pop("type")
                yield sse_event(kind, event)
        except AssistantError as exc:
            yield sse_event("error", {"code": exc.code, "message": exc.message})
        except Exception as exc:  # the stream has started: report in-band, never hang the client
            log.exception("chat stream failed")
            yield sse_event("error", {"code": "internal_error", "message": f"{type(exc).__name__}"})

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
