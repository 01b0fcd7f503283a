"""Request and response bodies of the product API."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from assistant.core.questions import MAX_QUERY_CHARS


class ChatTurn(BaseModel):
    role: str = Field(pattern="^(user|assistant)$")
    content: str = Field(max_length=20_000)


class ChatRequest(BaseModel):
    """A question. With `conversation_id` the question and its answer are stored in that conversation
    (the caller's own) and its stored turns are the history (`history` is then ignored); `regenerate`
    replaces the conversation's last question and answer by this question and a new answer."""

    question: str = Field(max_length=MAX_QUERY_CHARS)  # blank or empty: 400 from `check_query`, as on every route
    history: list[ChatTurn] = Field(default_factory=list, max_length=50)
    conversation_id: str | None = Field(default=None, max_length=36)
    regenerate: bool = False


class ConversationCreate(BaseModel):
    title: str = Field(default="", max_length=512)


class ConversationUpdate(BaseModel):
    title: str = Field(min_length=1, max_length=512)


class FeedbackCreate(BaseModel):
    """A rating of an answer: 1 (thumbs up) or -1 (thumbs down), with an optional comment and an optional
    corrected answer (what the answer should have said; the monthly refresh learns it)."""

    rating: int = Field(ge=-1, le=1)
    comment: str = Field(default="", max_length=4000)
    corrected_answer: str | None = Field(default=None, max_length=8000,
                                         description="what the answer should have said (learnt by the monthly refresh)")


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


class DocumentMetaPublic(BaseModel):
    """A document's metadata as readers get it: `source` is its path relative to its source folder and
    `route` the API route of its content; the server's own path (the `file://` URI) is not sent."""

    id: str
    source: str
    route: str
    title: str
    mime: str
    size_bytes: int
    page_count: int | None
    chunk_count: int
    updated_at: datetime | None
