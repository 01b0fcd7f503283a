"""The queries on answer usage: answers given outside a conversation (`/api/chat` without one, `/v1`,
the helpdesk, `assistant ask`), counted by the quality view beside the conversations' messages. No text is kept."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from assistant.core.db.models import AnswerUsage
from assistant.core.db.session import Database

# Where an answer outside a conversation was asked.
ENDPOINTS = ("chat", "v1", "helpdesk", "helpdesk_tickets", "cli")


def record_usage(db: Database, *, endpoint: str, abstained: bool, duration_s: float) -> None:
    """Count one answer given outside a conversation.

    Args:
        endpoint: one of `ENDPOINTS`.
        abstained: the answer was "not found".
        duration_s: seconds from the question to the answer.

    Raises:
        ValueError: an unknown endpoint (a programming error).
    """
    if endpoint not in ENDPOINTS:
        raise ValueError(f"usage endpoint {endpoint!r} is not one of {', '.join(ENDPOINTS)}")
    with db.session() as session:
        session.add(AnswerUsage(endpoint=endpoint, abstained=bool(abstained), duration_s=max(0.0, float(duration_s))))


def usage_since(db: Database, since: datetime) -> list[tuple[str, bool, datetime]]:
    """`(endpoint, abstained, at)` of every answer counted since `since`, oldest first."""
    with db.session() as session:
        return [(endpoint, abstained, at) for endpoint, abstained, at in session.execute(
            select(AnswerUsage.endpoint, AnswerUsage.abstained, AnswerUsage.at)
            .where(AnswerUsage.at >= since).order_by(AnswerUsage.id)
        )]
