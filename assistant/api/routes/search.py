"""Search: the chunks the caller may read, best first."""

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.schemas import SearchHitPublic, SearchRequest

router = APIRouter(prefix="/api")


@router.post("/search", response_model=list[SearchHitPublic])
async def search(body: SearchRequest, assistant: AssistantDep, principal: PrincipalDep) -> list[SearchHitPublic]:
    chunks = await run_in_threadpool(assistant.retriever.retrieve, body.query, principal=principal, top_k=body.top_k)
    return [
        SearchHitPublic(
            source=c.source, uri=c.uri, chunk_id=c.chunk_id, doc_id=c.doc_id, title=c.title,
            heading=c.heading, page=c.page, score=c.score, text=c.text,
        )
        for c in chunks
    ]
