"""The adapter registry for admins: start a refresh (by Celery task name, never by importing `finetune`),
list and read adapters, promote and roll back in one step, and compare canary and live feedback."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from assistant.adapters.release import promote_and_publish, publisher_for, rollback_and_publish
from assistant.adapters.routing import AdapterRouter
from assistant.adapters.store import feedback_by_adapter, get_adapter, get_snapshot, list_adapters
from assistant.api.deps import AdminDep, AssistantDep, DispatcherDep, RowId
from assistant.api.schemas.finetune import PromoteCreate, RefreshCreate, RollbackCreate
from assistant.core.jobs import FINETUNE_TASK

router = APIRouter(prefix="/api/admin/finetune")


def _refresh_router(assistant) -> None:
    llm = assistant.answerer.llm
    if isinstance(llm, AdapterRouter):
        llm.refresh()  # the switch takes effect on the next request, without a restart


@router.post("/runs", status_code=202)
async def start_run(body: RefreshCreate, dispatcher: DispatcherDep, admin: AdminDep) -> dict[str, Any]:
    """Queue one refresh (runs never overlap: a second one while one runs ends as `skipped`)."""
    dispatcher.submit(FINETUNE_TASK, audience=body.audience, dry_run=body.dry_run, by=admin.name)
    return {"queued": FINETUNE_TASK, "audience": body.audience, "dry_run": body.dry_run}


@router.get("/adapters")
async def adapters(assistant: AssistantDep, _admin: AdminDep, audience: str | None = Query(None)) -> list[dict[str, Any]]:
    """Adapters, newest first, with status, metrics and files."""
    rows = await run_in_threadpool(list_adapters, assistant.resources.db, audience=audience)
    return [r.to_dict() for r in rows]


@router.get("/adapters/{adapter_id}")
async def adapter(adapter_id: RowId, assistant: AssistantDep, _admin: AdminDep) -> dict[str, Any]:
    """One adapter. Raises NotFoundError (404) when there is none."""
    return (await run_in_threadpool(get_adapter, assistant.resources.db, adapter_id)).to_dict()


@router.get("/snapshots/{snapshot_id}")
async def snapshot(snapshot_id: RowId, assistant: AssistantDep, _admin: AdminDep) -> dict[str, Any]:
    """A dataset snapshot's audience, hash and row counts by origin (the rows: `assistant finetune export-dataset`)."""
    record = await run_in_threadpool(get_snapshot, assistant.resources.db, snapshot_id)
    return {k: v for k, v in record.__dict__.items() if k != "path"}


@router.post("/adapters/{adapter_id}/promote")
async def promote(adapter_id: RowId, body: PromoteCreate, assistant: AssistantDep, admin: AdminDep) -> dict[str, Any]:
    """Promote an adapter one step (candidate -> canary -> live) and publish it; 409 when it cannot be."""
    res = assistant.resources
    release = await run_in_threadpool(promote_and_publish, res.db, adapter_id, by=admin.name,
                                      publisher=publisher_for(res.settings), to=body.to)
    _refresh_router(assistant)
    return {"loaded": [a.name for a in release.loaded], "unloaded": [a.name for a in release.unloaded]}


@router.post("/rollback")
async def rollback(body: RollbackCreate, assistant: AssistantDep, admin: AdminDep) -> dict[str, Any]:
    """Retire the canary (or the live adapter, restoring the previous one) and unload it; 409 when nothing serves."""
    res = assistant.resources
    release = await run_in_threadpool(rollback_and_publish, res.db, audience=body.audience, by=admin.name,
                                      publisher=publisher_for(res.settings))
    _refresh_router(assistant)
    return {"loaded": [a.name for a in release.loaded], "unloaded": [a.name for a in release.unloaded]}


@router.get("/feedback")
async def feedback(assistant: AssistantDep, _admin: AdminDep) -> dict[str, dict[str, int]]:
    """Thumbs up and down per adapter that wrote the rated answers (`base`: none): canary against live."""
    return await run_in_threadpool(feedback_by_adapter, assistant.resources.db)
