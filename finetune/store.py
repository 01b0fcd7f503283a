"""The SQL reads a finetune dataset is built from: answers rated up or corrected by their reader, resolved
helpdesk tickets, and the documents added or changed since the last refresh."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from assistant.core.db.models import Document, Feedback, HelpdeskTicket, Message
from assistant.core.db.session import transactional


@dataclass(frozen=True)
class RatedAnswer:
    """An answer rated up or given a corrected answer: the question, the model's answer, the reader's
    corrected answer (None: none), the chunk IDs the answer cited and the documents they belong to
    (from the message's citations; empty once the conversation was deleted)."""

    feedback_id: int
    question: str
    answer: str
    chunk_ids: list[str]
    doc_ids: list[str]
    corrected_answer: str | None = None


@dataclass(frozen=True)
class ResolvedTicket:
    """A resolved helpdesk ticket and the agent's final answer; `audience` is the ACL of the resolution
    (who may read it)."""

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


@transactional
def rated_answers(session: Session, *, since: datetime | None = None) -> list[RatedAnswer]:
    """Answers rated thumbs up, or rated either way with a corrected answer, rated after `since` when
    given, oldest first; never the "not found" answer (it cites nothing that says who may read it)."""
    corrected = func.length(func.coalesce(Feedback.corrected_answer, "")) > 0
    stmt = (select(Feedback, Message.citations).join(Message, Message.id == Feedback.message_id, isouter=True)
            .where(or_(Feedback.rating > 0, corrected), Feedback.abstained.is_(False)).order_by(Feedback.id))
    if since is not None:
        stmt = stmt.where(Feedback.updated_at > since)
    return [
        RatedAnswer(feedback_id=f.id, question=f.question, answer=f.answer, chunk_ids=list(f.chunk_ids or []),
                    doc_ids=sorted({c.get("doc_id") for c in citations or [] if c.get("doc_id")}),
                    corrected_answer=f.corrected_answer or None)
        for f, citations in session.execute(stmt)
    ]


@transactional
def resolved_tickets(session: Session, *, since: datetime | None = None) -> list[ResolvedTicket]:
    """Resolved tickets with the agent's final answer, oldest first, whatever became of the suggested reply:
    a `rejected` one (the agent wrote the answer afresh, or the assistant had declined) teaches what the
    model did not know, which is what a refresh is for."""
    stmt = (select(HelpdeskTicket).where(HelpdeskTicket.state == "resolved", HelpdeskTicket.resolution.is_not(None))
            .order_by(HelpdeskTicket.id))
    if since is not None:
        stmt = stmt.where(HelpdeskTicket.resolved_at > since)
    return [
        ResolvedTicket(ticket_id=t.id, question=f"{t.subject}\n\n{t.body}".strip(), answer=t.resolution or "",
                       audience=list(t.audience or []))
        for t in session.scalars(stmt)
    ]


@transactional
def changed_documents(session: Session, *, since: datetime | None = None) -> list[ChangedDocument]:
    """Documents indexed and not deleted, updated after `since` (every one when None), oldest first."""
    stmt = (select(Document).where(Document.status == "done", Document.deleted_at.is_(None))
            .order_by(Document.updated_at, Document.id))
    if since is not None:
        stmt = stmt.where(Document.updated_at > since)
    return [ChangedDocument(id=d.id, title=d.title, acl=list(d.acl or [])) for d in session.scalars(stmt)]
