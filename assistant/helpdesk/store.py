"""The queries on helpdesk tickets and their webhook deliveries: claiming an idempotency key, storing a
decision and a resolution, listing, and recording each delivery attempt."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import case, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from assistant.core.db.models import HelpdeskTicket, WebhookDelivery, utcnow
from assistant.core.db.session import Database, transactional
from assistant.core.errors import ConflictError, NotFoundError
from assistant.core.visibility import Cited

# Seconds a client is told to wait (Retry-After) before repeating a request whose ticket is still being
# answered: a CPU answer takes several seconds; a GPU one about one.
TICKET_IN_PROGRESS_RETRY_S = 5

Decision = Literal["auto_reply", "needs_agent"]
Outcome = Literal["accepted", "edited", "rejected"]


@dataclass(frozen=True)
class TicketRecord:
    """A stored ticket as the helpdesk reads it back: what was asked, the decision (None while the first
    request still generates), the reply with its citations, `confidence` in [0, 1], `reasons`
    (`{"code", "message"}` each), `evidence` (what the confidence was computed from), and the agent's
    resolution once recorded (`outcome`: accepted, edited or rejected). Times are UTC."""

    id: int
    client: str
    idempotency_key: str
    external_id: str | None
    subject: str
    body: str
    requester: str
    requester_known: bool
    category: str | None
    language: str
    state: str
    decision: str | None
    confidence: float
    reply: str
    citations: list[dict[str, Any]]
    reasons: list[dict[str, Any]]
    evidence: dict[str, Any]
    duration_s: float
    created_at: datetime
    decided_at: datetime | None
    resolution: str | None = None
    resolved_by: str | None = None
    audience: list[str] | None = None
    outcome: str | None = None
    resolution_job_id: int | None = None
    resolved_at: datetime | None = None


@dataclass(frozen=True)
class TicketClaim:
    """The result of `claim_ticket`: `new` when this request must produce the decision (the row exists,
    `state` pending), else the stored ticket the key already names (`record`)."""

    new: bool
    record: TicketRecord


@dataclass(frozen=True)
class DeliveryRecord:
    """A webhook delivery: its status (pending, delivered, dead), each attempt (`at`, `status_code` or
    None, `error`, `duration_ms`), and when the next one is due."""

    id: int
    ticket_id: int
    client: str
    url: str
    event: str
    status: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    next_attempt_at: datetime | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None



def _record(row: HelpdeskTicket) -> TicketRecord:
    return TicketRecord(
        id=row.id, client=row.client, idempotency_key=row.idempotency_key, external_id=row.external_id,
        subject=row.subject, body=row.body, requester=row.requester, requester_known=row.requester_known,
        category=row.category, language=row.language, state=row.state, decision=row.decision,
        confidence=row.confidence, reply=row.reply, citations=list(row.citations or []),
        reasons=list(row.reasons or []), evidence=dict(row.evidence or {}), duration_s=row.duration_s,
        created_at=row.created_at, decided_at=row.decided_at, resolution=row.resolution,
        resolved_by=row.resolved_by, audience=row.audience, outcome=row.outcome,
        resolution_job_id=row.resolution_job_id, resolved_at=row.resolved_at,
    )


def claim_ticket(
    db: Database, *, client: str, idempotency_key: str, request_hash: str, fields: dict[str, Any]
) -> TicketClaim:
    """Take `idempotency_key` for `client`, or return what it already names.

    The row is inserted first (state `pending`): of two concurrent requests with one key, the unique
    constraint lets exactly one generate.

    Args:
        fields: the ticket's columns (`subject`, `body`, `requester`, `requester_known`, `category`,
            `language`, `external_id`).

    Raises:
        ConflictError: the key names a ticket with a different body (409), or one whose first request
            is still being answered (409 `ticket_in_progress` with a `Retry-After` header).
    """
    try:
        return _insert_ticket(db, client=client, idempotency_key=idempotency_key, request_hash=request_hash, fields=fields)
    except IntegrityError:
        pass
    return _existing_ticket(db, client=client, idempotency_key=idempotency_key, request_hash=request_hash)


@transactional
def _insert_ticket(
    session: Session, *, client: str, idempotency_key: str, request_hash: str, fields: dict[str, Any]
) -> TicketClaim:
    """Insert the pending ticket; raises IntegrityError (at flush or commit) when the key is taken."""
    new = HelpdeskTicket(client=client, idempotency_key=idempotency_key, request_hash=request_hash, **fields)
    session.add(new)
    session.flush()
    return TicketClaim(new=True, record=_record(new))


@transactional
def _existing_ticket(session: Session, *, client: str, idempotency_key: str, request_hash: str) -> TicketClaim:
    """The ticket the taken key names, in a transaction of its own (see `claim_ticket`)."""
    row = session.scalar(
        select(HelpdeskTicket).where(HelpdeskTicket.client == client, HelpdeskTicket.idempotency_key == idempotency_key)
    )
    if row is None:  # released by a failed first request in between: the caller may retry
        raise ConflictError(
            f"idempotency key {idempotency_key!r} was released while this request waited; retry",
            headers={"Retry-After": "1"},
        )
    if row.request_hash != request_hash:
        raise ConflictError(
            f"idempotency key {idempotency_key!r} already names ticket {row.id} with a different subject, body "
            "or requester; use a new key for a new ticket",
            code="idempotency_conflict",
        )
    if row.state == "pending":
        raise ConflictError(
            f"ticket {row.id} (idempotency key {idempotency_key!r}) is still being answered; retry in a few seconds",
            code="ticket_in_progress",
            headers={"Retry-After": str(TICKET_IN_PROGRESS_RETRY_S)},
        )
    return TicketClaim(new=False, record=_record(row))


@transactional
def release_ticket(session: Session, ticket_id: int) -> None:
    """Delete a ticket still `pending` (its first request failed), so that a retry with its key runs again."""
    session.execute(delete(HelpdeskTicket).where(HelpdeskTicket.id == ticket_id, HelpdeskTicket.state == "pending"))


@transactional
def store_decision(session: Session, ticket_id: int, *, values: dict[str, Any]) -> TicketRecord:
    """Store the decision of a pending ticket (`decision`, `confidence`, `reply`, `citations`, `reasons`,
    `evidence`, `duration_s`, `language`) and mark it decided.

    Raises:
        NotFoundError: no such ticket.
    """
    row = session.get(HelpdeskTicket, ticket_id)
    if row is None:
        raise NotFoundError(f"ticket {ticket_id} not found")
    for name, value in values.items():
        setattr(row, name, value)
    row.state, row.decided_at = "decided", utcnow()
    session.flush()
    return _record(row)


@transactional
def get_ticket(session: Session, ticket_id: int, *, client: str) -> TicketRecord:
    """Ticket `ticket_id` if `client` posted it.

    Raises:
        NotFoundError: no such ticket, or another client's (the same message either way).
    """
    row = session.get(HelpdeskTicket, ticket_id)
    if row is None or row.client != client:
        raise NotFoundError(f"ticket {ticket_id} not found")
    return _record(row)


@transactional
def list_tickets(
    session: Session,
    *,
    client: str,
    decision: str | None = None,
    category: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[TicketRecord]:
    """`client`'s tickets, newest first, filtered by decision, category, outcome and creation time
    (`since` inclusive, `until` exclusive, UTC)."""
    query = select(HelpdeskTicket).where(HelpdeskTicket.client == client)
    if decision:
        query = query.where(HelpdeskTicket.decision == decision)
    if category:
        query = query.where(HelpdeskTicket.category == category)
    if outcome:
        query = query.where(HelpdeskTicket.outcome == outcome)
    if since:
        query = query.where(HelpdeskTicket.created_at >= since)
    if until:
        query = query.where(HelpdeskTicket.created_at < until)
    query = query.order_by(HelpdeskTicket.id.desc()).limit(limit).offset(offset)
    return [_record(row) for row in session.scalars(query)]


@transactional
def store_resolution(
    session: Session, ticket_id: int, *, client: str, resolution: str, resolved_by: str, audience: list[str], outcome: Outcome
) -> TicketRecord:
    """Record the agent's final answer on a decided ticket (a later resolution replaces an earlier one).

    Raises:
        NotFoundError: no such ticket, or another client's.
        ConflictError: the ticket has no decision yet.
    """
    row = session.get(HelpdeskTicket, ticket_id)
    if row is None or row.client != client:
        raise NotFoundError(f"ticket {ticket_id} not found")
    if row.state == "pending":
        raise ConflictError(f"ticket {ticket_id} is still being answered; resolve it once it has a decision")
    row.resolution, row.resolved_by, row.audience, row.outcome = resolution, resolved_by, audience, outcome
    row.state, row.resolved_at = "resolved", utcnow()
    session.flush()
    return _record(row)


@transactional
def set_resolution_job(session: Session, ticket_id: int, job_id: int) -> None:
    """Remember the ingestion job that turns the ticket's resolution into a document."""
    row = session.get(HelpdeskTicket, ticket_id)
    if row is not None:
        row.resolution_job_id = job_id


def _delivery(row: WebhookDelivery) -> DeliveryRecord:
    return DeliveryRecord(
        id=row.id, ticket_id=row.ticket_id, client=row.client, url=row.url, event=row.event, status=row.status,
        attempts=list(row.attempts or []), next_attempt_at=row.next_attempt_at, created_at=row.created_at,
        finished_at=row.finished_at,
    )


@transactional
def queue_delivery(session: Session, *, ticket_id: int, client: str, url: str, event: str, payload: dict[str, Any]) -> DeliveryRecord:
    """A new pending delivery of `payload` (JSON-serialisable) to `url`."""
    row = WebhookDelivery(ticket_id=ticket_id, client=client, url=url, event=event, payload=payload, attempts=[])
    session.add(row)
    session.flush()
    return _delivery(row)


@transactional
def delivery_payload(session: Session, delivery_id: int) -> tuple[DeliveryRecord, dict[str, Any]] | None:
    """The delivery and its payload, or None when it is missing or no longer pending."""
    row = session.get(WebhookDelivery, delivery_id)
    if row is None or row.status != "pending":
        return None
    return _delivery(row), dict(row.payload)


@transactional
def record_attempt(
    session: Session, delivery_id: int, *, attempt: dict[str, Any], status: str, next_attempt_at: datetime | None
) -> DeliveryRecord:
    """Append one attempt (`at`, `status_code`, `error`, `duration_ms`) and set the delivery's status
    (pending, delivered, dead) and when the next attempt is due.

    Raises:
        NotFoundError: no such delivery.
    """
    row = session.get(WebhookDelivery, delivery_id)
    if row is None:
        raise NotFoundError(f"webhook delivery {delivery_id} not found")
    row.attempts = [*(row.attempts or []), attempt]
    row.status, row.next_attempt_at = status, next_attempt_at
    if status != "pending":
        row.finished_at = utcnow()
    session.flush()
    return _delivery(row)


@transactional
def list_deliveries(session: Session, *, client: str, ticket_id: int | None = None, limit: int = 50) -> list[DeliveryRecord]:
    """`client`'s webhook deliveries, newest first (of one ticket when `ticket_id` is given)."""
    query = select(WebhookDelivery).where(WebhookDelivery.client == client)
    if ticket_id is not None:
        query = query.where(WebhookDelivery.ticket_id == ticket_id)
    return [_delivery(row) for row in session.scalars(query.order_by(WebhookDelivery.id.desc()).limit(limit))]


@transactional
def pending_delivery_ids(session: Session) -> list[int]:
    """Every delivery still pending (to resubmit after a restart of the in-process worker)."""
    return list(session.scalars(select(WebhookDelivery.id).where(WebhookDelivery.status == "pending")))


@transactional
def ticket_counts(
    session: Session, *, client: str | None, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """Tickets per UTC day and category: `received` (every ticket, those still being answered
    included), `in_progress` (received, not yet decided), `auto_replied`, `escalated` (needs_agent), and
    the auto-replies an agent later `edited` or `rejected`; oldest day first.

    Args:
        client: one client's tickets, or every client's when None (the admin view).
        since, until: creation time bounds (`since` inclusive, `until` exclusive).
    """
    day = func.date(HelpdeskTicket.created_at)
    auto = HelpdeskTicket.decision == "auto_reply"
    query = select(
        day, HelpdeskTicket.category, func.count(),
        func.sum(case((auto, 1), else_=0)),
        func.sum(case((HelpdeskTicket.decision == "needs_agent", 1), else_=0)),
        func.sum(case((auto & (HelpdeskTicket.outcome == "edited"), 1), else_=0)),
        func.sum(case((auto & (HelpdeskTicket.outcome == "rejected"), 1), else_=0)),
        func.sum(case((HelpdeskTicket.state == "pending", 1), else_=0)),
    )
    if client is not None:
        query = query.where(HelpdeskTicket.client == client)
    if since:
        query = query.where(HelpdeskTicket.created_at >= since)
    if until:
        query = query.where(HelpdeskTicket.created_at < until)
    query = query.group_by(day, HelpdeskTicket.category).order_by(day, HelpdeskTicket.category)
    return [
        {"day": str(d), "category": category, "received": int(n), "auto_replied": int(a or 0),
         "escalated": int(e or 0), "auto_replies_edited": int(ed or 0), "auto_replies_rejected": int(r or 0),
         "in_progress": int(p or 0)}
        for d, category, n, a, e, ed, r, p in session.execute(query)
    ]


def ticket_cited(record: TicketRecord) -> Cited:
    """The documents a ticket's stored text rests on, for `assistant.core.visibility`: its reply's
    citations and, for a conversation handed over from the web app, the documents its answers cited."""
    cited = Cited.of_citations(record.citations)
    handed = tuple(str(d) for d in (record.evidence or {}).get("conversation_doc_ids", []) or [])
    return Cited(doc_ids=cited.doc_ids + handed, sources=cited.sources, unresolved=cited.unresolved)
