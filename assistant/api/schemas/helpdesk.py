"""Bodies of the helpdesk API (`assistant.api.routes.helpdesk`): tickets, decisions, resolutions, daily counts."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class TicketCountsPublic(BaseModel):
    """Tickets of one UTC day and category, and what became of them."""

    day: str
    category: str | None
    received: int
    in_progress: int
    auto_replied: int
    escalated: int
    auto_replies_edited: int
    auto_replies_rejected: int


class HelpdeskTicket(BaseModel):
    """A ticket as the helpdesk sends it."""

    ticket_id: str = Field(min_length=1, max_length=128)
    subject: str = Field(default="", max_length=500)
    body: str = Field(default="", max_length=3_000)


class HelpdeskAnswerPublic(BaseModel):
    """The suggested answer. `abstained` is True when the documents the caller may read hold none;
    `finish_reason` is "length" when the answer was cut at the server's answer length limit (review it
    before sending), else "stop"; `usage` is the tokens its generation used, as in `/v1/chat/completions`
    (`{"prompt_tokens", "completion_tokens", "total_tokens"}`, zeros when served from the cache)."""

    ticket_id: str
    answer: str
    citations: list[dict]
    abstained: bool
    finish_reason: Literal["stop", "length"] = "stop"
    usage: dict[str, int] = Field(default_factory=dict)


class TicketCreate(BaseModel):
    """A ticket to decide. `requester`: the person's user name or e-mail in the user directory;
    `language`: `en` or `zh`, detected from the text when left out; `external_id`: the ticket system's
    ID, which serves as the idempotency key when no `Idempotency-Key` header is sent. `body` is the
    latest message (a quoted thread below it is ignored)."""

    subject: str = Field(default="", max_length=500)
    body: str = Field(default="", max_length=3_000)
    requester: str = Field(min_length=1, max_length=320)
    language: Literal["en", "zh"] | None = None
    category: str | None = Field(default=None, max_length=128)
    external_id: str | None = Field(default=None, min_length=1, max_length=255)


class TicketPublic(BaseModel):
    """The decision on a ticket. `decision`: `auto_reply` (send `reply`) or `needs_agent`; `confidence` in
    [0, 1] (docs/helpdesk.md); `reasons`: `{"code", "message"}` each; `citations` as in `/api/chat`.
    `withheld` is True when the caller may no longer read every document the reply cited
    (`assistant.core.visibility`): reply, citations and the reasons' messages are then None."""

    ticket_id: int
    external_id: str | None
    decision: Literal["auto_reply", "needs_agent"] | None
    reply: str | None
    citations: list[dict] | None
    confidence: float
    language: str
    reasons: list[dict]
    category: str | None
    requester: str
    state: str
    created_at: datetime
    decided_at: datetime | None
    withheld: bool = False


class TicketDetail(TicketPublic):
    """A stored ticket with its text, the evidence of its decision and the agent's resolution (text and
    evidence None or empty when `withheld`)."""

    subject: str | None
    body: str | None
    evidence: dict
    resolution: str | None
    resolved_by: str | None
    audience: list[str] | None
    outcome: str | None
    resolution_job_id: int | None
    resolved_at: datetime | None


class ResolutionCreate(BaseModel):
    """The agent's final answer. `audience`: ACL entries (`everyone`, `group:NAME`, `user:NAME`) that may
    read the document it becomes; `outcome` is computed from reply and resolution when left out."""

    resolution: str = Field(min_length=1, max_length=20_000)
    resolved_by: str = Field(min_length=1, max_length=255)
    audience: list[str] = Field(min_length=1, max_length=50)
    outcome: Literal["accepted", "edited", "rejected"] | None = None
