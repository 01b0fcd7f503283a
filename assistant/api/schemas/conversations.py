"""Bodies of a reader's conversations (`assistant.api.routes.conversations`): create, rename, rate an
answer. Conversations, messages and ratings as returned are the chat store's dataclasses
(`assistant.answering.store`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
