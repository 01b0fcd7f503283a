"""The body of the streaming chat (`assistant.api.routes.chat`): a question with its history or conversation."""

from __future__ import annotations

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
