"""Ingestion jobs for the admin UI: list them, read one with its per-file items, start a folder sync.

Job items name files, and file names can be sensitive, so these routes are for admins (who manage
sources). Work is started by Celery task name through the dispatcher, never by importing `ingest`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AdminDep, AssistantDep, DispatcherDep
from assistant.core.acl_manifest import AclManifest
from assistant.core.db.models import Job, JobItem, Source
from assistant.core.errors import InvalidRequestError, NotFoundError
from assistant.core.jobs import JOB_TASKS

router = APIRouter(prefix="/api")


class JobItemPublic(BaseModel):
    path: str
    status: str
    reason: str
    chunks: int
    duration_s: float


class JobPublic(BaseModel):
    id: int
    kind: str
    status: str
    reason: str
    params: dict[str, Any]
    totals: dict[str, Any]
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    items: list[JobItemPublic] | None = None


class SyncCreate(BaseModel):
    path: str = Field(min_length=1, max_length=4096, description="a folder or file on the server")
    acl: dict[str, Any] | None = Field(default=None, description="ACL manifest: {default, rules}")


def _refuse_manifest_inside_a_source(db, path: Path) -> None:
    """A manifest belongs to a whole folder source: refuse one sent for a path inside a source."""
    with db.session() as session:
        for source in session.scalars(select(Source).where(Source.kind == "folder")):
            if source.path in path.parents:
                raise InvalidRequestError(
                    f"path {str(path)!r} lies inside the source {str(source.path)!r}, whose ACL manifest covers it; "
                    "send the manifest with a sync of that folder instead"
                )


def _public(job: Job, *, with_items: bool) -> JobPublic:
    out = JobPublic(
        id=job.id, kind=job.kind, status=job.status, reason=job.reason, params=job.params or {},
        totals=job.totals or {}, attempts=job.attempts, created_at=job.created_at,
        started_at=job.started_at, finished_at=job.finished_at,
    )
    if with_items:
        out.items = [
            JobItemPublic(path=i.path, status=i.status, reason=i.reason, chunks=i.chunks, duration_s=i.duration_s)
            for i in sorted(job.items, key=lambda i: i.id)
        ]
    return out


@router.get("/jobs", response_model=list[JobPublic])
async def list_jobs(assistant: AssistantDep, _admin: AdminDep, limit: int = Query(50, ge=1, le=500)) -> list[JobPublic]:
    """Recent jobs, newest first (admins only)."""

    def load() -> list[JobPublic]:
        with assistant.resources.db.session() as session:
            jobs = session.scalars(select(Job).order_by(Job.id.desc()).limit(limit)).all()
            return [_public(j, with_items=False) for j in jobs]

    return await run_in_threadpool(load)


@router.get("/jobs/{job_id}", response_model=JobPublic)
async def get_job(job_id: int, assistant: AssistantDep, _admin: AdminDep) -> JobPublic:
    """One job with the outcome of each file (admins only).

    Raises:
        NotFoundError: no such job.
    """

    def load() -> JobPublic:
        with assistant.resources.db.session() as session:
            job = session.get(Job, job_id)
            if job is None:
                raise NotFoundError(f"job {job_id} not found")
            return _public(job, with_items=True)

    return await run_in_threadpool(load)


@router.post("/jobs/sync", response_model=JobPublic, status_code=202)
async def start_sync(body: SyncCreate, assistant: AssistantDep, dispatcher: DispatcherDep, _admin: AdminDep) -> JobPublic:
    """Queue a sync of a folder or file on the server; the job row is written before it is queued.

    Only paths under one of `ASSISTANT_SOURCE_ROOTS` may be synced (symbolic links resolved first),
    so that an admin account cannot publish arbitrary server files such as `/etc` to readers.

    Raises:
        InvalidRequestError: the path is outside the source roots or does not exist on the server,
            or the ACL manifest is invalid (checked here, before anything is queued).
    """
    if "\x00" in body.path or not Path(body.path).is_absolute():
        raise InvalidRequestError(f"path {body.path!r} must be an absolute path on the server, without NUL characters")
    roots = [Path(r).expanduser().resolve() for r in assistant.resources.settings.source_roots]
    path = Path(body.path).resolve()
    if not any(path == root or root in path.parents for root in roots):
        allowed = ", ".join(map(str, roots)) or "none: set ASSISTANT_SOURCE_ROOTS"
        raise InvalidRequestError(f"path {body.path!r} is not under a source root the API may sync (allowed: {allowed})")
    if not path.exists():
        raise InvalidRequestError(f"path {body.path!r} does not exist on the server")
    if body.acl is not None:
        AclManifest.from_dict(body.acl, origin="the ACL manifest ('acl')")
        await run_in_threadpool(_refuse_manifest_inside_a_source, assistant.resources.db, path)

    def create() -> JobPublic:
        with assistant.resources.db.session() as session:
            params: dict[str, Any] = {"path": str(path)}
            if body.acl is not None:
                params["acl"] = body.acl
            job = Job(kind="sync", params=params)
            session.add(job)
            session.flush()
            return _public(job, with_items=False)

    job = await run_in_threadpool(create)
    dispatcher.submit(JOB_TASKS["sync"], job_id=job.id)
    return job
