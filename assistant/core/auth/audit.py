"""The audit log: who asked what, and which chunks were retrieved for them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from sqlalchemy import func, select

from assistant.core.db.models import AuditEvent
from assistant.core.db.session import Database
from assistant.core.principals import Principal
from assistant.core.request_context import current_request_id


def record_event(
    db: Database,
    *,
    principal: Principal,
    action: str,
    query: str = "",
    chunk_ids: Sequence[str] = (),
    details: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> int:
    """Append one audit row; returns its id.

    Args:
        action: what was done, e.g. `search`, `chat`, `document.read`, `auth.login`.
        query: the question or query text as the caller sent it.
        chunk_ids: IDs of the chunks retrieved for the caller, best first.
        details: small JSON-ready extras (how the caller signed in, top_k, the document id...).
        request_id: the API request's ID (`X-Request-ID`); default: the current request's, if any.
    """
    with db.session() as session:
        event = AuditEvent(
            principal=principal.name, action=action, query=query, chunk_ids=list(chunk_ids), details=details or {},
            request_id=request_id or current_request_id(),
        )
        session.add(event)
        session.flush()
        return event.id


def recent_events(db: Database, *, principal: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Newest audit rows first, optionally of one principal."""
    stmt = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if principal:
        stmt = stmt.where(AuditEvent.principal == principal)
    with db.session() as session:
        return [
            {"id": e.id, "at": e.at.isoformat(), "principal": e.principal, "action": e.action, "query": e.query,
             "chunk_ids": list(e.chunk_ids or []), "details": dict(e.details or {}), "request_id": e.request_id}
            for e in session.scalars(stmt)
        ]


def count_events(db: Database, *, principal: str, action: str, window_s: float) -> int:
    """How many `action` events `principal` has in the last `window_s` seconds (e.g. failed sign-ins)."""
    since = datetime.now(timezone.utc) - timedelta(seconds=window_s)
    with db.session() as session:
        return session.scalar(
            select(func.count()).select_from(AuditEvent).where(
                AuditEvent.principal == principal, AuditEvent.action == action, AuditEvent.at >= since
            )
        ) or 0
