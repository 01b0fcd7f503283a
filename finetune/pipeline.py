"""One refresh, end to end: dataset snapshot -> LoRA training -> gate against live -> canary. Runs never
overlap; a run that fails leaves the live adapter as it was, with a failed job and its reason."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assistant.adapters import store as registry_db
from assistant.adapters.release import AdapterPublisher
from assistant.answering.grounding import Grounder
from assistant.core.db.jobs import job_lease
from assistant.core.db.session import Database
from assistant.core.errors import ConflictError
from assistant.core.llm.base import LLM
from assistant.core.vectorstore.base import VectorStore
from finetune.config import FinetuneConfig, check_audience
from finetune.dataset import build_dataset, read_snapshot
from finetune.evaluate import AnswerCheck, answer_questions, eval_pairs, run_gate
from finetune.publish import publish_candidate
from finetune.registry import adapter_dir, log_path, mark_failed, register_candidate
from finetune.train import train_adapter

if TYPE_CHECKING:
    from assistant.answering import Answerer

log = logging.getLogger(__name__)

# The lease every refresh holds while it runs (job IDs start at 1, so 0 is free for it).
REFRESH_LEASE_ID = 0
QA_MAX_TOKENS = 200


@dataclass(frozen=True)
class RefreshOutcome:
    """How a refresh ended: `status` `done` (a canary, or a dry run's snapshot) or `failed` with `reason`."""

    job_id: int
    status: str
    reason: str
    snapshot: registry_db.SnapshotRecord | None = None
    adapter: registry_db.AdapterRecord | None = None


def qa_writer(llm: LLM) -> Callable:
    """`write_qa` for the dataset: the LLM's greedy completion of a chat."""

    async def write(messages: list) -> str:
        return await llm.complete(messages, max_tokens=QA_MAX_TOKENS, temperature=0.0)

    return write


def lexical_grounder(chunks: list) -> Grounder:
    """A `Grounder` over `chunks` judging by shared words and numbers only (no embedder to load): the
    stricter of its tests, so a pair is kept only when the chunk states what the answer says."""
    return Grounder(chunks)


async def run_refresh(db: Database, store: VectorStore, *, config: FinetuneConfig, publisher: AdapterPublisher,
                      llm: LLM | None, audience: str = "everyone", dry_run: bool = False, by: str = "schedule",
                      progress: Callable[[dict], None] | None = None,
                      make_grounder: Callable[[list], Grounder] = lexical_grounder,
                      answerer: Answerer | None = None) -> RefreshOutcome:
    """Run one refresh for `audience`.

    Args:
        llm: writes question-answer pairs from new chunks (None: no document rows).
        dry_run: build and record the dataset snapshot only.
        by: who started it (`schedule`, an admin's name): recorded on the canary.
        progress: called with `{"stage": ...}` and each training step's log.
        answerer: the product's answerer; with it (and `config.answer_questions` of
            `config.eval_questions`), the gate also compares the answers of candidate and live
            (`finetune.evaluate.AnswerCheck`). None: likelihoods only.

    Returns:
        The outcome; a failure is recorded (job `failed`, candidate `failed`) and returned, not raised.

    Raises:
        ConflictError: another refresh is running.
        InvalidRequestError: `audience` is neither `everyone` nor `group:NAME`.
    """
    audience = check_audience(audience)
    report = progress or (lambda entry: None)
    with job_lease(db, REFRESH_LEASE_ID) as lease:
        if not lease.acquired:
            raise ConflictError("a finetune refresh is already running; two never overlap")
        job_id = registry_db.start_finetune_job(db, {"audience": audience, "dry_run": dry_run, "by": by})
        snapshot = None
        adapter: registry_db.AdapterRecord | None = None
        try:
            # A run killed mid-training is continued: same snapshot, same folder, from its last checkpoint.
            adapter = None if dry_run else registry_db.take_orphaned_run(db, audience=audience, new_job_id=job_id)
            if adapter is not None and adapter.snapshot_id is not None:
                snapshot = registry_db.get_snapshot(db, adapter.snapshot_id)
            else:
                report({"stage": "dataset"})
                snapshot = await build_dataset(
                    db, store, audience=audience, root=config.root, heldout_share=config.heldout_share,
                    since=registry_db.last_refresh_at(db, audience), write_qa=qa_writer(llm) if llm else None,
                    make_grounder=make_grounder, qa_per_chunk=config.qa_per_chunk, max_new_chunks=config.max_new_chunks,
                )
            registry_db.record_progress(db, job_id, {"stage": "dataset", "snapshot_id": snapshot.id, **snapshot.counts})
            rows = read_snapshot(snapshot.path)
            if dry_run:
                registry_db.finish_finetune_job(db, job_id, status="done", totals={"snapshot_id": snapshot.id, **snapshot.counts})
                return RefreshOutcome(job_id, "done", "dry run: dataset only", snapshot)
            if not any(r.split == "train" for r in rows):
                raise ConflictError(f"nothing new to train on for audience {audience!r} since the last refresh")
            if adapter is None:
                adapter = register_candidate(db, config, audience=audience, snapshot_id=snapshot.id, job_id=job_id)
            report({"stage": "train", "adapter": adapter.name})
            def on_step(entry: dict) -> None:
                report({"stage": "train", **entry})
                registry_db.record_progress(db, job_id, {"stage": "train", **entry})

            trained = train_adapter(rows, base_model=config.base_model, hp=config.lora,
                                    out_dir=adapter_dir(config, adapter.name), log_path=log_path(config, adapter.name),
                                    progress=on_step)
            adapter = registry_db.update_adapter(db, adapter.id, files=trained.files, metrics={
                "train_steps": trained.steps, "train_loss": trained.loss, "train_tokens": trained.tokens,
                "train_seconds": round(trained.seconds, 1)})
            report({"stage": "gate"})
            live = next((a for a in registry_db.serving_adapters(db) if a.audience == audience and a.status == "live"), None)
            asked = answer_questions(config.eval_questions, config.answer_questions) if answerer is not None else []
            check = AnswerCheck(answerer, asked, max_tokens=config.answer_max_tokens,
                                tolerance=config.answer_tolerance) if asked else None
            # In a worker thread: the evaluation runs each answer in an event loop of its own.
            gate = await asyncio.to_thread(run_gate, adapter, live, rows=rows, questions=eval_pairs(config.eval_questions),
                                           tolerance=config.gate_tolerance, answers=check, served=llm)
            adapter = registry_db.update_adapter(db, adapter.id, metrics={**gate.metrics, "gate_passed": gate.passed})
            if not gate.passed:
                raise ConflictError(f"adapter {adapter.name} failed the gate: {gate.reason}")
            report({"stage": "publish"})
            publish_candidate(db, adapter, publisher=publisher, by=by)
            adapter = registry_db.get_adapter(db, adapter.id)
            registry_db.finish_finetune_job(db, job_id, status="done", totals={
                "snapshot_id": snapshot.id, "adapter_id": adapter.id, "adapter": adapter.name, **adapter.metrics})
            return RefreshOutcome(job_id, "done", "", snapshot, adapter)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ConflictError) else str(exc)
            log.warning("finetune refresh %s failed: %s", job_id, reason)
            if adapter is not None:
                mark_failed(db, adapter.id, reason)
                adapter = registry_db.get_adapter(db, adapter.id)
            registry_db.finish_finetune_job(db, job_id, status="failed", reason=reason,
                                            totals={"snapshot_id": snapshot.id if snapshot else None})
            return RefreshOutcome(job_id, "failed", reason, snapshot, adapter)
