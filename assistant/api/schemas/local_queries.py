"""Bodies of the command line's searches and questions handed to the server (`assistant.api.routes.local_queries`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.core.questions import MAX_QUERY_CHARS


class LocalQuery(BaseModel):
    data_dir: str = Field(max_length=4096, description="the caller's data folder, resolved: it must be the server's")
    as_user: str | None = Field(default=None, max_length=255, description="`--as`: act as this user (None: anonymous)")


class LocalSearch(LocalQuery):
    query: str = Field(max_length=MAX_QUERY_CHARS)
    top_k: int = Field(default=10, ge=1, le=50)


class LocalQuestion(LocalQuery):
    question: str = Field(max_length=MAX_QUERY_CHARS)
    stream: bool = Field(default=True, description="events as JSON lines (False: the whole answer as one object)")
