"""The SQL reads a finetune dataset is built from: answers rated up, resolved helpdesk tickets, and the
documents added or changed since the last refresh."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from assistant.core.db.models import Document, Feedback, HelpdeskTicket, Message
from assistant.core.db.session import Database


@dataclass(frozen=True)
class RatedAnswer:
    """An answer rated up: the question, the answer, the chunk IDs it cited and the documents they
    belong to (from the message's citations; empty once the conversation was deleted)."""

    feedback_id: int
    question: str
    answer: str
    chunk_ids: list[str]
    doc_ids: list[str]


@dataclass(frozen=True)
class ResolvedTicket:
    """A resolved helpdesk ticket whose final answer the agent accepted or edited; `audience` is the ACL
    of the resolution (who may read it)."""

    ticket_id: int
    question: str
    answer: str
    audience: list[str]


@dataclass(frozen=True)
class ChangedDocument:
    """A document indexed (status `done`) and added or changed since a time; `acl` as stored in SQL."""

    id: str
    title: str
    acl: list[str]


def rated_up_answers(db: Database, *, since: datetime | None = None) -> list[RatedAnswer]:
    """Answers rated thumbs up (not the "not found" answer), rated after `since` when given, oldest first."""
    stmt = (select(Feedback, Message.citations).join(Message, Message.id == Feedback.message_id, isouter=True)
            .where(Feedback.rating > 0, Feedback.abstained.is_(False)).order_by(Feedback.id))
    if since is not None:
        stmt = stmt.where(Feedback.updated_at > since)
    with db.session() as session:
        return [
            RatedAnswer(feedback_id=f.id, question=f.question, answer=f.answer, chunk_ids=list(f.chunk_ids or []),
                        doc_ids=sorted({c.get("doc_id") for c in citations or [] if c.get("doc_id")}))
            for f, citations in session.execute(stmt)
        ]


def resolved_tickets(db: Database, *, since: datetime | None = None) -> list[ResolvedTicket]:
    """Resolved tickets with the agent's final answer (outcome `accepted` or `edited`), oldest first."""
    stmt = (select(HelpdeskTicket).where(HelpdeskTicket.state == "resolved", HelpdeskTicket.resolution.is_not(None),
                                         HelpdeskTicket.outcome.in_(("accepted", "edited"))).order_by(HelpdeskTicket.id))
    if since is not None:
        stmt = stmt.where(HelpdeskTicket.resolved_at > since)
    with db.session() as session:
        return [
            ResolvedTicket(ticket_id=t.id, question=f"{t.subject}\n\n{t.body}".strip(), answer=t.resolution or "",
                           audience=list(t.audience or []))
            for t in session.scalars(stmt)
        ]


def changed_documents(db: Database, *, since: datetime | None = None) -> list[ChangedDocument]:
    """Documents indexed and not deleted, updated after `since` (every one when None), oldest first."""
    stmt = (select(Document).where(Document.status == "done", Document.deleted_at.is_(None))
            .order_by(Document.updated_at, Document.id))
    if since is not None:
        stmt = stmt.where(Document.updated_at > since)
    with db.session() as session:
        return [ChangedDocument(id=d.id, title=d.title, acl=list(d.acl or [])) for d in session.scalars(stmt)]
