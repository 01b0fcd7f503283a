"""The search request and its hits (`assistant.api.routes.search`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.core.questions import MAX_QUERY_CHARS


class SearchRequest(BaseModel):
    query: str = Field(max_length=MAX_QUERY_CHARS)  # blank or empty: 400 from `check_query`
    top_k: int = Field(default=10, ge=1, le=50)


class SearchHitPublic(BaseModel):
    """A search hit as readers get it: `source` is the document's path relative to its source folder and
    `route` the API route of the document (`/api/documents/{doc_id}/content`); never a server path."""

    source: str
    route: str
    chunk_id: str
    doc_id: str
    title: str
    heading: str
    page: int | None
    score: float
    text: str
