"""Retention: delete what is older than its kind's setting (audit rows, conversations, feedback, uploads,
job items), except the rows of users under legal hold; report and audit what was deleted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import and_, delete, false, or_, select

from assistant.compliance.audit import record_event
from assistant.compliance.audit_chain import RETENTION_ACTION
from assistant.core.db.models import AuditEvent, Conversation, Feedback, Job, JobItem, User
from assistant.core.db.session import Database
from assistant.core.db.user_data import delete_upload_rows, user_uploads
from assistant.compliance.erasure import remove_uploads
from assistant.core.principals import Principal
from assistant.core.vectorstore.base import VectorStore

# The principal retention acts as in the audit trail.
SYSTEM = Principal(name="system")
KINDS = ("audit", "conversations", "feedback", "uploads", "job_items")


@dataclass
class RetentionReport:
    """What one run deleted, per kind, the cut-off time of each enabled kind, and the users on hold."""

    deleted: dict[str, int] = field(default_factory=dict)
    cutoffs: dict[str, str] = field(default_factory=dict)
    held_users: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"deleted": dict(self.deleted), "cutoffs": dict(self.cutoffs), "held_users": list(self.held_users)}


def retention_days(settings) -> dict[str, int]:
    """Days kept per kind (`ASSISTANT_RETENTION_<KIND>_DAYS`); 0 keeps forever."""
    return {kind: int(getattr(settings, f"retention_{kind}_days")) for kind in KINDS}


def _purge_audit(db: Database, cutoff: datetime, held: list[str]) -> tuple[int, str]:
    """Delete the oldest audit rows up to (not including) the first row that is newer than `cutoff` or
    belongs to a held user: only a prefix, so the hash chain stays whole from the first kept row.
    Returns the rows deleted and the hash of the last one (the kept chain's anchor)."""
    with db.session() as session:
        stop = select(AuditEvent.id).where(or_(AuditEvent.at >= cutoff, AuditEvent.principal.in_(held) if held else false()))
        first_kept = session.scalar(stop.order_by(AuditEvent.id).limit(1))
        scope = AuditEvent.id < first_kept if first_kept is not None else AuditEvent.id.is_not(None)
        last = session.scalars(select(AuditEvent).where(scope).order_by(AuditEvent.id.desc()).limit(1)).first()
        if last is None:
            return 0, ""
        anchor = last.row_hash
        deleted = session.execute(delete(AuditEvent).where(AuditEvent.id <= last.id)).rowcount or 0
        return deleted, anchor


def apply_retention(
    db: Database, *, settings, store: VectorStore | None = None, now: datetime | None = None,
    request_id: str | None = None,
) -> RetentionReport:
    """Delete everything past its kind's age, keeping the rows of users under legal hold.

    Args:
        settings: the `retention_*_days` settings.
        store: the vector store, to delete expired uploads' chunks (without it, uploads are skipped).
        now: the time to count ages from (default: now, UTC).
        request_id: the ID of the API request that asked for the run (the audit row's), if any.

    Returns:
        A `RetentionReport`; the run is also written to the audit trail as `retention.purge` (with the
        anchor of the kept hash chain when audit rows were deleted).
    """
    now = now or datetime.now(timezone.utc)
    days = retention_days(settings)
    report = RetentionReport()
    with db.session() as session:
        held_rows = session.execute(select(User.id, User.name).where(User.legal_hold.is_(True))).all()
    held_ids = [r.id for r in held_rows]
    report.held_users = sorted(r.name for r in held_rows)
    cutoff = {kind: now - timedelta(days=d) for kind, d in days.items() if d > 0}
    report.cutoffs = {kind: moment.isoformat() for kind, moment in cutoff.items()}
    anchor = ""
    if "conversations" in cutoff:
        with db.session() as session:
            stmt = delete(Conversation).where(Conversation.updated_at < cutoff["conversations"])
            if held_ids:
                stmt = stmt.where(or_(Conversation.user_id.is_(None), Conversation.user_id.not_in(held_ids)))
            report.deleted["conversations"] = session.execute(stmt).rowcount or 0
    if "feedback" in cutoff:
        with db.session() as session:
            stmt = delete(Feedback).where(Feedback.created_at < cutoff["feedback"])
            if held_ids:
                stmt = stmt.where(
                    and_(or_(Feedback.user_id.is_(None), Feedback.user_id.not_in(held_ids)),
                         Feedback.principal.not_in(report.held_users))
                )
            report.deleted["feedback"] = session.execute(stmt).rowcount or 0
    if "job_items" in cutoff:
        with db.session() as session:
            report.deleted["job_items"] = session.execute(
                delete(JobItem).where(JobItem.created_at < cutoff["job_items"])
            ).rowcount or 0
            report.deleted["jobs"] = session.execute(
                delete(Job).where(Job.finished_at.is_not(None), Job.finished_at < cutoff["job_items"])
            ).rowcount or 0
    if "uploads" in cutoff and store is not None:
        with db.session() as session:
            users = session.scalars(select(User.id).where(User.legal_hold.is_(False))).all()
            expired = [u for user_id in users for u in user_uploads(session, user_id, before=cutoff["uploads"])]
        removed = remove_uploads(db, store, expired)
        with db.session() as session:
            report.deleted["uploads"] = delete_upload_rows(session, [u.id for u in expired])
        report.deleted["upload_chunks"] = removed["chunks"]
    if "audit" in cutoff:
        report.deleted["audit"], anchor = _purge_audit(db, cutoff["audit"], report.held_users)
    record_event(
        db, principal=SYSTEM, action=RETENTION_ACTION, auth_method="scheduler",
        details={**report.to_dict(), "chain_anchor": anchor}, request_id=request_id,
    )
    return report
