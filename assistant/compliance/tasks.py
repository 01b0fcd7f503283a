"""The Celery task that applies retention (Celery beat in production, the in-process beat by default)."""

from __future__ import annotations

import logging

from celery import shared_task

from assistant.compliance.retention import apply_retention
from assistant.core import resources
from assistant.core.jobs import Schedule, register_schedule

log = logging.getLogger(__name__)
RETENTION_TASK = "compliance.apply_retention"
register_schedule(Schedule(
    "apply-retention", RETENTION_TASK, every=lambda s: s.retention.interval_s,
    enabled=lambda s: bool(s.retention.interval_s),
))


@shared_task(name=RETENTION_TASK, acks_late=True)
def apply_retention_task() -> dict:
    """Celery task: `apply_retention` on this process's resources; returns (and logs) its report."""
    res = resources.current()
    report = apply_retention(res.db, settings=res.settings, store=res.store).to_dict()
    log.info("retention deleted %s", report["deleted"])
    return report
