"""Helpdesk API: the ticket system posts a ticket and gets an answer with citations, or an abstention."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.routes.chat import request_audit
from assistant.core.errors import InvalidRequestError

router = APIRouter(prefix="/api/helpdesk")


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


def ticket_question(ticket: HelpdeskTicket) -> str:
    """The question asked for a ticket: its subject, then its body."""
    return "\n\n".join(part.strip() for part in (ticket.subject, ticket.body) if part.strip())


@router.post("/answer", response_model=HelpdeskAnswerPublic)
async def answer_ticket(
    body: HelpdeskTicket, assistant: AssistantDep, principal: PrincipalDep, request: Request
) -> HelpdeskAnswerPublic:
    """Answer a ticket from the documents the caller (the helpdesk's API key) may read; audited.

    Raises:
        InvalidRequestError: subject and body are both empty (400).
        OverloadedError: too many requests wait for the model (429 with Retry-After).
    """
    question = ticket_question(body)
    if not question:
        raise InvalidRequestError(f"ticket '{body.ticket_id}' has neither subject nor body")
    audit = request_audit(assistant, request, endpoint="helpdesk", ticket_id=body.ticket_id)
    ticket = assistant.answerer.admit(principal)
    result = await assistant.answerer.answer(question, principal=principal, ticket=ticket, audit=audit)
    return HelpdeskAnswerPublic(
        ticket_id=body.ticket_id, answer=result.answer, citations=[c.to_dict() for c in result.citations],
        abstained=result.abstained, finish_reason=result.finish_reason, usage=result.usage.to_dict(),
    )
