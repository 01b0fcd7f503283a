"""Request and response bodies of the product API."""

from __future__ import annotations

from pydantic import BaseModel, Field

from assistant.core.questions import MAX_QUERY_CHARS


class ChatTurn(BaseModel):
    role: str = Field(pattern="^(user|assistant)$")
    content: str = Field(max_length=20_000)


class ChatRequest(BaseModel):
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    history: list[ChatTurn] = Field(default_factory=list, max_length=50)


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: int = Field(default=10, ge=1, le=50)


class SearchHitPublic(BaseModel):
    source: str
    uri: str
    chunk_id: str
    doc_id: str
    title: str
    heading: str
    page: int | None
    score: float
    text: str
