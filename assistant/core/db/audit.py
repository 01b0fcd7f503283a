"""The audit trail in SQL: appending a row to the hash chain under the chain head's lock, reading rows
with filters or in batches, and deleting the oldest prefix for retention. The chain's digests are
`assistant.compliance.audit_chain`'s: the caller passes the function that computes a row's hash."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import String, cast, delete, false, func, or_, select, update

from assistant.core.db.models import AuditChainHead, AuditEvent, utcnow
from assistant.core.db.session import Database, changed_rows

CHAIN_HEAD_ID = 1


def append_event(
    db: Database,
    *,
    principal: str,
    action: str,
    query: str,
    chunk_ids: Sequence[str],
    doc_ids: Sequence[str],
    details: dict[str, Any],
    auth_method: str,
    address: str,
    request_id: str | None,
    content_hash: str,
    row_digest: Callable[[AuditEvent], str],
) -> int:
    """Append one row after the chain head and make it the head; returns its id.

    Args:
        content_hash: the digest of `query` (the row's erasable content).
        row_digest: computes the row's hash from the row as written (its id, time and `prev_hash` set).
    """
    with db.session() as session:
        # Updating the head first takes the write lock, so concurrent appends queue here (one chain).
        session.execute(
            update(AuditChainHead).where(AuditChainHead.id == CHAIN_HEAD_ID)
            .values(appended=AuditChainHead.appended + 1)
        )
        head = session.get(AuditChainHead, CHAIN_HEAD_ID, populate_existing=True)
        if head is None:  # a database made without the migrations (the migration inserts the head)
            head = AuditChainHead(id=CHAIN_HEAD_ID, last_hash="", appended=1)
            session.add(head)
        event = AuditEvent(
            at=utcnow(), principal=principal, action=action, query=query, chunk_ids=list(chunk_ids),
            doc_ids=list(dict.fromkeys(doc_ids)), details=details, auth_method=auth_method, address=address[:64],
            content_hash=content_hash, prev_hash=head.last_hash, request_id=request_id,
        )
        session.add(event)
        session.flush()
        event.row_hash = row_digest(event)
        head.last_hash = event.row_hash
        return event.id


def find_events(
    db: Database,
    *,
    user: str | None = None,
    action: str | None = None,
    doc_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after_id: int = 0,
    limit: int = 100,
) -> list[AuditEvent]:
    """Rows matching every filter given, oldest first from `after_id` (exclusive), at most `limit`.
    `since` is inclusive, `until` exclusive."""
    stmt = select(AuditEvent).where(AuditEvent.id > after_id).order_by(AuditEvent.id).limit(limit)
    if user:
        stmt = stmt.where(AuditEvent.principal == user)
    if action:
        stmt = stmt.where(AuditEvent.action == action)
    if doc_id:
        # Portable across SQLite and PostgreSQL's `json`: document IDs are UUIDs, quoted in the array text.
        stmt = stmt.where(cast(AuditEvent.doc_ids, String).like(f'%"{doc_id}"%'))
    if since:
        stmt = stmt.where(AuditEvent.at >= since)
    if until:
        stmt = stmt.where(AuditEvent.at < until)
    with db.session() as session:
        return list(session.scalars(stmt))


def newest_events(db: Database, *, principal: str | None = None, limit: int = 50) -> list[AuditEvent]:
    """Newest rows first, optionally of one principal."""
    stmt = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if principal:
        stmt = stmt.where(AuditEvent.principal == principal)
    with db.session() as session:
        return list(session.scalars(stmt))


def count_events(db: Database, *, principal: str, action: str, window_s: float) -> int:
    """How many `action` events `principal` has in the last `window_s` seconds."""
    since = utcnow() - timedelta(seconds=window_s)
    with db.session() as session:
        return session.scalar(
            select(func.count()).select_from(AuditEvent).where(
                AuditEvent.principal == principal, AuditEvent.action == action, AuditEvent.at >= since
            )
        ) or 0


def chain_state(db: Database, *, anchor_action: str) -> tuple[str | None, set[Any]]:
    """The chain head's hash (None without a head row) and the `chain_anchor` detail of every
    `anchor_action` row (the hashes retention recorded for the rows it deleted)."""
    with db.session() as session:
        head = session.get(AuditChainHead, CHAIN_HEAD_ID)
        anchors = {
            (e.details or {}).get("chain_anchor")
            for e in session.scalars(select(AuditEvent).where(AuditEvent.action == anchor_action))
        }
        return (head.last_hash if head is not None else None), anchors


def event_batches(db: Database, *, batch_rows: int = 5000) -> Iterator[list[AuditEvent]]:
    """Every row, oldest first, `batch_rows` at a time, read in one session (each batch is let go
    before the next is read, so memory stays at one batch)."""
    after = 0
    with db.session() as session:
        while True:
            rows = session.scalars(
                select(AuditEvent).where(AuditEvent.id > after).order_by(AuditEvent.id).limit(batch_rows)
            ).all()
            if not rows:
                return
            after = rows[-1].id
            yield list(rows)
            session.expunge_all()


def purge_prefix(db: Database, cutoff: datetime, held: list[str]) -> tuple[int, str]:
    """Delete the oldest rows up to (not including) the first row that is newer than `cutoff` or
    belongs to one of the `held` principals: only a prefix, so the hash chain stays whole from the
    first kept row. Returns the rows deleted and the hash of the last one (the kept chain's anchor)."""
    with db.session() as session:
        stop = select(AuditEvent.id).where(or_(AuditEvent.at >= cutoff, AuditEvent.principal.in_(held) if held else false()))
        first_kept = session.scalar(stop.order_by(AuditEvent.id).limit(1))
        scope = AuditEvent.id < first_kept if first_kept is not None else AuditEvent.id.is_not(None)
        last = session.scalars(select(AuditEvent).where(scope).order_by(AuditEvent.id.desc()).limit(1)).first()
        if last is None:
            return 0, ""
        anchor = last.row_hash
        deleted = changed_rows(session, delete(AuditEvent).where(AuditEvent.id <= last.id))
        return deleted, anchor
