"""Ingestion handed over by the command line on the server's own machine (`assistant ingest` while
`assistant serve` holds the embedded vector store, which only one process may open).

Callers prove they are local twice: the request comes from a loopback address, and it carries the
token derived from the server's signing key (`signing.local_ingest_token`), which only a process
that can read the server's data folder or environment can compute. Such a caller could run the
whole pipeline itself had the store been free, so no source-root restriction applies here; remote
admins keep using `POST /api/jobs/sync`, limited to `ASSISTANT_SOURCE_ROOTS`.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from fastapi import APIRouter, Depends, Header, Request
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AssistantDep, DispatcherDep, RowId
from assistant.api.routes.jobs import queue_sync
from assistant.api.schemas.local_ingest import LocalSourceRemove, LocalSyncCreate, LocalSyncStop
from assistant.auth.signing import local_ingest_token
from assistant.compliance.audit import record_event
from assistant.core.db.jobs import JobRecord, syncs_ahead
from assistant.core.db.jobs import get_job as load_job
from assistant.core.errors import AuthenticationError, InvalidRequestError
from assistant.core.principals import Principal
from assistant.operations.sources import remove_source
from assistant.operations.store import request_stop

TOKEN_HEADER = "X-Assistant-Local-Token"
_LOOPBACK = {"127.0.0.1", "::1"}


def require_local(request: Request, token: str | None = Header(default=None, alias=TOKEN_HEADER)) -> None:
    """Let through only loopback callers with the local token.

    Raises:
        AuthenticationError: another address, or a missing or wrong token.
    """
    host = request.client.host if request.client else ""
    expected = local_ingest_token(request.app.state.settings)
    if host not in _LOOPBACK or not token or not hmac.compare_digest(token, expected):
        raise AuthenticationError("the local ingestion endpoint takes requests from this machine's command line only")


router = APIRouter(prefix="/api/local", include_in_schema=False, dependencies=[Depends(require_local)])


@router.post("/ingest", response_model=JobRecord, status_code=202)
async def local_ingest(body: LocalSyncCreate, assistant: AssistantDep, dispatcher: DispatcherDep) -> JobRecord:
    """Queue a sync of a local path for the command line; it follows the job with `GET /api/local/jobs/{id}`.

    Raises:
        InvalidRequestError: the path is not absolute or does not exist, or the manifest is invalid.
    """
    if "\x00" in body.path or not Path(body.path).is_absolute():
        raise InvalidRequestError(f"path {body.path!r} must be an absolute path, without NUL characters")
    return await queue_sync(Path(body.path).resolve(), body.acl, assistant=assistant, dispatcher=dispatcher, shown=body.path)


@router.get("/jobs/{job_id}", response_model=JobRecord)
async def local_job(job_id: RowId, assistant: AssistantDep) -> JobRecord:
    """One job with its live totals and per-file items.

    Raises:
        NotFoundError: no such job.
    """
    return await run_in_threadpool(load_job, assistant.resources.db, job_id)


@router.get("/jobs/{job_id}/ahead", response_model=list[JobRecord])
async def local_jobs_ahead(job_id: RowId, assistant: AssistantDep) -> list[JobRecord]:
    """The syncs job `job_id` waits behind (running, or queued before it), oldest first, so that the
    command line can say what it waits for."""
    return await run_in_threadpool(syncs_ahead, assistant.resources.db, job_id)


@router.post("/jobs/{job_id}/stop", response_model=JobRecord, status_code=202)
async def local_stop(job_id: RowId, body: LocalSyncStop, assistant: AssistantDep) -> JobRecord:
    """Stop a sync at its next file boundary for the command line (Ctrl-C on the `assistant ingest`
    that handed it over), as `POST /api/jobs/{id}/stop` does for an admin; audited as the CLI's user.

    Raises:
        NotFoundError: no such job.
        ConflictError: code `job_not_running`: the job is not a queued or running sync.
    """
    db = assistant.resources.db
    job = await run_in_threadpool(request_stop, db, job_id, by=body.by)
    await run_in_threadpool(
        record_event, db, principal=Principal(name=body.by), action="admin.source", auth_method="cli",
        details={"change": "stop", "job_id": job_id, "path": job.params.get("path")},
    )
    return job


@router.post("/sources/remove")
async def local_source_remove(body: LocalSourceRemove, assistant: AssistantDep) -> dict:
    """Remove a source for the command line (`assistant sources remove` while the server holds the
    embedded store), as the command does in process; audited as the CLI's user.

    Returns:
        `{"path", "documents", "chunks"}` removed (`RemovedSource`).

    Raises:
        InvalidRequestError: the path is not absolute.
        NotFoundError: no source is registered for the path.
        ConflictError: code `sync_running`: a sync of the source is queued or running.
    """
    if "\x00" in body.path or not Path(body.path).is_absolute():
        raise InvalidRequestError(f"path {body.path!r} must be an absolute path, without NUL characters")
    removed = await run_in_threadpool(remove_source, assistant.resources, Path(body.path))
    await run_in_threadpool(
        record_event, assistant.resources.db, principal=Principal(name=body.by), action="admin.source",
        auth_method="cli", details={"change": "remove", "path": removed.path},
    )
    return removed.to_dict()
