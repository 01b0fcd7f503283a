"""Background jobs: Celery in production, the same task functions on an in-process worker by default.

Callers start work by task name (`"ingest.sync_source"`), never by importing the pipeline, so the API
does not depend on `ingest` or `finetune`. The SQL job row is the source of truth: a job that was
`queued` or `running` when the process stopped is resubmitted on the next start.
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime, timezone
from typing import Any

from celery import Celery
from sqlalchemy import select

from assistant.core.db.models import Job
from assistant.core.db.session import Database
from assistant.core.settings import Settings, get_settings

log = logging.getLogger(__name__)

# Modules that define tasks, loaded by name so that `core` imports neither `ingest` nor `finetune`.
TASK_MODULES = ["ingest.tasks"]


def make_celery(settings: Settings) -> Celery:
    """The Celery app with the reliability settings every task relies on."""
    app = Celery("assistant", broker=settings.broker_url, backend=settings.result_backend, include=TASK_MODULES)
    app.conf.update(
        task_acks_late=True,  # a task is acknowledged only after it finished ...
        task_reject_on_worker_lost=True,  # ... and is redelivered if its worker died mid-way
        worker_prefetch_multiplier=1,
        task_soft_time_limit=3300,
        task_time_limit=3600,
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue="assistant",
        timezone="UTC",
    )
    return app


_celery: Celery | None = None


def get_celery() -> Celery:
    """The process's Celery app (configured from settings on first use)."""
    global _celery
    if _celery is None:
        _celery = make_celery(get_settings())
    return _celery


def task_function(name: str):
    """The plain function behind a registered task, for in-process execution."""
    app = get_celery()
    app.loader.import_default_modules()
    try:
        return app.tasks[name]
    except KeyError as exc:
        raise KeyError(f"no task named {name!r}; known: {sorted(t for t in app.tasks if not t.startswith('celery.'))}") from exc


class InProcessWorker:
    """Runs tasks one at a time on a daemon thread, in submission order (embedded default)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="assistant-jobs", daemon=True)
        self._thread.start()
        self.idle = threading.Event()
        self.idle.set()

    def submit(self, name: str, kwargs: dict[str, Any]) -> None:
        self.idle.clear()
        self._queue.put((name, kwargs))

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until every submitted task has finished; True if it did within `timeout_s`."""
        return self.idle.wait(timeout_s)

    def _loop(self) -> None:
        while True:
            name, kwargs = self._queue.get()
            try:
                task_function(name).run(**kwargs)
            except Exception:  # the task marked its job failed; keep serving the queue
                log.exception("task %s failed", name)
            finally:
                self._queue.task_done()
                if self._queue.unfinished_tasks == 0:
                    self.idle.set()


class JobDispatcher:
    """Submits tasks by name to Celery or to the in-process worker, per `settings.jobs_backend`."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._worker = InProcessWorker() if settings.jobs_backend == "inprocess" else None

    def submit(self, name: str, **kwargs: Any) -> None:
        """Queue task `name` with JSON-serialisable `kwargs`."""
        if self._worker is not None:
            self._worker.submit(name, kwargs)
        else:
            get_celery().send_task(name, kwargs=kwargs)

    def join(self, timeout_s: float | None = None) -> bool:
        """In-process only: wait for the queue to drain."""
        return self._worker.join(timeout_s) if self._worker else True

    def resume_unfinished(self, db: Database) -> list[int]:
        """Resubmit every job left `queued` or `running` by a stopped process. Returns their IDs."""
        with db.session() as session:
            jobs = session.scalars(select(Job).where(Job.status.in_(("queued", "running")))).all()
            ids = []
            for job in jobs:
                job.status = "queued"
                job.reason = f"resumed after restart at {datetime.now(timezone.utc).isoformat()}"
                ids.append((job.id, job.kind))
        for job_id, kind in ids:
            self.submit(JOB_TASKS[kind], job_id=job_id)
        return [i for i, _ in ids]


# Which task runs each job kind.
JOB_TASKS = {"sync": "ingest.sync_source"}
