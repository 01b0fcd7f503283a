"""The queries behind the quality view's lists: the slowest answers, and the questions the documents
did not answer (the "not found" answer) or whose answer was rated down, from which knowledge gaps are
grouped (`assistant.core.knowledge_gaps`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import select

from assistant.core.db.models import Feedback, Message, utcnow
from assistant.core.db.session import Database


@dataclass(frozen=True)
class SlowAnswer:
    """An answer and the seconds from its question being stored to the answer being stored."""

    question: str
    seconds: float
    answered_at: datetime
    not_found: bool


@dataclass(frozen=True)
class GapQuestion:
    """A question the documents did not serve: `why` is `not_found` or `rated_down`."""

    question: str
    why: str
    at: datetime


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes (stored as UTC).
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _since(days: int) -> datetime:
    return utcnow() - timedelta(days=days)


def slowest_answers(db: Database, *, days: int = 30, limit: int = 10) -> list[SlowAnswer]:
    """The `limit` answers of the last `days` days that took longest, slowest first: each answer is
    timed from the question before it in its conversation (both are stored as they happen)."""
    with db.session() as session:
        rows = session.execute(
            select(Message.conversation_id, Message.role, Message.content, Message.abstained, Message.created_at)
            .where(Message.created_at >= _since(days)).order_by(Message.conversation_id, Message.id)
        ).all()
    timed, question = [], None
    for conversation_id, role, content, abstained, at in rows:
        if role == "user":
            question = (conversation_id, content, _aware(at))
        elif question is not None and question[0] == conversation_id:
            seconds = (_aware(at) - question[2]).total_seconds()
            timed.append(SlowAnswer(question=question[1], seconds=round(seconds, 3), answered_at=_aware(at), not_found=abstained))
            question = None
    return sorted(timed, key=lambda a: -a.seconds)[:limit]


def gap_questions(db: Database, *, days: int = 30, limit: int = 2000) -> list[GapQuestion]:
    """The questions of the last `days` days answered "not found" or rated down, newest first, each once
    (a question both unanswered and rated down counts as `not_found`)."""
    since = _since(days)
    with db.session() as session:
        answers = session.execute(
            select(Message.conversation_id, Message.id, Message.created_at)
            .where(Message.created_at >= since, Message.role == "assistant", Message.abstained.is_(True))
            .order_by(Message.id.desc()).limit(limit)
        ).all()
        found: list[GapQuestion] = []
        for conversation_id, answer_id, at in answers:
            asked = session.scalar(
                select(Message.content).where(
                    Message.conversation_id == conversation_id, Message.role == "user", Message.id < answer_id
                ).order_by(Message.id.desc()).limit(1)
            )
            if asked:
                found.append(GapQuestion(question=asked, why="not_found", at=_aware(at)))
        for question, at in session.execute(
            select(Feedback.question, Feedback.updated_at)
            .where(Feedback.rating < 0, Feedback.updated_at >= since, Feedback.abstained.is_(False))
            .order_by(Feedback.updated_at.desc()).limit(limit)
        ):
            if question:
                found.append(GapQuestion(question=question, why="rated_down", at=_aware(at)))
    seen, unique = set(), []
    for gap in sorted(found, key=lambda g: g.at, reverse=True):
        key = " ".join(gap.question.casefold().split())
        if key not in seen:
            seen.add(key)
            unique.append(gap)
    return unique
