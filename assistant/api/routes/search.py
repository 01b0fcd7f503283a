"""Search: the chunks the caller may read, best first. Each search is written to the audit log."""

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from assistant.answering.citations import document_route
from assistant.answering.injection import without_instructions
from assistant.api.audit_origin import request_origin
from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas.search import SearchHitPublic, SearchRequest
from assistant.compliance.audit import record_event
from assistant.core.questions import check_query

router = APIRouter(prefix="/api")


@router.post("/search", response_model=list[SearchHitPublic])
async def search(
    body: SearchRequest, assistant: AssistantDep, principal: PrincipalDep, request: Request
) -> list[SearchHitPublic]:
    """The `top_k` chunks best matching `query` among those the caller may read, searched as a chat
    question would be (`Answerer.search`: a Chinese query with its translation)."""
    check_query(body.query)  # a blank query is a 400, as for chat
    chunks = await assistant.answerer.search(body.query, principal=principal, top_k=body.top_k)
    await run_in_threadpool(
        record_event, assistant.resources.db, principal=principal, action="search", query=body.query,
        chunk_ids=[c.chunk_id for c in chunks], doc_ids=[c.doc_id for c in chunks],
        details={"auth": request.state.auth_method, "top_k": body.top_k}, **request_origin(request),
    )
    return [
        SearchHitPublic(
            source=c.source, route=document_route(c.doc_id), chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title,
            heading=c.heading, page=c.page, score=c.score, text=without_instructions(c.text),
        )
        for c in chunks
    ]
