"""The adapter registry and dataset snapshots in SQL: LoRA adapters with their status, metrics and files,
the one-step promote and rollback, and which adapter produced an answer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from assistant.core.db.models import Adapter, AnswerAdapter, DatasetSnapshot, Feedback, Job, utcnow
from assistant.core.db.session import transactional
from assistant.core.errors import ConflictError, NotFoundError

Status = Literal["candidate", "canary", "live", "retired", "failed"]
STATUSES: tuple[str, ...] = ("candidate", "canary", "live", "retired", "failed")
FINETUNE_JOB = "finetune"


@dataclass(frozen=True)
class SnapshotRecord:
    """A dataset snapshot: `counts` has rows by origin and split (`feedback`, `helpdesk`, `document`,
    `train`, `heldout`, `excluded_acl`, `duplicates`); `content_hash` is the SHA-256 of its JSONL file."""

    id: int
    audience: str
    content_hash: str
    counts: dict[str, Any]
    path: str
    since: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class AdapterRecord:
    """An adapter as the registry holds it; `history` lists each status change (`status`, `by`, `at`,
    `reason`)."""

    id: int
    name: str
    audience: str
    base_model: str
    snapshot_id: int | None
    job_id: int | None
    hyperparameters: dict[str, Any]
    metrics: dict[str, Any]
    files: dict[str, Any]
    path: str
    status: str
    reason: str
    history: list[Any]
    created_at: datetime
    promoted_by: str | None
    promoted_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (times as ISO 8601)."""
        out = dict(self.__dict__)
        for key in ("created_at", "promoted_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out



def _snapshot(row: DatasetSnapshot) -> SnapshotRecord:
    return SnapshotRecord(
        id=row.id, audience=row.audience, content_hash=row.content_hash, counts=dict(row.counts or {}),
        path=row.path, since=row.since, created_at=row.created_at,
    )


def _adapter(row: Adapter) -> AdapterRecord:
    return AdapterRecord(
        id=row.id, name=row.name, audience=row.audience, base_model=row.base_model, snapshot_id=row.snapshot_id,
        job_id=row.job_id, hyperparameters=dict(row.hyperparameters or {}), metrics=dict(row.metrics or {}),
        files=dict(row.files or {}), path=row.path, status=row.status, reason=row.reason,
        history=list(row.history or []), created_at=row.created_at, promoted_by=row.promoted_by,
        promoted_at=row.promoted_at,
    )


@transactional
def add_snapshot(session: Session, *, audience: str, content_hash: str, counts: dict[str, Any], path: str,
                 since: datetime | None) -> SnapshotRecord:
    """Record a dataset snapshot written to `path` (JSONL) for `audience`."""
    row = DatasetSnapshot(audience=audience, content_hash=content_hash, counts=counts, path=path, since=since)
    session.add(row)
    session.flush()
    return _snapshot(row)


@transactional
def get_snapshot(session: Session, snapshot_id: int) -> SnapshotRecord:
    """Snapshot `snapshot_id`. Raises NotFoundError when there is none."""
    row = session.get(DatasetSnapshot, snapshot_id)
    if row is None:
        raise NotFoundError(f"dataset snapshot {snapshot_id} not found")
    return _snapshot(row)


@transactional
def last_refresh_at(session: Session, audience: str) -> datetime | None:
    """When the newest adapter for `audience` that passed training (any status but `failed`) had its
    dataset built: documents changed after it are "new" for the next refresh. None: never."""
    at = session.scalar(
        select(func.max(DatasetSnapshot.created_at)).join(Adapter, Adapter.snapshot_id == DatasetSnapshot.id)
        .where(Adapter.audience == audience, Adapter.status != "failed")
    )
    return at


@transactional
def add_adapter(session: Session, *, name: str, audience: str, base_model: str, snapshot_id: int | None,
                job_id: int | None, hyperparameters: dict[str, Any]) -> AdapterRecord:
    """Register a new adapter as `candidate` (files and metrics come with `update_adapter`)."""
    row = Adapter(name=name, audience=audience, base_model=base_model, snapshot_id=snapshot_id, job_id=job_id,
                  hyperparameters=hyperparameters, status="candidate",
                  history=[{"status": "candidate", "by": "finetune", "at": utcnow().isoformat(), "reason": ""}])
    session.add(row)
    session.flush()
    return _adapter(row)


@transactional
def update_adapter(session: Session, adapter_id: int, *, metrics: dict[str, Any] | None = None,
                   files: dict[str, Any] | None = None, path: str | None = None) -> AdapterRecord:
    """Store the adapter's gate `metrics` and its `files` ({name: sha256}) in folder `path`."""
    row = _row(session, adapter_id)
    if metrics is not None:
        row.metrics = {**(row.metrics or {}), **metrics}
    if files is not None:
        row.files = files
    if path is not None:
        row.path = path
    return _adapter(row)


def _row(session: Session, adapter_id: int) -> Adapter:
    row = session.get(Adapter, adapter_id)
    if row is None:
        raise NotFoundError(f"adapter {adapter_id} not found")
    return row


def _set(row: Adapter, status: str, *, by: str, reason: str = "") -> None:
    row.status = status
    row.reason = reason or row.reason
    row.history = [*(row.history or []), {"status": status, "by": by, "at": utcnow().isoformat(), "reason": reason}]
    if status in ("canary", "live"):
        row.promoted_by, row.promoted_at = by, utcnow()


@transactional
def set_status(session: Session, adapter_id: int, status: Status, *, by: str, reason: str = "") -> AdapterRecord:
    """Set an adapter's status directly (`failed` with its reason, `retired`), recording who and when."""
    row = _row(session, adapter_id)
    _set(row, status, by=by, reason=reason)
    return _adapter(row)


@transactional
def get_adapter(session: Session, adapter_id: int) -> AdapterRecord:
    """Adapter `adapter_id`. Raises NotFoundError when there is none."""
    return _adapter(_row(session, adapter_id))


@transactional
def list_adapters(session: Session, *, audience: str | None = None, limit: int = 100) -> list[AdapterRecord]:
    """Adapters, newest first (of one `audience` when given)."""
    stmt = select(Adapter).order_by(Adapter.id.desc()).limit(limit)
    if audience is not None:
        stmt = stmt.where(Adapter.audience == audience)
    return [_adapter(r) for r in session.scalars(stmt)]


@transactional
def serving_adapters(session: Session) -> list[AdapterRecord]:
    """The adapters that answer now: every `live` and `canary` one, of every audience."""
    return [_adapter(r) for r in session.scalars(select(Adapter).where(Adapter.status.in_(("live", "canary"))))]


@dataclass(frozen=True)
class Release:
    """What a promote or rollback changed: adapters now serving (`loaded`) and no longer serving (`unloaded`)."""

    loaded: list[AdapterRecord]
    unloaded: list[AdapterRecord]


@transactional
def promote(session: Session, adapter_id: int, *, by: str, to: Literal["canary", "live"] | None = None) -> Release:
    """Move an adapter one step up, in one transaction: `candidate` -> `canary` (a canary of the same
    audience is retired), `canary` -> `live` (the live one of the same audience is retired); `to="live"`
    takes a candidate straight to live.

    Raises:
        NotFoundError: no such adapter.
        ConflictError: the adapter is `live`, `retired` or `failed`, or `to` is not above its status.
    """
    row = _row(session, adapter_id)
    target = to or {"candidate": "canary", "canary": "live"}.get(row.status)
    order = {"candidate": 0, "canary": 1, "live": 2}
    if row.status not in ("candidate", "canary") or target is None or order[target] <= order[row.status]:
        raise ConflictError(
            f"adapter {adapter_id} is {row.status}: only a candidate (to canary or live) or a canary (to live) "
            f"can be promoted, not to {target!r}"
        )
    replaced = [r for r in session.scalars(select(Adapter).where(
        Adapter.audience == row.audience, Adapter.status == target, Adapter.id != row.id))]
    for other in replaced:
        _set(other, "retired", by=by, reason=f"replaced by adapter {row.id} as {target}")
    _set(row, target, by=by)
    session.flush()
    return Release(loaded=[_adapter(row)], unloaded=[_adapter(r) for r in replaced])


@transactional
def rollback(session: Session, *, audience: str = "everyone", by: str) -> Release:
    """Undo the last release of `audience` in one transaction: the canary is retired; when there was
    no canary, the live adapter is retired and the adapter live before it (if any) is live again.

    Raises:
        ConflictError: `audience` has neither a canary nor a live adapter.
    """
    rows = list(session.scalars(select(Adapter).where(Adapter.audience == audience).order_by(Adapter.id.desc())))
    canary = [r for r in rows if r.status == "canary"]
    live = [r for r in rows if r.status == "live"]
    if canary:
        for r in canary:
            _set(r, "retired", by=by, reason="rolled back")
        return Release(loaded=[], unloaded=[_adapter(r) for r in canary])
    if not live:
        raise ConflictError(f"nothing to roll back for audience {audience!r}: no canary and no live adapter")
    current = live[0]
    _set(current, "retired", by=by, reason="rolled back")
    previous = next((r for r in rows if r.status == "retired" and r.id != current.id
                     and any(h.get("status") == "live" for h in r.history or [])), None)
    if previous is not None:
        _set(previous, "live", by=by, reason=f"restored by the rollback of adapter {current.id}")
    session.flush()
    return Release(loaded=[_adapter(previous)] if previous else [], unloaded=[_adapter(current)])


@transactional
def record_answer_adapter(session: Session, message_id: int, adapter: str) -> None:
    """Remember that adapter `adapter` produced answer `message_id`."""
    session.merge(AnswerAdapter(message_id=message_id, adapter=adapter))


@transactional
def feedback_by_adapter(session: Session) -> dict[str, dict[str, int]]:
    """Thumbs up and down per adapter that produced the rated answers (`base` for none): the admin's
    canary-against-live comparison."""
    out: dict[str, dict[str, int]] = {}
    rows = session.execute(
        select(AnswerAdapter.adapter, Feedback.rating)
        .select_from(Feedback).join(AnswerAdapter, AnswerAdapter.message_id == Feedback.message_id, isouter=True)
    )
    for adapter, rating in rows:
        counts = out.setdefault(adapter or "base", {"up": 0, "down": 0})
        counts["up" if rating > 0 else "down"] += 1
    return out


@transactional
def start_finetune_job(session: Session, params: dict[str, Any]) -> int:
    """A new `finetune` job row, running now; returns its ID."""
    job = Job(kind=FINETUNE_JOB, params=params, status="running", started_at=utcnow(), attempts=1)
    session.add(job)
    session.flush()
    return job.id


@transactional
def finish_finetune_job(session: Session, job_id: int, *, status: str, totals: dict[str, Any], reason: str = "") -> None:
    """Close finetune job `job_id` with `status` (`done` or `failed`), its totals and reason."""
    job = session.get_one(Job, job_id)
    job.status, job.totals, job.reason, job.finished_at = status, totals, reason, utcnow()


@transactional
def take_orphaned_run(session: Session, *, audience: str, new_job_id: int) -> AdapterRecord | None:
    """Close the finetune jobs left `running` by a worker that stopped (call only while holding the
    refresh lease: no live worker runs them) and return the candidate adapter of the newest of them for
    `audience`, whose training the new job `new_job_id` resumes from its checkpoints; None when none."""
    jobs = list(session.scalars(select(Job).where(Job.kind == FINETUNE_JOB, Job.status == "running",
                                                  Job.id != new_job_id).order_by(Job.id.desc())))
    resumed = None
    for job in jobs:
        job.status, job.finished_at = "failed", utcnow()
        job.reason = f"its worker stopped; resumed by job {new_job_id}"
        adapter = session.scalar(select(Adapter).where(Adapter.job_id == job.id, Adapter.status == "candidate"))
        if adapter is not None and resumed is None and adapter.audience == audience:
            adapter.job_id, resumed = new_job_id, _adapter(adapter)
    return resumed


@transactional
def record_progress(session: Session, job_id: int, totals: dict[str, Any]) -> None:
    """Merge `totals` (step, stage, loss...) into running job `job_id`'s totals."""
    job = session.get_one(Job, job_id)
    job.totals = {**(job.totals or {}), **totals}
