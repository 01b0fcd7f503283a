"""Searches and questions handed over by the command line on the server's own machine (`assistant
search` and `assistant ask` while `assistant serve` runs for the same data folder): the server has
the models loaded and holds the embedded vector store, so the command answers in a second instead of
loading them. Admission as `local_ingest`: loopback callers with the local token only.

The caller acts as the command line does: as the user named by `--as`, else as the anonymous reader
who sees only the documents open to everyone. Each search is audited as `POST /api/search`'s.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from assistant.answering.events import Citations, Done, Replace, Token
from assistant.answering.hits import hit_rows
from assistant.api.audit_origin import request_origin
from assistant.api.deps import AssistantDep
from assistant.api.routes.local_ingest import require_local
from assistant.api.schemas.local_queries import LocalQuery, LocalQuestion, LocalSearch
from assistant.compliance.audit import record_event
from assistant.composition import Assistant
from assistant.core.db.identity import load_principal
from assistant.core.db.usage import record_usage
from assistant.core.errors import AssistantError, AuthenticationError
from assistant.core.principals import ANONYMOUS, Principal
from assistant.core.questions import check_query

router = APIRouter(prefix="/api/local", include_in_schema=False, dependencies=[Depends(require_local)])
AUTH_METHOD = "cli"  # the command line, as `record_event` names it


async def _principal(assistant: Assistant, body: LocalQuery) -> Principal:
    """The principal `body` acts as, once its data folder is found to be the server's.

    Raises:
        AuthenticationError: another data folder (401: the command line then runs in process).
    """
    if Path(body.data_dir) != assistant.resources.settings.storage.data_dir.resolve():
        raise AuthenticationError(f"this server serves another data folder than {body.data_dir}")
    if body.as_user is None:
        return ANONYMOUS
    return await run_in_threadpool(load_principal, assistant.resources.db, body.as_user)


@router.post("/search")
async def local_search(body: LocalSearch, assistant: AssistantDep, request: Request) -> list[dict[str, Any]]:
    """`assistant search`'s rows (`hit_rows`), searched as `POST /api/search` searches.

    Raises:
        AuthenticationError: the body's `data_dir` is not the server's (401).
        InvalidRequestError: a blank query, or a blank `as_user` (400).
        NotFoundError: no such user, or a disabled one (404).
    """
    check_query(body.query)
    principal = await _principal(assistant, body)
    chunks = await assistant.answerer.search(body.query, principal=principal, top_k=body.top_k)
    await run_in_threadpool(
        record_event, assistant.resources.db, principal=principal, action="search", query=body.query,
        chunk_ids=[c.chunk_id for c in chunks], doc_ids=[c.doc_id for c in chunks],
        details={"auth": AUTH_METHOD, "top_k": body.top_k}, **request_origin(request, auth_method=AUTH_METHOD),
    )
    return hit_rows(chunks)


@router.post("/ask", response_model=None)
async def local_ask(body: LocalQuestion, assistant: AssistantDep) -> dict[str, Any] | StreamingResponse:
    """`assistant ask`: with `stream`, JSON lines `{"event": "token"|"replace", "text"}`, `{"event":
    "citations", "citations"}` and at the end `{"event": "done"}` or `{"event": "error", "code",
    "message"}`; without, the answer's `to_dict()` (`assistant ask --json`).

    Raises:
        InvalidRequestError, NotFoundError: as `local_search`.
        OverloadedError: too many questions wait for the model (429).
    """
    check_query(body.question)
    principal = await _principal(assistant, body)
    ticket = assistant.answerer.admit(principal)
    started = time.perf_counter()

    def counted(abstained: bool) -> None:  # in the quality view's usage, as `cli`
        record_usage(assistant.resources.db, endpoint="cli", abstained=abstained, duration_s=time.perf_counter() - started)

    if not body.stream:
        result = await assistant.answerer.answer(body.question, principal=principal, ticket=ticket)
        await run_in_threadpool(counted, result.abstained)
        return result.to_dict()

    async def lines() -> AsyncIterator[str]:
        try:
            async for event in assistant.answerer.stream(body.question, principal=principal, ticket=ticket):
                if isinstance(event, Token | Replace):
                    yield json.dumps({"event": event.name, "text": event.text}, ensure_ascii=False) + "\n"
                elif isinstance(event, Citations):
                    yield json.dumps({"event": "citations", "citations": event.citations}, ensure_ascii=False) + "\n"
                elif isinstance(event, Done):
                    await run_in_threadpool(counted, event.abstained)
            yield json.dumps({"event": "done"}) + "\n"
        except AssistantError as exc:
            yield json.dumps({"event": "error", "code": exc.code, "message": exc.message}, ensure_ascii=False) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")
