"""The audit trail: who did what (chat, search, download, sign-in, admin changes), to which documents,
from where; appended to a hash chain (`assistant.compliance.audit_chain`) and read with filters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from assistant.compliance import store as audit_db
from assistant.compliance.audit_chain import content_digest, row_digest
from assistant.core.db.models import AuditEvent
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError
from assistant.core.principals import Principal

# Actions of the trail, for filters and documentation (`admin.*` rows name the change in `details`).
AUDIT_ACTIONS = (
    "chat", "search", "document.read", "auth.login", "auth.login_failed", "auth.login_throttled",
    "auth.unlock", "audit.read", "admin.user", "admin.group", "admin.key", "admin.source", "admin.acl_manifest",
    "admin.adapter", "admin.retention", "admin.erasure", "admin.export", "retention.purge",
)


def record_event(
    db: Database,
    *,
    principal: Principal,
    action: str,
    query: str = "",
    chunk_ids: Sequence[str] = (),
    doc_ids: Sequence[str] = (),
    details: dict[str, Any] | None = None,
    auth_method: str = "",
    address: str = "",
    request_id: str | None = None,
) -> int:
    """Append one audit row to the hash chain; returns its id.

    Args:
        action: what was done, one of `AUDIT_ACTIONS` (e.g. `search`, `chat`, `document.read`).
        query: the question or query text as the caller sent it (the row's erasable content).
        chunk_ids: IDs of the chunks retrieved for the caller, best first.
        doc_ids: IDs of the documents those chunks (or a download) belong to, in first-seen order.
        details: small JSON-ready extras (top_k, the target of an admin change...).
        auth_method: how the principal signed in: `session`, `api_key`, `password`, `oidc`, `cli`.
        address: the client's IP address as the server saw it.
        request_id: the API request's ID (`X-Request-ID`, `assistant.api.audit_origin.request_origin`);
            None outside a request. Kept in its own column, which the hash chain covers.
    """
    extras = dict(details or {})
    return audit_db.append_event(
        db, principal=principal.name, action=action, query=query, chunk_ids=chunk_ids, doc_ids=doc_ids,
        details=extras, auth_method=auth_method, address=address, request_id=request_id,
        content_hash=content_digest(query), row_digest=row_digest,
    )


@dataclass(frozen=True)
class AuditQuery:
    """Filters of the trail; every one optional. `since`/`until` are inclusive/exclusive UTC times."""

    user: str | None = None
    action: str | None = None
    doc_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    after_id: int = 0
    limit: int = 100


def event_dict(e: AuditEvent) -> dict[str, Any]:
    """The JSON-ready form of one row, as the API, the CLI and exports show it."""
    details = dict(e.details or {})
    return {
        "id": e.id, "at": e.at.isoformat(), "principal": e.principal, "auth_method": e.auth_method or "",
        "action": e.action, "query": e.query, "doc_ids": list(e.doc_ids or []), "chunk_ids": list(e.chunk_ids or []),
        "address": e.address or "", "request_id": e.request_id, "details": details,
        "erased": e.erased_at is not None, "row_hash": e.row_hash or "",
    }


def list_events(db: Database, query: AuditQuery) -> list[dict[str, Any]]:
    """Rows matching `query`, oldest first from `after_id` (page on with the last id seen).

    Returns:
        Up to `query.limit` `event_dict`s.

    Raises:
        InvalidRequestError: `query.action` is not one of `AUDIT_ACTIONS`.
    """
    if query.action and query.action not in AUDIT_ACTIONS:
        raise InvalidRequestError(f"audit action {query.action!r} is not one of {', '.join(AUDIT_ACTIONS)}")
    rows = audit_db.find_events(
        db, user=query.user, action=query.action, doc_id=query.doc_id, since=query.since, until=query.until,
        after_id=query.after_id, limit=query.limit,
    )
    return [event_dict(e) for e in rows]


def recent_events(db: Database, *, principal: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Newest audit rows first, optionally of one principal."""
    return [event_dict(e) for e in audit_db.newest_events(db, principal=principal, limit=limit)]
