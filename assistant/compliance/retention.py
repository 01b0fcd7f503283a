"""Retention: delete what is older than its kind's setting (audit rows, conversations, feedback, uploads,
job items), except the rows of users under legal hold; report and audit what was deleted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from assistant.compliance import store as retention_db
from assistant.compliance.audit import record_event
from assistant.compliance.audit_chain import RETENTION_ACTION
from assistant.compliance.erasure import remove_uploads
from assistant.compliance.store import purge_prefix
from assistant.core.db.session import Database
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
    return {kind: int(getattr(settings.retention, f"{kind}_days")) for kind in KINDS}


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
    now = now or datetime.now(UTC)
    days = retention_days(settings)
    report = RetentionReport()
    held_rows = retention_db.held_users(db)
    held_ids = [user_id for user_id, _ in held_rows]
    report.held_users = sorted(name for _, name in held_rows)
    cutoff = {kind: now - timedelta(days=d) for kind, d in days.items() if d > 0}
    report.cutoffs = {kind: moment.isoformat() for kind, moment in cutoff.items()}
    anchor = ""
    if "conversations" in cutoff:
        report.deleted["conversations"] = retention_db.delete_conversations(
            db, cutoff["conversations"], keep_user_ids=held_ids
        )
    if "feedback" in cutoff:
        report.deleted["feedback"] = retention_db.delete_feedback(
            db, cutoff["feedback"], keep_user_ids=held_ids, keep_principals=report.held_users
        )
    if "job_items" in cutoff:
        report.deleted["job_items"], report.deleted["jobs"] = retention_db.delete_job_history(db, cutoff["job_items"])
    if "uploads" in cutoff and store is not None:
        expired = retention_db.expired_uploads(db, cutoff["uploads"])
        removed = remove_uploads(db, store, expired, tables_dir=settings.tables_dir)
        report.deleted["uploads"] = retention_db.delete_uploads(db, [u.id for u in expired])
        report.deleted["upload_chunks"] = removed["chunks"]
    if "audit" in cutoff:
        # Only the oldest prefix goes, up to the first row that is recent or of a held user, so the
        # hash chain stays whole from the first kept row; its anchor is recorded below.
        report.deleted["audit"], anchor = purge_prefix(db, cutoff["audit"], report.held_users)
    record_event(
        db, principal=SYSTEM, action=RETENTION_ACTION, auth_method="scheduler",
        details={**report.to_dict(), "chain_anchor": anchor}, request_id=request_id,
    )
    return report
