"""Helpdesk API: the ticket system posts tickets and gets a decision (auto-reply or agent) with a grounded
reply; agents' resolutions come back and become documents. Tickets, resolutions and deliveries need the
helpdesk's API key (a service principal); `POST /answer` is the earlier stateless suggestion."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import MAX_ROW_ID, AssistantDep, DispatcherDep, PrincipalDep, RowId
from assistant.api.routes.chat import request_audit
from assistant.api.schemas.helpdesk import (
    HelpdeskAnswerPublic,
    HelpdeskTicket,
    ResolutionCreate,
    TicketCountsPublic,
    TicketCreate,
    TicketDetail,
    TicketPublic,
)
from assistant.core.db.usage import record_usage
from assistant.core.errors import InvalidRequestError, PermissionDeniedError
from assistant.core.jobs import JOB_TASKS
from assistant.core.principals import Principal, parse_acl
from assistant.core.visibility import Visibility
from assistant.helpdesk.resolutions import check_audience, publish_resolution, resolution_outcome
from assistant.helpdesk.store import (
    DeliveryRecord,
    TicketRecord,
    list_deliveries,
    list_tickets,
    set_resolution_job,
    store_resolution,
    ticket_cited,
    ticket_counts,
)
from assistant.helpdesk.store import (
    get_ticket as load_ticket,
)
from assistant.helpdesk.tasks import WEBHOOK_TASK
from assistant.helpdesk.tickets import Collaborators, TicketRequest, submit_ticket, ticket_question
from assistant.helpdesk.webhooks import queue_ticket_webhook

router = APIRouter(prefix="/api/helpdesk")


def require_service(request: Request, principal: PrincipalDep) -> Principal:
    """The caller, if it authenticated with an API key (the helpdesk's service principal).

    Raises:
        PermissionDeniedError: a browser session (403): tickets are the ticket system's, not a person's.
    """
    if getattr(request.state, "auth_method", None) != "api_key" or not principal.is_service:
        raise PermissionDeniedError("helpdesk tickets need the helpdesk's API key (Authorization: Bearer KEY)")
    return principal


ServiceDep = Annotated[Principal, Depends(require_service)]


def _shown(record: TicketRecord, visibility: Visibility | None) -> bool:
    return visibility is None or visibility.may_see(ticket_cited(record), asked_by=record.client)


def _public(record: TicketRecord, visibility: Visibility | None = None) -> TicketPublic:
    """The ticket as `visibility`'s viewer may see it (None: as just decided for the caller)."""
    shown = _shown(record, visibility)
    # A conversation handed over from the web app stores its reason as plain text.
    reasons = [r if isinstance(r, dict) else {"code": "handoff", "message": str(r)} for r in record.reasons]
    return TicketPublic(
        ticket_id=record.id, external_id=record.external_id, decision=record.decision,
        reply=record.reply if shown else None, citations=record.citations if shown else None,
        confidence=record.confidence, language=record.language,
        reasons=reasons if shown else [{"code": r["code"], "message": None} for r in reasons],
        category=record.category, requester=record.requester, state=record.state, created_at=record.created_at,
        decided_at=record.decided_at, withheld=not shown,
    )


def _detail(record: TicketRecord, visibility: Visibility) -> TicketDetail:
    shown = _shown(record, visibility)
    return TicketDetail(
        **_public(record, visibility).model_dump(), subject=record.subject if shown else None,
        body=record.body if shown else None, evidence=record.evidence if shown else {},
        resolution=record.resolution if shown else None, resolved_by=record.resolved_by, audience=record.audience,
        outcome=record.outcome, resolution_job_id=record.resolution_job_id, resolved_at=record.resolved_at,
    )


@router.post("/answer", response_model=HelpdeskAnswerPublic)
async def answer_ticket(
    body: HelpdeskTicket, assistant: AssistantDep, principal: PrincipalDep, request: Request
) -> HelpdeskAnswerPublic:
    """Answer a ticket from the documents the caller (the helpdesk's API key) may read; audited.

    Raises:
        InvalidRequestError: subject and body are both empty (400).
        OverloadedError: too many requests wait for the model (429 with Retry-After).
    """
    question = ticket_question(body.subject, body.body)
    if not question:
        raise InvalidRequestError(f"ticket '{body.ticket_id}' has neither subject nor body")
    audit = request_audit(assistant, request, endpoint="helpdesk", ticket_id=body.ticket_id)
    ticket = assistant.answerer.admit(principal)
    started = time.perf_counter()
    result = await assistant.answerer.answer(question, principal=principal, ticket=ticket, audit=audit)
    await run_in_threadpool(
        lambda: record_usage(assistant.resources.db, endpoint="helpdesk", abstained=result.abstained,
                             duration_s=time.perf_counter() - started)
    )
    return HelpdeskAnswerPublic(
        ticket_id=body.ticket_id, answer=result.answer, citations=[c.to_dict() for c in result.citations],
        abstained=result.abstained, finish_reason=result.finish_reason, usage=result.usage.to_dict(),
    )


@router.post("/tickets", response_model=TicketPublic, status_code=201)
async def create_ticket(
    body: TicketCreate,
    assistant: AssistantDep,
    dispatcher: DispatcherDep,
    service: ServiceDep,
    request: Request,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> TicketPublic:
    """Decide a ticket from the documents its requester may read (within the key's groups); stored.

    The same `Idempotency-Key` (or `external_id`) returns the stored ticket with 200 and
    `Idempotent-Replayed: true`, without generating again. When the key has a webhook, the result is
    also POSTed there (`GET /api/helpdesk/deliveries`).

    Raises:
        InvalidRequestError: no idempotency key and no `external_id`, or an empty ticket (400).
        ConflictError: the key names a ticket with another body, or one still being answered (409).
        OverloadedError: too many requests wait for the model (429 with Retry-After).
    """
    key = (idempotency_key or "").strip() or body.external_id
    if not key:
        raise InvalidRequestError("send an Idempotency-Key header or the ticket's external_id: a retried POST must not answer twice")
    settings = assistant.resources.settings
    parts = Collaborators(
        db=assistant.resources.db, retriever=assistant.retriever, answerer=assistant.answerer,
        threshold=settings.helpdesk.auto_reply_threshold,
    )
    ticket = TicketRequest(
        subject=body.subject, body=body.body, requester=body.requester, language=body.language,
        category=body.category, external_id=body.external_id,
    )
    audit = request_audit(assistant, request, endpoint="helpdesk_tickets", idempotency_key=key)
    record, created = await submit_ticket(ticket, key=service, idempotency_key=key, parts=parts, audit=audit)
    request.state.usage_tokens = int((record.evidence.get("usage") or {}).get("total_tokens", 0)) if created else 0
    if created:
        await run_in_threadpool(
            lambda: record_usage(assistant.resources.db, endpoint="helpdesk_tickets", abstained=not record.citations,
                                 duration_s=record.duration_s)
        )
        delivery = await run_in_threadpool(queue_ticket_webhook, assistant.resources.db, record, service=service)
        if delivery is not None:
            dispatcher.submit(WEBHOOK_TASK, delivery_id=delivery.id)
    else:
        response.status_code = 200
        response.headers["Idempotent-Replayed"] = "true"
    return await run_in_threadpool(_public, record, Visibility(assistant.resources.db, service))


@router.get("/tickets", response_model=list[TicketPublic])
async def get_tickets(
    assistant: AssistantDep,
    service: ServiceDep,
    decision: Literal["auto_reply", "needs_agent"] | None = None,
    category: str | None = Query(None, max_length=128),
    outcome: Literal["accepted", "edited", "rejected"] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0),
) -> list[TicketPublic]:
    """This key's tickets, newest first, filtered by decision, category, outcome and creation time
    (`since` inclusive, `until` exclusive; ISO 8601, UTC when no offset is given)."""
    records = await run_in_threadpool(
        lambda: list_tickets(
            assistant.resources.db, client=service.name, decision=decision, category=category, outcome=outcome,
            since=since, until=until, limit=limit, offset=offset,
        )
    )
    visibility = Visibility(assistant.resources.db, service)
    return await run_in_threadpool(lambda: [_public(r, visibility) for r in records])


@router.get("/tickets/{ticket_id}", response_model=TicketDetail)
async def get_ticket(ticket_id: RowId, assistant: AssistantDep, service: ServiceDep) -> TicketDetail:
    """One of this key's tickets with its evidence and resolution.

    Raises:
        NotFoundError: no such ticket, or another key's (404).
    """
    db = assistant.resources.db
    record = await run_in_threadpool(load_ticket, db, ticket_id, client=service.name)
    return await run_in_threadpool(_detail, record, Visibility(db, service))


@router.post("/tickets/{ticket_id}/resolution", response_model=TicketDetail)
async def resolve_ticket(
    ticket_id: RowId, body: ResolutionCreate, assistant: AssistantDep, dispatcher: DispatcherDep, service: ServiceDep
) -> TicketDetail:
    """Record the agent's final answer and its outcome against the reply (accepted, edited, rejected),
    and queue its ingestion as a document readable by `audience` only (`resolution_job_id`: the job).

    Raises:
        InvalidRequestError: an invalid audience entry, or one wider than the readers of a document the
            reply cites (`audience_too_wide`) (400).
        NotFoundError: no such ticket, or another key's (404).
        ConflictError: the ticket is still being answered (409).
    """
    audience = parse_acl(body.audience)
    db = assistant.resources.db
    ticket = await run_in_threadpool(load_ticket, db, ticket_id, client=service.name)
    await run_in_threadpool(check_audience, db, ticket, audience)
    outcome = body.outcome or resolution_outcome(ticket, body.resolution)
    record = await run_in_threadpool(
        lambda: store_resolution(
            db, ticket_id, client=service.name, resolution=body.resolution, resolved_by=body.resolved_by,
            audience=audience, outcome=outcome,
        )
    )
    folder = assistant.resources.settings.resolutions_dir
    job_id = await run_in_threadpool(lambda: publish_resolution(db, record, folder=folder, audience=audience))
    await run_in_threadpool(set_resolution_job, db, ticket_id, job_id)
    dispatcher.submit(JOB_TASKS["sync"], job_id=job_id)
    record = await run_in_threadpool(load_ticket, db, ticket_id, client=service.name)
    return await run_in_threadpool(_detail, record, Visibility(db, service))


@router.get("/deliveries", response_model=list[DeliveryRecord])
async def get_deliveries(
    assistant: AssistantDep, service: ServiceDep, ticket_id: int | None = Query(None, ge=1, le=MAX_ROW_ID), limit: int = Query(50, ge=1, le=500)
) -> list[DeliveryRecord]:
    """This key's webhook deliveries, newest first, each with its attempts (`at`, `status_code`, `error`)."""
    return await run_in_threadpool(
        lambda: list_deliveries(assistant.resources.db, client=service.name, ticket_id=ticket_id, limit=limit)
    )


@router.get("/metrics", response_model=list[TicketCountsPublic])
async def get_metrics(
    assistant: AssistantDep, principal: PrincipalDep, request: Request,
    since: datetime | None = None, until: datetime | None = None,
) -> list[TicketCountsPublic]:
    """Tickets received, auto-replied, escalated, and auto-replies later edited or rejected by an agent,
    per UTC day and category: the key's own tickets, or every key's for an admin.

    Raises:
        PermissionDeniedError: a signed-in person who is not an admin (403).
    """
    if principal.is_admin and getattr(request.state, "auth_method", None) == "session":
        client = None
    else:
        client = require_service(request, principal).name
    rows = await run_in_threadpool(lambda: ticket_counts(assistant.resources.db, client=client, since=since, until=until))
    return [TicketCountsPublic(**row) for row in rows]
