"""The admins' quality view: every rating with its question, answer and cited chunks, and the daily
figures (questions, answered against "not found", ratings)."""

from __future__ import annotations

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from assistant.api.deps import AdminDep, DatabaseDep
from assistant.core.db.feedback import FeedbackPublic, QualityReport, list_feedback, quality_report

router = APIRouter(prefix="/api/admin", tags=["admin"])


@router.get("/feedback", response_model=list[FeedbackPublic])
async def feedback(
    _admin: AdminDep,
    db: DatabaseDep,
    rating: int | None = Query(None, ge=-1, le=1, description="1: thumbs up only; -1: thumbs down only"),
    limit: int = Query(100, ge=1, le=1000),
) -> list[FeedbackPublic]:
    """Ratings, newest first (admins only)."""
    return await run_in_threadpool(list_feedback, db, rating=rating, limit=limit)


@router.get("/quality", response_model=QualityReport)
async def quality(_admin: AdminDep, db: DatabaseDep, days: int = Query(30, ge=1, le=366)) -> QualityReport:
    """Questions per day, answered against "not found", and the share of positive ratings over the
    last `days` UTC days (admins only)."""
    return await run_in_threadpool(quality_report, db, days=days)
