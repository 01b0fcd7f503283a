"""The queries on ingestion jobs and their per-file items: what the API, the CLI, the Celery tasks and
the pipeline read and write about a job, each as one function over a `Database`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import delete, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from assistant.core.db.models import Job, JobItem, Source, utcnow
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError

STOP_KEY = "stop_requested"  # in a job's params: who asked it to stop at its next file boundary
# First key of the two-key PostgreSQL advisory locks that lease jobs ("JOB" in ASCII).
_LEASE_CLASS = 0x4A4F42


@dataclass(frozen=True)
class JobItemRecord:
    """The outcome of one file of a job: its path relative to the source, `status` (queued, running,
    or the file's outcome: done, skipped, failed, ...), the reason of a failure, chunks written and
    seconds spent, and the file's ACL (None: not recorded). `path`, `reason` and `acl` are None where
    the viewer may not see the file's name (`assistant.operations.job_views.jobs_seen_by`)."""

    path: str | None
    status: str
    reason: str | None
    chunks: int
    duration_s: float
    acl: list[str] | None = None


@dataclass(frozen=True)
class JobRecord:
    """A job as listed to an admin: kind (`sync`), status (queued, running, done, failed), the reason
    of a failure, `params` (`path`, optional `acl` manifest), `totals` (outcome counts, chunks,
    seconds per stage), attempts and UTC times; `items` only when asked for (`get_job`). `withheld`:
    the job ingests an upload whose file name the viewer may not see (path and reasons are None)."""

    id: int
    kind: str
    status: str
    reason: str | None
    params: dict[str, Any]
    totals: dict[str, Any]
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    items: list[JobItemRecord] | None = field(default=None)
    withheld: bool = False


@dataclass(frozen=True)
class SyncClaim:
    """What a worker may do with a sync job: `run` it with `params`, or leave it because it is `missing`,
    already `done`, `stopped` before it started (`operations.store.request_stop`), or `superseded` by a
    newer sync of the same source (then marked failed)."""

    action: Literal["run", "missing", "done", "stopped", "superseded"]
    params: dict[str, Any] = field(default_factory=dict)


def _record(job: Job, *, with_items: bool) -> JobRecord:
    items = None
    if with_items:
        items = [
            JobItemRecord(path=i.path, status=i.status, reason=i.reason, chunks=i.chunks, duration_s=i.duration_s, acl=i.acl)
            for i in sorted(job.items, key=lambda i: i.id)
        ]
    return JobRecord(
        id=job.id, kind=job.kind, status=job.status, reason=job.reason, params=job.params or {},
        totals=job.totals or {}, attempts=job.attempts, created_at=job.created_at,
        started_at=job.started_at, finished_at=job.finished_at, items=items,
    )


def recent_jobs(db: Database, limit: int) -> list[JobRecord]:
    """The `limit` most recent jobs, newest first, without their items."""
    with db.session() as session:
        return [_record(j, with_items=False) for j in session.scalars(select(Job).order_by(Job.id.desc()).limit(limit))]


def get_job(db: Database, job_id: int) -> JobRecord:
    """Job `job_id` with the outcome of each file, in the order the files were listed.

    Raises:
        NotFoundError: no such job.
    """
    with db.session() as session:
        job = session.get(Job, job_id)
        if job is None:
            raise NotFoundError(f"job {job_id} not found")
        return _record(job, with_items=True)


def syncs_ahead(db: Database, job_id: int) -> list[JobRecord]:
    """The sync jobs that job `job_id` waits behind while it is queued: those running, and those queued
    before it (workers take jobs in order), oldest first, without their items."""
    with db.session() as session:
        jobs = session.scalars(
            select(Job).where(Job.kind == "sync", Job.id != job_id, Job.status.in_(("queued", "running"))).order_by(Job.id)
        )
        return [_record(j, with_items=False) for j in jobs if j.status == "running" or j.id < job_id]


def queue_sync_job(db: Database, params: dict[str, Any]) -> JobRecord:
    """A new queued sync job with `params` (`path`, optional `acl` manifest as a dict)."""
    with db.session() as session:
        job = Job(kind="sync", params=params)
        session.add(job)
        session.flush()
        return _record(job, with_items=False)


def _newer_sync_of_same_source(session: Session, job: Job) -> int | None:
    """The ID of a sync job created after `job` for the same source (or the same path), if any."""
    for other in session.scalars(select(Job).where(Job.kind == "sync", Job.id > job.id).order_by(Job.id.desc())):
        same_source = job.source_id is not None and other.source_id == job.source_id
        if same_source or (other.params or {}).get("path") == (job.params or {}).get("path"):
            return other.id
    return None


def claim_sync_job(db: Database, job_id: int) -> SyncClaim:
    """Decide, in one transaction, whether sync job `job_id` is to run: a job created before another
    sync of the same source is marked failed as superseded (replaying it would re-apply what it
    carried, an older ACL manifest, over the newer run)."""
    with db.session() as session:
        job = session.get(Job, job_id)
        if job is None:
            return SyncClaim("missing")
        if job.status == "done":  # a redelivered or resumed message of a finished job
            return SyncClaim("done")
        if job.status == "interrupted" and STOP_KEY in (job.params or {}):
            return SyncClaim("stopped")
        newer = _newer_sync_of_same_source(session, job)
        if newer is not None:
            job.status, job.finished_at = "failed", utcnow()
            job.reason = f"superseded by job {newer} of the same source, started after it; not run again"
            return SyncClaim("superseded")
        return SyncClaim("run", dict(job.params))


def fail_job(db: Database, job_id: int, reason: str, *, keep_reason: bool = False) -> None:
    """Mark job `job_id` failed now with `reason`; with `keep_reason`, a job already failed keeps
    the reason it was given first (the run's own, more precise one)."""
    with db.session() as session:
        job = session.get_one(Job, job_id)
        if keep_reason and job.status == "failed":
            return
        job.status, job.finished_at, job.reason = "failed", utcnow(), reason


def interrupt_job(db: Database, job_id: int, reason: str, *, totals: dict[str, Any]) -> None:
    """Mark job `job_id` interrupted now (stopped at a file boundary by a signal) with `reason` and its
    `totals` so far: `resume_unfinished` runs it again, as does a new sync of its source."""
    with db.session() as session:
        job = session.get_one(Job, job_id)
        by = (job.params or {}).get(STOP_KEY)
        job.status, job.finished_at, job.totals, job.reason = "interrupted", utcnow(), totals, f"stopped by {by}: {reason}" if by else reason


def stop_requested(db: Database, job_id: int) -> bool:
    """Whether someone asked job `job_id` to stop (`operations.store.request_stop`) since it was last queued."""
    with db.session() as session:  # one small read per file started
        return STOP_KEY in (session.scalar(select(Job.params).where(Job.id == job_id)) or {})


def start_sync_job(db: Database, job_id: int | None, *, source_id: int, path: str) -> int:
    """Mark sync job `job_id` (a new one for `path` when None) running for source `source_id`,
    counting the attempt; returns its ID."""
    with db.session() as session:
        if job_id is None:
            job = Job(kind="sync", source_id=source_id, params={"path": path})
            session.add(job)
            session.flush()
            job_id = job.id
        job = session.get_one(Job, job_id)
        job.source_id = source_id
        job.status, job.started_at, job.finished_at = "running", utcnow(), None
        job.attempts = (job.attempts or 0) + 1
        return job_id


def reset_items(db: Database, job_id: int, paths: list[str], acls: list[list[str]]) -> list[int]:
    """Queued items for `paths` of job `job_id` with the files' `acls` (one each), replacing any it had
    (a resumed job starts its items afresh: the files finished before the crash are skipped fast);
    returns their IDs in order."""
    with db.session() as session:
        session.execute(delete(JobItem).where(JobItem.job_id == job_id))
        items = [JobItem(job_id=job_id, path=rel, acl=acl, status="queued") for rel, acl in zip(paths, acls, strict=True)]
        session.add_all(items)
        session.flush()
        return [item.id for item in items]


def add_item(db: Database, job_id: int, path: str, acl: list[str]) -> int:
    """A queued item of job `job_id` for `path` (an attachment found while the job runs) with the
    file's `acl`; its ID."""
    with db.session() as session:
        item = JobItem(job_id=job_id, path=path, acl=acl, status="queued")
        session.add(item)
        session.flush()
        return item.id


def record_item(
    db: Database, job_id: int, item_id: int | None, *, path: str, status: str, reason: str, chunks: int,
    duration_s: float, document_id: str,
) -> None:
    """Write a file's outcome to item `item_id` of job `job_id`, or to a new item for `path` when None.

    Args:
        status: the outcome (done, skipped, failed, deleted, ...), with its `reason`.
        chunks: the document's chunk count; `duration_s`: wall-clock seconds spent on it.
        document_id: the ID of the document the file is.
    """
    values = dict(status=status, reason=reason, chunks=chunks, duration_s=duration_s, document_id=document_id)
    with db.session() as session:
        if item_id is None:
            session.add(JobItem(job_id=job_id, path=path, **values))
        else:
            session.execute(update(JobItem).where(JobItem.id == item_id).values(**values))


def finish_sync_job(db: Database, job_id: int, *, source_id: int, totals: dict[str, float]) -> None:
    """Mark job `job_id` done with its `totals` and record the sync time on source `source_id`."""
    with db.session() as session:
        job = session.get_one(Job, job_id)
        job.status, job.finished_at, job.totals, job.reason = "done", utcnow(), totals, ""
        session.get_one(Source, source_id).last_synced_at = utcnow()


def queue_scheduled_syncs(db: Database) -> list[int]:
    """A new queued sync job for every source that has been synced before and has none unfinished,
    syncing the whole source (its folder, or the single file of a file source) with the manifest
    stored with the source; returns the new jobs' IDs."""
    with db.session() as session:
        new_jobs = []
        for source in session.scalars(select(Source).order_by(Source.id)).all():
            jobs = session.scalars(
                select(Job).where(Job.source_id == source.id, Job.kind == "sync").order_by(Job.id.desc())
            ).all()
            if not jobs or any(j.status in ("queued", "running") for j in jobs):
                continue
            job = Job(kind="sync", source_id=source.id, params={"path": str(source.path), "scheduled": True})
            session.add(job)
            new_jobs.append(job)
        session.flush()
        return [job.id for job in new_jobs]


def unfinished_job_ids(db: Database, states: tuple[str, ...], kinds: tuple[str, ...]) -> list[int]:
    """IDs of the jobs of `kinds` whose status is one of `states` (e.g. queued, running)."""
    with db.session() as session:
        return list(session.scalars(select(Job.id).where(Job.status.in_(states), Job.kind.in_(kinds))).all())


def requeue_job(db: Database, job_id: int, *, max_attempts: int) -> str | None:
    """Queue job `job_id` again after its worker stopped, unless it is finished or gone (None), or has
    run `max_attempts` times already: then it is marked failed with the reason, keeping the last one.

    Returns:
        The job's kind when it was queued again, else None.
    """
    with db.session() as session:
        job = session.get(Job, job_id)
        if job is None or job.status not in ("queued", "running", "interrupted"):
            return None
        now = utcnow().isoformat()
        if job.attempts >= max_attempts:
            job.status, job.finished_at = "failed", utcnow()
            job.reason = (
                f"gave up at {now} after {job.attempts} attempts "
                f"(ASSISTANT_JOB_MAX_ATTEMPTS={max_attempts}); last: {job.reason}"
            )
            return None
        job.status, job.reason = "queued", f"resumed at {now} after its worker stopped"
        job.params = {k: v for k, v in (job.params or {}).items() if k != STOP_KEY}
        return job.kind


class JobLease:
    """An exclusive claim on one job while it runs, released when its holder dies.

    On PostgreSQL it is a session advisory lock on a connection held for the lease's life: the
    server drops it the moment the holder's connection closes, including when the worker is killed.
    On SQLite (the embedded default: one process) it is a process-local lock.
    """

    _local: dict[int, threading.Lock] = {}
    _local_guard = threading.Lock()

    def __init__(self, db: Database, job_id: int):
        self.db = db
        self.job_id = job_id
        self.acquired = False
        self._conn: Connection | None = None

    def __enter__(self) -> JobLease:
        if self.db.engine.dialect.name == "postgresql":
            self._conn = self.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self.acquired = bool(
                self._conn.execute(
                    text("SELECT pg_try_advisory_lock(:c, :j)"), {"c": _LEASE_CLASS, "j": self.job_id}
                ).scalar()
            )
            if not self.acquired:
                self._conn.close()
                self._conn = None
        else:
            with self._local_guard:
                lock = self._local.setdefault(self.job_id, threading.Lock())
            self.acquired = lock.acquire(blocking=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.acquired:
            return
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock(:c, :j)"), {"c": _LEASE_CLASS, "j": self.job_id})
            finally:
                self._conn.close()
                self._conn = None
        else:
            self._local[self.job_id].release()
        self.acquired = False


@contextmanager
def job_lease(db: Database, job_id: int) -> Iterator[JobLease]:
    """`with job_lease(db, id) as lease:` and test `lease.acquired` (False: a live worker runs it)."""
    with JobLease(db, job_id) as lease:
        yield lease


def update_job_totals(db: Database, job_id: int, totals: dict[str, Any]) -> None:
    """Write the running counts of job `job_id` (files done of total, chunks, OCR pages, rate, ETA),
    so that `assistant jobs` and the API show a running job's progress; its status is untouched."""
    with db.session() as session:
        job = session.get(Job, job_id)
        if job is not None and job.status == "running":
            job.totals = dict(totals)
