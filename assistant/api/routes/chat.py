"""Streaming chat: server-sent events `token`..., then `citations`, then `done` (or `error`)."""

from __future__ import annotations

import logging
from typing import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas import ChatRequest
from assistant.api.sse import SSE_HEADERS, sse_event
from assistant.core.errors import AssistantError

router = APIRouter(prefix="/api")
log = logging.getLogger(__name__)


@router.post("/chat")
async def chat(body: ChatRequest, assistant: AssistantDep, principal: PrincipalDep) -> StreamingResponse:
    history = [{"role": t.role, "content": t.content} for t in body.history]

    async def events() -> AsyncIterator[str]:
        try:
            async for event in assistant.answerer.stream(body.question, principal=principal, history=history):
                kind = event.pop("type")
                yield sse_event(kind, event)
        except AssistantError as exc:
            yield sse_event("error", {"code": exc.code, "message": exc.message})
        except Exception as exc:  # the stream has started: report in-band, never hang the client
            log.exception("chat stream failed")
            yield sse_event("error", {"code": "internal_error", "message": f"{type(exc).__name__}"})

    return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)
