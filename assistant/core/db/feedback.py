"""The queries on feedback: a reader's thumbs up or down on an answer, and the admins' quality view
(questions per day, answered against "not found", the share of positive ratings). A rating's text is
shown through `assistant.core.visibility` (withheld where the viewer may not read what its answer cited)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import select

from assistant.core.db.models import Conversation, Feedback, Message, utc, utcnow
from assistant.core.db.session import Database
from assistant.core.db.usage import usage_since
from assistant.core.errors import InvalidRequestError, NotFoundError
from assistant.core.principals import Principal
from assistant.core.visibility import Cited, Visibility


@dataclass(frozen=True)
class FeedbackPublic:
    """A rating as stored: `rating` 1 (thumbs up) or -1 (down), the reader's comment and corrected
    answer (None: none given), and the copy of the question, the answer and the chunk IDs it cited
    taken when the rating was given. `message_id` is None once the conversation was deleted.

    `withheld` is True when the viewer may not read every document the answer cited
    (`assistant.core.visibility`): question, answer, comment, corrected answer and chunk IDs are then
    None (`corrected` still says whether a correction was given)."""

    id: int
    message_id: int | None
    principal: str
    rating: int
    comment: str | None
    corrected_answer: str | None
    question: str | None
    answer: str | None
    chunk_ids: list[str] | None
    abstained: bool
    created_at: datetime
    updated_at: datetime
    corrected: bool = False
    withheld: bool = False


@dataclass(frozen=True)
class QualityDay:
    """One UTC day of the quality view: questions asked (in conversations, `/api/chat` without one,
    `/v1` and the helpdesk), answers given from the documents (`answered`), "not found" answers, and
    the ratings given to that day's answers."""

    day: date
    questions: int = 0
    answered: int = 0
    not_found: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0


@dataclass(frozen=True)
class QualityReport:
    """The quality view over `days` UTC days ending today: per-day figures (oldest first) and totals.
    `positive_ratio` is thumbs up over all ratings, `rated_ratio` rated answers over all answers
    (None when there is nothing to divide); `endpoints` counts the questions by where they were asked
    (`conversation`, `chat`, `v1`, `helpdesk`, `helpdesk_tickets`)."""

    days: list[QualityDay]
    questions: int
    answered: int
    not_found: int
    thumbs_up: int
    thumbs_down: int
    positive_ratio: float | None
    rated_ratio: float | None = field(default=None)
    endpoints: dict[str, int] = field(default_factory=dict)


def feedback_cited(row: Feedback, message_citations: list[Any] | None) -> Cited:
    """The documents a rating's answer cited: its recorded `doc_ids`, else (older rows) its message's
    citations; unresolved when it cited chunks and neither is known (the conversation was deleted)."""
    if row.doc_ids is not None:
        return Cited(doc_ids=tuple(row.doc_ids))
    if message_citations is not None:
        return Cited.of_citations(message_citations)
    return Cited(unresolved=bool(row.chunk_ids))


def feedback_shown(visibility: Visibility | None, row: Feedback, message_citations: list[Any] | None) -> bool:
    """Whether a rating's text (question, answer, comment, corrected answer) is shown under
    `visibility` (None: the server's own use, everything): the rule for what its answer cited, and for
    the member's own words on an answer that cited nothing, the author's groups
    (`Visibility.may_see_authored`)."""
    if visibility is None:
        return True
    cited = feedback_cited(row, message_citations)
    if row.comment or row.corrected_answer:
        return visibility.may_see_authored(cited, author_id=row.user_id)
    return visibility.may_see(cited, asked_by=row.user_id)


def _public(row: Feedback, *, shown: bool = True) -> FeedbackPublic:
    if not shown:
        return FeedbackPublic(
            id=row.id, message_id=row.message_id, principal=row.principal, rating=row.rating, comment=None,
            corrected_answer=None, question=None, answer=None, chunk_ids=None, abstained=row.abstained,
            created_at=row.created_at, updated_at=row.updated_at, corrected=row.corrected_answer is not None,
            withheld=True,
        )
    return FeedbackPublic(
        id=row.id, message_id=row.message_id, principal=row.principal, rating=row.rating, comment=row.comment,
        corrected_answer=row.corrected_answer, question=row.question, answer=row.answer, chunk_ids=list(row.chunk_ids or []), abstained=row.abstained,
        created_at=row.created_at, updated_at=row.updated_at, corrected=row.corrected_answer is not None,
    )


def rate_answer(db: Database, message_id: int, *, principal: Principal, rating: int, comment: str = "",
                corrected_answer: str | None = None) -> FeedbackPublic:
    """Record `principal`'s rating of an answer in one of their own conversations; rating it again
    replaces the earlier rating, comment and corrected answer.

    Args:
        message_id: the answer's message ID (the chat stream's `done` event carries it).
        rating: 1 (thumbs up) or -1 (thumbs down).
        comment: optional free text.
        corrected_answer: what the answer should have said (None or blank: none). A finetune dataset
            learns it in place of the model's answer, under the same rules as a rated-up answer
            (`finetune.dataset.feedback_rows`); one given to a "not found" answer is kept for the
            admins but never trained on (it cites nothing that says who may read it).

    Raises:
        InvalidRequestError: `rating` is neither 1 nor -1.
        NotFoundError: no such answer, or not in one of the principal's conversations.
    """
    if rating not in (1, -1):
        raise InvalidRequestError(f"rating must be 1 (thumbs up) or -1 (thumbs down), not {rating}")
    corrected = (corrected_answer or "").strip() or None
    with db.session() as session:
        found = session.execute(
            select(Message, Conversation.user_id).join(Conversation, Conversation.id == Message.conversation_id)
            .where(Message.id == message_id)
        ).first()
        if found is None or found[0].role != "assistant" or principal.user_id is None or found[1] != principal.user_id:
            raise NotFoundError(f"answer {message_id} not found")
        answer = found[0]
        question = session.scalar(
            select(Message.content).where(
                Message.conversation_id == answer.conversation_id, Message.id < answer.id, Message.role == "user"
            ).order_by(Message.id.desc()).limit(1)
        )
        row = session.scalar(select(Feedback).where(Feedback.message_id == answer.id, Feedback.user_id == principal.user_id))
        if row is None:
            row = Feedback(message_id=answer.id, user_id=principal.user_id)
            session.add(row)
        row.principal = principal.name
        row.rating = rating
        row.comment = comment.strip()
        row.corrected_answer = corrected
        row.question = question or ""
        row.answer = answer.content
        row.chunk_ids = [c["chunk_id"] for c in answer.citations or [] if c.get("chunk_id")]
        row.doc_ids = list(dict.fromkeys(Cited.of_citations(answer.citations).doc_ids))
        row.abstained = answer.abstained
        session.flush()
        return _public(row)


def list_feedback(db: Database, *, visibility: Visibility | None = None, rating: int | None = None,
                  limit: int = 100) -> list[FeedbackPublic]:
    """Ratings, newest first (for admins), each one's text shown only where `visibility` allows.

    Args:
        visibility: the rule for the viewer (`assistant.core.visibility`); every view passes it. None:
            every text (the server's own use and tests, never a view).
        rating: only thumbs up (1) or only thumbs down (-1); None: both.
        limit: at most this many.
    """
    stmt = (
        select(Feedback, Message.citations).outerjoin(Message, Message.id == Feedback.message_id)
        .order_by(Feedback.updated_at.desc(), Feedback.id.desc()).limit(limit)
    )
    if rating is not None:
        stmt = stmt.where(Feedback.rating == rating)
    with db.session() as session:
        rows = session.execute(stmt).all()
        return [
            _public(row, shown=feedback_shown(visibility, row, citations))
            for row, citations in rows
        ]



def quality_report(db: Database, *, days: int = 30, now: datetime | None = None) -> QualityReport:
    """The quality view of the last `days` UTC days (today included): every user's conversations, and
    the answers given outside them (`assistant.core.db.usage`). Figures only, no text.

    Args:
        days: how many days, at least 1.
        now: the end of the window (default: now); for tests.
    """
    today = utc(now or utcnow()).date()
    first = today - timedelta(days=days - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=UTC)
    counts = {first + timedelta(days=i): dict(questions=0, answered=0, not_found=0, thumbs_up=0, thumbs_down=0) for i in range(days)}
    endpoints: dict[str, int] = {}
    with db.session() as session:
        for role, abstained, at in session.execute(
            select(Message.role, Message.abstained, Message.created_at).where(Message.created_at >= since)
        ):
            day = counts.get(at.date())
            if day is None:
                continue
            if role == "user":
                day["questions"] += 1
                endpoints["conversation"] = endpoints.get("conversation", 0) + 1
            else:
                day["not_found" if abstained else "answered"] += 1
        for rating, at in session.execute(
            select(Feedback.rating, Message.created_at).join(Message, Message.id == Feedback.message_id)
            .where(Message.created_at >= since)
        ):
            day = counts.get(at.date())
            if day is not None:
                day["thumbs_up" if rating > 0 else "thumbs_down"] += 1
    for endpoint, abstained, at in usage_since(db, since):
        day = counts.get(at.date())
        if day is not None:
            day["questions"] += 1
            day["not_found" if abstained else "answered"] += 1
            endpoints[endpoint] = endpoints.get(endpoint, 0) + 1
    per_day = [QualityDay(day=d, **c) for d, c in sorted(counts.items())]
    totals = {k: sum(getattr(d, k) for d in per_day) for k in ("questions", "answered", "not_found", "thumbs_up", "thumbs_down")}
    ratings = totals["thumbs_up"] + totals["thumbs_down"]
    answers = totals["answered"] + totals["not_found"]
    return QualityReport(
        days=per_day, **totals,
        positive_ratio=totals["thumbs_up"] / ratings if ratings else None,
        rated_ratio=ratings / answers if answers else None, endpoints=endpoints,
    )
