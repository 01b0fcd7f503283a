"""Celery tasks for ingestion: thin wrappers that take IDs and call plain functions tests can call."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import redis.exceptions
import sqlalchemy.exc
from celery import shared_task
from qdrant_client.http.exceptions import ResponseHandlingException

from assistant.auth.acl_manifest import AclManifest
from assistant.core import resources
from assistant.core.db.jobs import (
    claim_sync_job,
    fail_job,
    get_job,
    interrupt_job,
    job_lease,
    queue_scheduled_syncs,
    stop_requested,
)
from assistant.core.errors import AssistantError
from assistant.core.jobs import Schedule, get_celery, register_schedule
from assistant.core.resources import Resources
from assistant.core.settings import get_settings
from ingest.pipeline import Ingestor, SyncInterrupted

log = logging.getLogger(__name__)
SYNC_ALL_TASK = "ingest.sync_all"
register_schedule(Schedule(
    "sync-every-source", SYNC_ALL_TASK, every=lambda s: s.jobs.sync_interval_s, enabled=lambda s: bool(s.jobs.sync_interval_s)
))


def __getattr__(name: str):
    # `celery -A ingest.tasks:celery worker|beat` (compose.yaml, the Helm chart) names the app here.
    if name == "celery":
        return get_celery()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Worth a retry with backoff: the database, broker or Qdrant server was briefly out of reach. Anything
# else (a bad path, a full disk, a bug) fails the job with its reason at once.
TRANSIENT_ERRORS = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    httpx.TransportError,
    ResponseHandlingException,
    ConnectionError,
    TimeoutError,
)
_RETRY = dict(
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=True,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=get_settings().jobs.task_max_retries,
)

_ingestor: tuple[Resources, Ingestor] | None = None


def ingestor_for(res: Resources) -> Ingestor:
    """The process's `Ingestor` for `res`, built once (its parser process stays warm between jobs)."""
    global _ingestor
    if _ingestor is None or _ingestor[0] is not res:
        _ingestor = (res, Ingestor(res))
    return _ingestor[1]


class JobStop:
    """The `stop` of one job's sync (`Ingestor.sync(stop=...)`): set when this process shuts down
    (`process`, e.g. `res.stopping`) or when someone asked the job to stop (`request_stop`: an admin's
    Stop, or Ctrl-C on the `assistant ingest` that handed the sync to the server), whichever process
    runs it; read once per file started."""

    def __init__(self, res: Resources, job_id: int, process: threading.Event):
        self.res, self.job_id, self.process = res, job_id, process

    def is_set(self) -> bool:
        return self.process.is_set() or stop_requested(self.res.db, self.job_id)


WATCH_S = 0.5  # how often a sync's watch looks whether the process is shutting down


@contextmanager
def interrupted_when_cut_off(res: Resources, job_id: int) -> Iterator[None]:
    """While sync job `job_id` runs here: once the process shuts down (`res.stopping`: SIGTERM or Ctrl-C
    on `assistant serve`), the sync starts no further file and its files in progress get
    `jobs.shutdown_grace_s` seconds; a run still going then is marked `interrupted` by this watch, since
    the server exits without waiting for it (`assistant.api.app`), and its embedding slices still queued
    are cancelled. Its documents not finished stay `running`, so the resumed job (next start) indexes
    them again, as after a second Ctrl-C."""
    ended = threading.Event()

    def watch() -> None:
        while not res.stopping.wait(WATCH_S):
            if ended.is_set():
                return
        grace = res.settings.jobs.shutdown_grace_s
        if ended.wait(grace):
            return
        job = get_job(res.db, job_id)
        if job.status != "running":  # it stopped at a file boundary meanwhile
            return
        interrupt_job(res.db, job_id, (
            f"the server stopped while files were in progress and did not wait past ASSISTANT_SHUTDOWN_GRACE_S={grace:g} "
            "s; the files not finished are indexed again when the job resumes (server start) or the folder is ingested again"
        ), totals=job.totals)
        log.warning("sync job %s interrupted at shutdown with files in progress", job_id)
        # The slices still queued would hold the interpreter's exit until embedded (minutes with a big
        # batch: Python joins the executor's thread at exit); cancelled, the run stops at once.
        ingestor_for(res).embed_thread.shutdown(wait=False, cancel_futures=True)

    watcher = threading.Thread(target=watch, name=f"assistant-sync-{job_id}-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        ended.set()


def run_sync_job(res: Resources, job_id: int) -> dict:
    """Run the sync job `job_id` unless a live worker runs it already or it is done.

    Its row holds the path and optional ACL manifest (`params["path"]`, `params["acl"]`). Running
    a job twice is harmless: chunk IDs are deterministic and finished files are skipped.

    Returns:
        `{"job_id", "status"}` plus `files` (outcomes recorded) when it ran; status `interrupted` when
        `res.stopping` was set or a stop was requested meanwhile (`JobStop`: the job stopped at a file
        boundary and resumes later).

    Raises:
        Whatever the run raised; the job row is marked failed with it first.
    """
    with job_lease(res.db, job_id) as lease:
        if not lease.acquired:
            return {"job_id": job_id, "status": "running elsewhere"}
        claim = claim_sync_job(res.db, job_id)
        if claim.action != "run":  # missing, done (a redelivered message), stopped before it ran, or superseded
            return {"job_id": job_id, "status": claim.action}
        params = claim.params
        try:
            manifest = AclManifest.from_dict(params["acl"]) if params.get("acl") else None
            with interrupted_when_cut_off(res, job_id):
                outcomes = ingestor_for(res).sync(Path(params["path"]), acl=manifest, job_id=job_id, stop=JobStop(res, job_id, res.stopping))
        except SyncInterrupted as exc:  # shutting down or asked to stop; the job resumes at its next start
            log.warning("%s: %s", exc, "the process is shutting down" if res.stopping.is_set() else "stop requested")
            return {"job_id": job_id, "status": "interrupted", "files": len(exc.outcomes)}
        except AssistantError as exc:  # e.g. the folder is gone: the row must say so, not stay queued
            fail_job(res.db, job_id, exc.message, keep_reason=True)
            raise
        return {"job_id": job_id, "status": "done", "files": len(outcomes)}


def sync_all_sources(res: Resources, *, submit: Callable[[int], None]) -> list[int]:
    """Create a sync job for every source synced before (`queue_scheduled_syncs`: those with none
    unfinished, each for the whole source with its stored manifest) and hand each to `submit`.

    Returns:
        The new jobs' IDs.
    """
    job_ids = queue_scheduled_syncs(res.db)
    for job_id in job_ids:
        submit(job_id)
    return job_ids


@shared_task(name="ingest.sync_source", acks_late=True, reject_on_worker_lost=True, **_RETRY)
def sync_source(job_id: int) -> dict:
    """Celery task: `run_sync_job` on this process's resources."""
    return run_sync_job(resources.current(), job_id)


@shared_task(name=SYNC_ALL_TASK, acks_late=True, **_RETRY)
def sync_all() -> list[int]:
    """Celery task (beat): sync every source; in-process, the syncs run one after the other here."""
    res = resources.current()
    if res.settings.jobs.backend == "inprocess":
        return sync_all_sources(res, submit=lambda job_id: run_sync_job(res, job_id))
    return sync_all_sources(
        res,
        submit=lambda job_id: get_celery().send_task(
            "ingest.sync_source", kwargs={"job_id": job_id}, queue=res.settings.jobs.celery_queue
        ),
    )
