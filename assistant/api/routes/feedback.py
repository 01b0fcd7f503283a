"""The admins' quality view: every rating with its question, answer and cited chunks, the daily
figures (questions, answered against "not found", ratings), the slowest answers, and the knowledge
gaps (unserved questions grouped by meaning: the documents to write). Stored text goes through
`assistant.core.visibility`: an admin sees the text of what cited only documents they may read."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from assistant.answering.store import FeedbackPublic, list_feedback, quality_report
from assistant.api.deps import AdminDep, AssistantDep, DatabaseDep
from assistant.api.schemas.feedback import QualityView
from assistant.core.visibility import Visibility
from assistant.operations.knowledge_gaps import DEFAULT_SIMILARITY, group_gaps
from assistant.operations.store import gap_questions, slowest_answers

router = APIRouter(prefix="/api/admin", tags=["admin"])


@router.get("/feedback", response_model=list[FeedbackPublic])
async def feedback(
    admin: AdminDep,
    db: DatabaseDep,
    rating: int | None = Query(None, ge=-1, le=1, description="1: thumbs up only; -1: thumbs down only"),
    limit: int = Query(100, ge=1, le=1000),
) -> list[FeedbackPublic]:
    """Ratings, newest first (admins only); a rating's text is withheld (`withheld: true`) unless the
    admin may read every document its answer cited."""
    return await run_in_threadpool(lambda: list_feedback(db, visibility=Visibility(db, admin), rating=rating, limit=limit))


@router.get("/quality", response_model=QualityView)
async def quality(
    admin: AdminDep,
    assistant: AssistantDep,
    days: int = Query(30, ge=1, le=366),
    similarity: float = Query(DEFAULT_SIMILARITY, ge=0.0, le=1.0, description="cosine at which questions group"),
) -> QualityView:
    """Questions per day, answered against "not found", the share of positive ratings, the slowest
    answers and the knowledge gaps over the last `days` UTC days (admins only). Questions are shown only
    where the admin may read every document their answer cited; the others are counted."""
    res = assistant.resources

    def build() -> QualityView:
        visibility = Visibility(res.db, admin)
        report = quality_report(res.db, days=days)
        unserved = gap_questions(res.db, visibility=visibility, days=days)
        gaps = group_gaps(unserved.shown, res.embedder, similarity=similarity)
        return QualityView(
            **asdict(report) | {"days": report.days}, slowest=slowest_answers(res.db, visibility=visibility, days=days),
            gaps=gaps, gaps_withheld=unserved.withheld,
        )

    return await run_in_threadpool(build)
