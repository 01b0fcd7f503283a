"""Celery tasks of the monthly refresh (the GPU queue in production, the in-process worker by default):
thin wrappers that open this process's resources and call `pipeline.run_refresh`."""

from __future__ import annotations

import asyncio

from celery import shared_task

from assistant.adapters.release import publisher_for
from assistant.composition import Assistant
from assistant.core import resources
from assistant.core.errors import ConflictError
from assistant.core.jobs import FINETUNE_TASK, Schedule, crontab_schedule, register_queue, register_schedule
from assistant.core.llm.deferred import DeferredLLM
from assistant.core.resources import Resources
from finetune.config import FinetuneConfig
from finetune.pipeline import RefreshOutcome, run_refresh

register_schedule(Schedule(
    "finetune-refresh", FINETUNE_TASK, every=lambda s: crontab_schedule(s.finetune.schedule_cron),
    enabled=lambda s: s.finetune.schedule_enabled,
))
register_queue("finetune.*", lambda s: s.finetune.celery_queue)  # the GPU workers' queue


def refresh_now(res: Resources, *, audience: str = "everyone", dry_run: bool = False, by: str = "schedule",
                progress=None) -> RefreshOutcome:
    """Run one refresh on `res` (its SQL, vector store and served LLM, opened only when new chunks need
    question-answer pairs) with the settings' configuration; the gate answers evaluation questions
    through the product's answerer when `finetune_gate_answer_questions` of
    `finetune_eval_questions` are set."""
    config = FinetuneConfig.from_settings(res.settings)
    answerer = None
    if config.eval_questions is not None and config.answer_questions and not dry_run:
        answerer = Assistant.build(res).answerer
    return asyncio.run(run_refresh(
        res.db, res.store, config=config, publisher=publisher_for(res.settings),
        llm=DeferredLLM(lambda: res.llm), audience=audience, dry_run=dry_run, by=by, progress=progress,
        answerer=answerer,
    ))


@shared_task(name=FINETUNE_TASK, acks_late=True)
def refresh(audience: str = "everyone", dry_run: bool = False, by: str = "schedule") -> dict:
    """Celery task (beat, monthly; or started by an admin): one refresh. A refresh already running
    makes this one a no-op that says so."""
    try:
        outcome = refresh_now(resources.current(), audience=audience, dry_run=dry_run, by=by)
    except ConflictError as exc:
        return {"status": "skipped", "reason": exc.message}
    return {"job_id": outcome.job_id, "status": outcome.status, "reason": outcome.reason,
            "adapter": outcome.adapter.name if outcome.adapter else None}
