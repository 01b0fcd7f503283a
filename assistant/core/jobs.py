"""Background jobs: Celery in production, the same task functions on an in-process worker by default.

Callers start work by task name (`"ingest.sync_source"`), never by importing the pipeline, so the API
does not depend on `ingest` or `finetune`. The SQL job row is the source of truth: a job that was
`queued` or `running` when its process stopped is resubmitted on the next start (and by a periodic
beat task), unless a live worker still holds its `JobLease` (`assistant.core.db.jobs`).
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime, timezone
from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.signals import setup_logging, worker_ready
from assistant.core.db.helpdesk import pending_delivery_ids
from assistant.core.db.jobs import job_lease, requeue_job, unfinished_job_ids
from assistant.core.db.session import Database
from assistant.core.settings import Settings, get_settings

log = logging.getLogger(__name__)

# Modules that define tasks, loaded by name so that `core` imports neither `ingest` nor `finetune`.
TASK_MODULES = ["ingest.tasks", "assistant.helpdesk.tasks", "assistant.compliance.tasks", "finetune.tasks"]
# Which task runs each job kind.
JOB_TASKS = {"sync": "ingest.sync_source"}
RESUME_TASK = "jobs.resume_unfinished"
WEBHOOK_TASK = "helpdesk.deliver_webhook"
FINETUNE_TASK = "finetune.refresh"
RESUME_INTERVAL_S = 300.0
RETENTION_TASK = "compliance.apply_retention"


def make_celery(settings: Settings) -> Celery:
    """The Celery app with the reliability settings every task relies on.

    Acknowledge late and reject on worker loss (a task whose worker died is redelivered), one
    message prefetched per process, soft/hard time limits from settings, and a beat schedule that
    syncs every source each `sync_interval_s` and resumes orphaned jobs every 5 minutes.
    """
    app = Celery("assistant", broker=settings.broker_url, backend=settings.result_backend, include=TASK_MODULES)
    beat: dict[str, dict[str, Any]] = {"resume-unfinished-jobs": {"task": RESUME_TASK, "schedule": RESUME_INTERVAL_S}}
    if settings.sync_interval_s:
        beat["sync-every-source"] = {"task": "ingest.sync_all", "schedule": settings.sync_interval_s}
    if settings.retention_interval_s:
        beat["apply-retention"] = {"task": RETENTION_TASK, "schedule": settings.retention_interval_s}
    if settings.finetune_schedule_enabled:
        beat["finetune-refresh"] = {"task": FINETUNE_TASK, "schedule": refresh_schedule(settings)}
    app.conf.update(
        task_acks_late=True,  # a task is acknowledged only after it finished ...
        task_reject_on_worker_lost=True,  # ... and is redelivered if its worker died mid-way
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_time_limit=settings.task_time_limit_s,
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=settings.celery_queue,
        timezone="UTC",
        beat_schedule=beat,
        task_routes={f"{FINETUNE_TASK.split('.')[0]}.*": {"queue": settings.finetune_celery_queue}},
    )
    app.task(name=RESUME_TASK, ignore_result=True)(_resume_task)
    return app


def refresh_schedule(settings: Settings) -> crontab:
    """The monthly refresh's schedule, `finetune_schedule_cron` (minute hour day-of-month month
    day-of-week), as Celery's crontab (UTC)."""
    minute, hour, day_of_month, month, day_of_week = settings.finetune_schedule_cron.split()
    return crontab(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month, day_of_week=day_of_week)


_celery: Celery | None = None


def get_celery() -> Celery:
    """The process's Celery app (configured from settings on first use)."""
    global _celery
    if _celery is None:
        _celery = make_celery(get_settings())
    return _celery


def task_function(name: str):
    """The registered task `name`; `.run(**kwargs)` calls its plain function in this process.

    Raises:
        KeyError: no task has that name.
    """
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
        self.idle = threading.Event()
        self.idle.set()
        self._thread = threading.Thread(target=self._loop, name="assistant-jobs", daemon=True)
        self._thread.start()

    def submit(self, name: str, kwargs: dict[str, Any]) -> None:
        """Queue task `name` with `kwargs`."""
        self.idle.clear()
        self._queue.put((name, kwargs))

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until every submitted task has finished; True if it did within `timeout_s` seconds."""
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
    """Submits tasks by name to Celery or to the in-process worker, per `settings.jobs_backend`.

    In-process, it also plays Celery beat: every `sync_interval_s` seconds it submits `ingest.sync_all`,
    and at each time of `finetune_schedule_cron` the refresh.
    """

    def __init__(self, settings: Settings):
        self.settings = settings
        self._worker = InProcessWorker() if settings.jobs_backend == "inprocess" else None
        self._stop = threading.Event()
        if self._worker is not None and settings.sync_interval_s:
            threading.Thread(target=self._beat, name="assistant-beat", daemon=True).start()
        if self._worker is not None and settings.retention_interval_s:
            threading.Thread(target=self._retention_beat, name="assistant-retention", daemon=True).start()
        if self._worker is not None and settings.finetune_schedule_enabled:
            threading.Thread(target=self._refresh_beat, name="assistant-finetune-beat", daemon=True).start()

    def submit(self, name: str, *, countdown_s: float | None = None, **kwargs: Any) -> None:
        """Queue task `name` with JSON-serialisable `kwargs` (Celery: after `countdown_s` seconds)."""
        if self._worker is not None:
            self._worker.submit(name, kwargs)
        else:
            queue = self.settings.finetune_celery_queue if name == FINETUNE_TASK else self.settings.celery_queue
            get_celery().send_task(name, kwargs=kwargs, countdown=countdown_s, queue=queue)

    def join(self, timeout_s: float | None = None) -> bool:
        """In-process only: wait for the queue to drain (True if it did within `timeout_s` seconds)."""
        return self._worker.join(timeout_s) if self._worker else True

    def stop(self) -> None:
        """Stop the in-process beat (the worker thread ends with the process)."""
        self._stop.set()

    def _beat(self) -> None:
        while not self._stop.wait(self.settings.sync_interval_s):
            self.submit("ingest.sync_all")

    def _retention_beat(self) -> None:
        while not self._stop.wait(self.settings.retention_interval_s):
            self.submit(RETENTION_TASK)

    def _refresh_beat(self) -> None:
        schedule = refresh_schedule(self.settings)
        while not self._stop.wait(max(1.0, schedule.remaining_estimate(datetime.now(timezone.utc)).total_seconds())):
            self.submit(FINETUNE_TASK)

    def resume_unfinished(self, db: Database) -> list[int]:
        """Resubmit every job left `running` (in-process: or `queued`) whose lease nobody holds, and,
        in-process, every webhook delivery still pending.

        A job that has already run `job_max_attempts` times is marked failed instead, with the reason.

        Returns:
            The IDs of the resubmitted jobs.
        """
        # A queued Celery job still has its message in the broker; in-process, the queue died with us.
        states = ("queued", "running") if self._worker is not None else ("running",)
        candidates = unfinished_job_ids(db, states, tuple(JOB_TASKS))
        resumed: list[tuple[int, str]] = []
        for job_id in candidates:
            with job_lease(db, job_id) as lease:
                if not lease.acquired:
                    continue  # a live worker runs it
                kind = requeue_job(db, job_id, max_attempts=self.settings.job_max_attempts)
                if kind is not None:
                    resumed.append((job_id, kind))
        for job_id, kind in resumed:
            self.submit(JOB_TASKS[kind], job_id=job_id)
        if self._worker is not None:  # a Celery retry waits in the broker; an in-process timer died with us
            for delivery_id in pending_delivery_ids(db):
                self.submit(WEBHOOK_TASK, delivery_id=delivery_id)
        if resumed:
            log.info("resumed jobs %s", [i for i, _ in resumed])
        return [i for i, _ in resumed]


def _resume_task() -> list[int]:
    """Celery task body: resume orphaned jobs (beat, every `RESUME_INTERVAL_S` seconds)."""
    settings = get_settings()
    db = Database(settings.resolved_database_url)
    try:
        return JobDispatcher(settings).resume_unfinished(db)
    finally:
        db.dispose()


@worker_ready.connect
def _resume_on_worker_start(**_: Any) -> None:
    # A worker that starts (or restarts after a crash) picks up the jobs that nobody is running.
    try:
        _resume_task()
    except Exception:  # the worker must still start; the beat task retries later
        log.exception("could not resume unfinished jobs at worker start")


@setup_logging.connect
def _log_like_the_api(**_: Any) -> None:
    # Connected, this makes Celery leave logging to us: workers and beat write the API's format
    # (JSON lines in production, ASSISTANT_LOG_FORMAT) at ASSISTANT_LOG_LEVEL.
    from assistant.core.log_config import configure_logging

    configure_logging(get_settings())
