"""Background jobs: Celery in production, the same task functions on an in-process worker by default.

Callers start work by task name (`"ingest.sync_source"`), never by importing the pipeline, so the API
does not depend on `ingest` or `finetune`. The features define their tasks with `celery.shared_task` in
their task modules (`TASK_MODULES`, imported by name), where they also declare what runs periodically
(`register_schedule`) and which tasks go to a queue of their own (`register_queue`): one declaration
serves Celery beat and the in-process beat alike. The SQL job row is the source of truth: a job that was
`queued` or `running` when its process stopped is resubmitted on the next start (and by a periodic
beat task), unless a live worker still holds its `JobLease` (`assistant.core.db.jobs`).
"""

from __future__ import annotations

import fnmatch
import importlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.signals import setup_logging, worker_ready

from assistant.core.db.jobs import job_lease, requeue_job, unfinished_job_ids
from assistant.core.db.session import Database
from assistant.core.log_config import configure_logging
from assistant.core.settings import Settings, get_settings

log = logging.getLogger(__name__)

# Modules that define tasks and declare their schedules and queues, loaded by name so that `core` imports
# no feature (`load_task_modules`).
TASK_MODULES = ["ingest.tasks", "assistant.helpdesk.tasks", "assistant.compliance.tasks", "finetune.tasks"]
# Which task runs each job kind.
JOB_TASKS = {"sync": "ingest.sync_source"}
RESUME_TASK = "jobs.resume_unfinished"
FINETUNE_TASK = "finetune.refresh"
RESUME_INTERVAL_S = 300.0  # Celery beat only: in process, the queue died with the process that held it


@dataclass(frozen=True)
class Schedule:
    """A task submitted periodically, without arguments: by Celery beat with the Celery backend, by the
    `JobDispatcher`'s beat with the in-process one.

    Attributes:
        name: the Celery beat entry's name, e.g. `"sync-every-source"`.
        task: the registered name of the task it submits, e.g. `"ingest.sync_all"`.
        every: from the settings, the seconds between two runs, or a `crontab` (UTC, `crontab_schedule`).
        enabled: from the settings, whether it runs at all.
    """

    name: str
    task: str
    every: Callable[[Settings], float | crontab]
    enabled: Callable[[Settings], bool]

    def seconds_to_next(self, settings: Settings, now: datetime) -> float:
        """Seconds from `now` (UTC) to its next run: the interval, or at least 1 s to the crontab's next time."""
        every = self.every(settings)
        if isinstance(every, crontab):
            return max(1.0, float(every.remaining_estimate(now).total_seconds()))
        return float(every)


_schedules: dict[str, Schedule] = {}
_queues: dict[str, Callable[[Settings], str]] = {}
_timers_to_restart: list[Callable[[Database], Iterable[tuple[str, dict[str, Any]]]]] = []


def register_schedule(schedule: Schedule) -> None:
    """Declare `schedule` (a feature's task module does, when `load_task_modules` imports it); a second
    declaration of the same name replaces the first."""
    _schedules[schedule.name] = schedule


def register_queue(pattern: str, queue_name: Callable[[Settings], str]) -> None:
    """Send the tasks whose names match `pattern` (a glob, e.g. `"finetune.*"`) to the Celery queue that
    `queue_name(settings)` names, instead of `celery_queue`."""
    _queues[pattern] = queue_name


def register_restart(find: Callable[[Database], Iterable[tuple[str, dict[str, Any]]]]) -> None:
    """In process only: at `JobDispatcher.resume_unfinished`, submit each `(task name, kwargs)` that
    `find(db)` returns: work that waited on a timer of the process that stopped (with Celery, the broker
    holds such retries)."""
    _timers_to_restart.append(find)


def load_task_modules() -> None:
    """Import every module of `TASK_MODULES` (once), so that their tasks, schedules and queues are known."""
    for name in TASK_MODULES:
        importlib.import_module(name)


def schedules(settings: Settings) -> list[Schedule]:
    """The declared schedules that `settings` enable, in declaration order (`TASK_MODULES`' order)."""
    load_task_modules()
    return [s for s in _schedules.values() if s.enabled(settings)]


def task_queue(name: str, settings: Settings) -> str:
    """The Celery queue of task `name`: the first `register_queue` pattern it matches, else `celery_queue`."""
    load_task_modules()
    return next((queue_name(settings) for pattern, queue_name in _queues.items() if fnmatch.fnmatchcase(name, pattern)),
                settings.jobs.celery_queue)


def make_celery(settings: Settings) -> Celery:
    """The Celery app with the reliability settings every task relies on.

    Acknowledge late and reject on worker loss (a task whose worker died is redelivered), one
    message prefetched per process, soft/hard time limits from settings, the routes of `register_queue`,
    and a beat schedule of the enabled `Schedule`s plus the resumption of orphaned jobs every 5 minutes.
    """
    app = Celery("assistant", broker=settings.jobs.broker_url, backend=settings.jobs.result_backend, include=TASK_MODULES)
    beat: dict[str, dict[str, Any]] = {"resume-unfinished-jobs": {"task": RESUME_TASK, "schedule": RESUME_INTERVAL_S}}
    beat.update({s.name: {"task": s.task, "schedule": s.every(settings)} for s in schedules(settings)})
    app.conf.update(
        task_acks_late=True,  # a task is acknowledged only after it finished ...
        task_reject_on_worker_lost=True,  # ... and is redelivered if its worker died mid-way
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.jobs.task_soft_time_limit_s,
        task_time_limit=settings.jobs.task_time_limit_s,
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=settings.jobs.celery_queue,
        timezone="UTC",
        beat_schedule=beat,
        task_routes={pattern: {"queue": queue_name(settings)} for pattern, queue_name in _queues.items()},
    )
    app.task(name=RESUME_TASK, ignore_result=True)(_resume_task)
    return app


def crontab_schedule(expression: str) -> crontab:
    """A five-field cron `expression` (minute hour day-of-month month day-of-week, e.g. `"0 3 1 * *"`) as
    Celery's crontab (UTC)."""
    minute, hour, day_of_month, month, day_of_week = expression.split()
    return crontab(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month, day_of_week=day_of_week)


_celery: Celery | None = None


def get_celery() -> Celery:
    """The process's Celery app (configured from settings on first use)."""
    global _celery
    if _celery is None:
        _celery = make_celery(get_settings())
    return _celery


def task_function(name: str) -> Any:
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

    In-process, it also plays Celery beat: one thread submits the task of each enabled `Schedule` at
    its times.
    """

    def __init__(self, settings: Settings):
        self.settings = settings
        self._worker = InProcessWorker() if settings.jobs.backend == "inprocess" else None
        self._stop = threading.Event()
        if self._worker is not None:
            threading.Thread(target=self._beat, name="assistant-beat", daemon=True).start()

    def submit(self, name: str, *, countdown_s: float | None = None, **kwargs: Any) -> None:
        """Queue task `name` with JSON-serialisable `kwargs` (Celery: after `countdown_s` seconds)."""
        if self._worker is not None:
            self._worker.submit(name, kwargs)
        else:
            get_celery().send_task(name, kwargs=kwargs, countdown=countdown_s, queue=task_queue(name, self.settings))

    def join(self, timeout_s: float | None = None) -> bool:
        """In-process only: wait for the queue to drain (True if it did within `timeout_s` seconds)."""
        return self._worker.join(timeout_s) if self._worker else True

    def stop(self) -> None:
        """Stop the in-process beat (the worker thread ends with the process)."""
        self._stop.set()

    def _beat(self) -> None:
        # Each schedule's next run is counted from its previous one (from now, at the start).
        due = {s: time.monotonic() + s.seconds_to_next(self.settings, datetime.now(UTC))
               for s in schedules(self.settings)}
        while due and not self._stop.wait(max(0.0, min(due.values()) - time.monotonic())):
            for schedule, at in list(due.items()):
                if at <= time.monotonic():
                    self.submit(schedule.task)
                    due[schedule] = time.monotonic() + schedule.seconds_to_next(self.settings, datetime.now(UTC))

    def resume_unfinished(self, db: Database) -> list[int]:
        """Resubmit every job left `running` or `interrupted` (in-process: or `queued`) whose lease nobody holds, and,
        in-process, the work of each `register_restart` (webhook deliveries still pending).

        A job that has already run `job_max_attempts` times is marked failed instead, with the reason.

        Returns:
            The IDs of the resubmitted jobs.
        """
        # A queued Celery job still has its message in the broker; in-process, the queue died with us.
        states = ("queued", "running", "interrupted") if self._worker is not None else ("running", "interrupted")
        candidates = unfinished_job_ids(db, states, tuple(JOB_TASKS))
        resumed: list[tuple[int, str]] = []
        for job_id in candidates:
            with job_lease(db, job_id) as lease:
                if not lease.acquired:
                    continue  # a live worker runs it
                kind = requeue_job(db, job_id, max_attempts=self.settings.jobs.max_attempts)
                if kind is not None:
                    resumed.append((job_id, kind))
        for job_id, kind in resumed:
            self.submit(JOB_TASKS[kind], job_id=job_id)
        if self._worker is not None:  # a Celery retry waits in the broker; an in-process timer died with us
            load_task_modules()
            for find in _timers_to_restart:
                for name, kwargs in find(db):
                    self.submit(name, **kwargs)
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


@worker_ready.connect  # type: ignore[untyped-decorator]  # celery has no annotations
def _resume_on_worker_start(**_: Any) -> None:
    # A worker that starts (or restarts after a crash) picks up the jobs that nobody is running.
    try:
        _resume_task()
    except Exception:  # the worker must still start; the beat task retries later
        log.exception("could not resume unfinished jobs at worker start")


@setup_logging.connect  # type: ignore[untyped-decorator]  # celery has no annotations
def _log_like_the_api(**_: Any) -> None:
    # Connected, this makes Celery leave logging to us: workers and beat write the API's format
    # (JSON lines in production, ASSISTANT_LOG_FORMAT) at ASSISTANT_LOG_LEVEL.
    configure_logging(get_settings())
