"""Ingestion jobs for the admin UI: list them, read one with its per-file items, start a folder sync,
stop a sync at its next file boundary.

Job items name files, and file names can be sensitive, so these routes are for admins (who manage
sources), and an upload's job names its file only where the admin may read the upload. Work is started by Celery task name through the dispatcher, never by importing `ingest`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from assistant.api.audit_origin import request_origin
from assistant.api.deps import AdminDep, AssistantDep, DispatcherDep, RowId
from assistant.api.schemas.jobs import SyncCreate
from assistant.auth.acl_manifest import AclManifest
from assistant.compliance.audit import record_event
from assistant.core.db.jobs import JobRecord, queue_sync_job, recent_jobs
from assistant.core.db.jobs import get_job as load_job
from assistant.core.db.sources import check_manifest_scope, list_sources
from assistant.core.errors import InvalidRequestError
from assistant.core.jobs import JOB_TASKS
from assistant.core.visibility import Visibility
from assistant.operations.job_views import jobs_seen_by
from assistant.operations.store import request_stop

router = APIRouter(prefix="/api")


@router.get("/jobs", response_model=list[JobRecord])
async def list_jobs(assistant: AssistantDep, admin: AdminDep, limit: int = Query(50, ge=1, le=500)) -> list[JobRecord]:
    """Recent jobs, newest first (admins only; an upload's file name only where the admin may read it)."""
    db = assistant.resources.db
    return await run_in_threadpool(lambda: jobs_seen_by(db, recent_jobs(db, limit), visibility=Visibility(db, admin)))


@router.get("/jobs/{job_id}", response_model=JobRecord)
async def get_job(job_id: RowId, assistant: AssistantDep, admin: AdminDep) -> JobRecord:
    """One job with the outcome of each file (admins only; an upload's file name only where the admin
    may read it).

    Raises:
        NotFoundError: no such job.
    """
    db = assistant.resources.db
    return await run_in_threadpool(lambda: jobs_seen_by(db, [load_job(db, job_id)], visibility=Visibility(db, admin))[0])


@router.post("/jobs/sync", response_model=JobRecord, status_code=202)
async def start_sync(
    body: SyncCreate, assistant: AssistantDep, dispatcher: DispatcherDep, admin: AdminDep, request: Request
) -> JobRecord:
    """Queue a sync of a folder or file on the server; the job row is written before it is queued.

    Only paths under one of `ASSISTANT_SOURCE_ROOTS` may be synced (symbolic links resolved first),
    so that an admin account cannot publish arbitrary server files such as `/etc` to readers.

    Raises:
        InvalidRequestError: the path is outside the source roots or does not exist on the server,
            or the ACL manifest is invalid (checked here, before anything is queued).
    """
    if "\x00" in body.path or not Path(body.path).is_absolute():
        raise InvalidRequestError(f"path {body.path!r} must be an absolute path on the server, without NUL characters")
    roots = [Path(r).expanduser().resolve() for r in assistant.resources.settings.ingest.source_roots]
    path = Path(body.path).resolve()
    if not any(path == root or root in path.parents for root in roots):
        allowed = ", ".join(map(str, roots)) or "none: set ASSISTANT_SOURCE_ROOTS"
        raise InvalidRequestError(f"path {body.path!r} is not under a source root the API may sync (allowed: {allowed})")
    job = await queue_sync(path, body.acl, assistant=assistant, dispatcher=dispatcher, shown=body.path)
    await run_in_threadpool(
        record_event, assistant.resources.db, principal=admin, action="admin.acl_manifest" if body.acl else "admin.source",
        details={"change": "sync", "job_id": job.id, "path": str(path), **({"acl": body.acl} if body.acl else {})},
        **request_origin(request),
    )
    return job


@router.post("/jobs/{job_id}/stop", response_model=JobRecord, status_code=202)
async def stop_sync(job_id: RowId, assistant: AssistantDep, admin: AdminDep, request: Request) -> JobRecord:
    """Stop a sync at its next file boundary, as a first Ctrl-C stops one on the command line: the
    files in progress are finished, the job ends `interrupted` (a queued one at once) and resumes at
    the server's next start or with the next sync of its folder. Audited (`admin.source`, change `stop`).

    Returns:
        The job as it is now (a running one is still `running` until its files in progress end).

    Raises:
        NotFoundError: no such job.
        ConflictError: code `job_not_running`: the job is not a queued or running sync.
    """
    db = assistant.resources.db
    job = await run_in_threadpool(request_stop, db, job_id, by=admin.name)
    await run_in_threadpool(
        record_event, db, principal=admin, action="admin.source",
        details={"change": "stop", "job_id": job_id, "path": job.params.get("path")}, **request_origin(request),
    )
    return (await run_in_threadpool(jobs_seen_by, db, [job], visibility=Visibility(db, admin)))[0]


async def queue_sync(path: Path, acl: dict[str, Any] | None, *, assistant, dispatcher, shown: str) -> JobRecord:
    """Check `path` and the manifest, write a queued sync job and hand it to the dispatcher.

    Args:
        path: the resolved absolute path on the server.
        acl: the ACL manifest as a dict, or None.
        assistant / dispatcher: the app's.
        shown: the path as the caller gave it (for messages).

    Raises:
        InvalidRequestError: the path does not exist, or the manifest is invalid or covers part of a source.
    """
    if not path.exists():
        raise InvalidRequestError(f"path {shown!r} does not exist on the server")
    if acl is not None:
        AclManifest.from_dict(acl, origin="the ACL manifest ('acl')")
        sources = await run_in_threadpool(list_sources, assistant.resources.db)
        check_manifest_scope(sources, path, remedy="send the manifest with a sync of that folder instead")
    params: dict[str, Any] = {"path": str(path)}
    if acl is not None:
        params["acl"] = acl
    job = await run_in_threadpool(queue_sync_job, assistant.resources.db, params)
    dispatcher.submit(JOB_TASKS["sync"], job_id=job.id)
    return job
