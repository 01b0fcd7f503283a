"""Background jobs: the backend, Celery, retries and periodic syncs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from assistant.core.urls import AnyUrlText, BrokerUrlText


class JobsSettings(BaseModel):
    """Background jobs: the backend, Celery, retries and periodic syncs.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    backend: Literal["inprocess", "celery"] = "inprocess"
    broker_url: BrokerUrlText = "redis://127.0.0.1:6379/0"
    result_backend: AnyUrlText | None = None
    celery_queue: str = Field(default="assistant", description="queue the tasks are sent to and workers consume")
    task_soft_time_limit_s: int = Field(default=3300, ge=1, description="a task gets SoftTimeLimitExceeded after this")
    task_time_limit_s: int = Field(default=3600, ge=1, description="a task's process is killed after this")
    task_max_retries: int = Field(default=5, ge=0, description="retries of a task that hit a transient error")
    max_attempts: int = Field(default=5, ge=1, description="runs of one job (resumes included) before it fails")
    sync_interval_s: float = Field(
        default=3600.0, ge=0, description="seconds between periodic syncs of every source; 0 = never"
    )
