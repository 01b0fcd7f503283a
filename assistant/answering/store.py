"""The chat's own tables in SQL: each user's conversations and their messages, the readers' ratings of
answers (feedback), and the admins' quality view (questions per day, answered against "not found", the
share of positive ratings).

Conversations: every function takes the caller's `user_id` and acts only on that user's conversations:
another user's conversation is "not found", exactly as one that does not exist. A rating's text is
shown through `assistant.core.visibility` (withheld where the viewer may not read what its answer cited).

Every query is called with the `Database` as its first argument, as before: `transactional` opens its
session (one transaction per call); this module never opens one.
"""

from __future__ import annotations

import uuid
from collections.abc import Container
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from assistant.answering.resubmission import earlier_copy
from assistant.core.db.models import Conversation, Feedback, Message, utc, utcnow
from assistant.core.db.session import Database, transactional
from assistant.core.db.usage import usage_since
from assistant.core.errors import ConflictError, InvalidRequestError, NotFoundError
from assistant.core.principals import Principal
from assistant.core.visibility import Cited, Visibility

TITLE_CHARS = 80  # a conversation without a title is named after the start of its first question
HISTORY_MESSAGES = 10  # the stored turns a follow-up question is answered with (five exchanges)


@dataclass(frozen=True)
class ConversationPublic:
    """A conversation as its owner lists it (UTC times; `updated_at` is the time of its last message)."""

    id: str
    title: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class MessagePublic:
    """One stored turn: `role` `user` or `assistant`; an answer carries its `citations` (as the chat
    stream sent them), whether it was the "not found" answer, and the owner's `rating` of it (1, -1
    or None) with its comment and corrected answer (None: none)."""

    id: int
    role: str
    content: str
    citations: list[dict[str, Any]]
    abstained: bool
    created_at: datetime
    rating: int | None = None
    comment: str = ""
    corrected_answer: str | None = None


@dataclass(frozen=True)
class Exchange:
    """A question stored in a conversation (`start_exchange`): its message ID and the history it is
    answered with (`{"role", "content"}` dicts, oldest first)."""

    conversation_id: str
    question_id: int
    history: list[dict[str, str]]
    answered: MessagePublic | None = None  # a resubmitted question's stored answer (`answering.resubmission`)


def _conversation_public(conv: Conversation) -> ConversationPublic:
    return ConversationPublic(id=conv.id, title=conv.title, created_at=conv.created_at, updated_at=conv.updated_at)


def _owned(session: Session, conversation_id: str, user_id: int | None) -> Conversation:
    conv = session.get(Conversation, conversation_id)
    if conv is None or user_id is None or conv.user_id != user_id:
        raise NotFoundError(f"conversation '{conversation_id}' not found")
    return conv


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@transactional
def create_conversation(session: Session, *, user_id: int, title: str = "") -> ConversationPublic:
    """A new, empty conversation of `user_id` (named after its first question if `title` is blank)."""
    now = utcnow()
    conv = Conversation(id=str(uuid.uuid4()), user_id=user_id, title=title.strip(), created_at=now, updated_at=now)
    session.add(conv)
    session.flush()
    return _conversation_public(conv)


@transactional
def list_conversations(session: Session, *, user_id: int, query: str = "", limit: int = 50) -> list[ConversationPublic]:
    """`user_id`'s conversations, the most recently active first.

    Args:
        query: when not blank, only conversations whose title or any message contains it
            (case-insensitive; `%` and `_` match themselves).
        limit: at most this many.
    """
    stmt = select(Conversation).where(Conversation.user_id == user_id)
    if query.strip():
        pattern = _like(query.strip())
        in_messages = exists().where(
            Message.conversation_id == Conversation.id, Message.content.ilike(pattern, escape="\\")
        )
        stmt = stmt.where(or_(Conversation.title.ilike(pattern, escape="\\"), in_messages))
    stmt = stmt.order_by(Conversation.updated_at.desc(), Conversation.created_at.desc()).limit(limit)
    return [_conversation_public(c) for c in session.scalars(stmt)]


@transactional
def get_conversation(session: Session, conversation_id: str, *, user_id: int | None) -> ConversationPublic:
    """One of `user_id`'s conversations.

    Raises:
        NotFoundError: no such conversation, or another user's.
    """
    return _conversation_public(_owned(session, conversation_id, user_id))


@transactional
def rename_conversation(session: Session, conversation_id: str, *, user_id: int | None, title: str) -> ConversationPublic:
    """Give one of `user_id`'s conversations a new title (its `updated_at`, and so its place in the
    list, stays).

    Raises:
        NotFoundError: as `get_conversation`.
    """
    conv = _owned(session, conversation_id, user_id)
    conv.title = title.strip()
    flag_modified(conv, "updated_at")  # a rename is not activity: keep the list's order (no onupdate)
    session.flush()
    return _conversation_public(conv)


@transactional
def delete_conversation(session: Session, conversation_id: str, *, user_id: int | None) -> None:
    """Delete one of `user_id`'s conversations with its messages. Ratings given in it stay, with
    their copy of the question and answer, detached from the deleted message.

    Raises:
        NotFoundError: as `get_conversation`.
    """
    conv = _owned(session, conversation_id, user_id)
    message_ids = select(Message.id).where(Message.conversation_id == conv.id)
    # SET NULL by hand too: SQLite enforces foreign keys only where the connection turned them on.
    session.query(Feedback).filter(Feedback.message_id.in_(message_ids)).update(
        {Feedback.message_id: None}, synchronize_session=False
    )
    session.execute(delete(Message).where(Message.conversation_id == conv.id))
    session.delete(conv)


@transactional
def conversation_messages(session: Session, conversation_id: str, *, user_id: int | None) -> list[MessagePublic]:
    """The messages of one of `user_id`'s conversations, oldest first, each answer with the owner's rating.

    Raises:
        NotFoundError: as `get_conversation`.
    """
    conv = _owned(session, conversation_id, user_id)
    rows = session.execute(
        select(Message, Feedback.rating, Feedback.comment, Feedback.corrected_answer)
        .outerjoin(Feedback, (Feedback.message_id == Message.id) & (Feedback.user_id == user_id))
        .where(Message.conversation_id == conv.id)
        .order_by(Message.id)
    )
    return [
        MessagePublic(
            id=m.id, role=m.role, content=m.content, citations=list(m.citations or []), abstained=m.abstained,
            created_at=m.created_at, rating=rating, comment=comment or "",
            corrected_answer=corrected,
        )
        for m, rating, comment, corrected in rows
    ]


def _history(messages: list[Message]) -> list[dict[str, str]]:
    # Only questions that got an answer: a question whose answer was stopped has no reply to pair with.
    turns: list[dict[str, str]] = []
    for question, answer in zip(messages, messages[1:]):
        if question.role == "user" and answer.role == "assistant":
            turns += [{"role": "user", "content": question.content}, {"role": "assistant", "content": answer.content}]
    return turns[-HISTORY_MESSAGES:]


@transactional
def start_exchange(
    session: Session, conversation_id: str, *, user_id: int | None, question: str, regenerate: bool = False,
    idempotency_key: str | None = None, in_flight: Container[int] = (),
) -> Exchange:
    """Store `question` in one of `user_id`'s conversations and return the history it is asked with;
    a resubmitted question is stored once (`answering.resubmission`).

    Args:
        regenerate: first remove the conversation's last question and everything after it (its
            answer), so that `question` is asked again in its place.
        idempotency_key: the request's `Idempotency-Key` header, or None.
        in_flight: the question IDs being answered now (`QuestionsInFlight`).

    Returns:
        The exchange; for a resubmission already answered, `answered` is that answer and nothing is
        stored; for one never answered, `question_id` is the stored copy's.

    Raises:
        NotFoundError: as `get_conversation`.
        ConflictError: `question_in_progress`, the same question is being answered now.
        InvalidRequestError: the key was used for another question of this conversation.
    """
    conv = _owned(session, conversation_id, user_id)
    messages = list(session.scalars(select(Message).where(Message.conversation_id == conv.id).order_by(Message.id)))
    now = utcnow()
    earlier = None if regenerate else earlier_copy(messages, question=question, idempotency_key=idempotency_key, now=now)
    if earlier is not None and earlier.question.id in in_flight:
        raise ConflictError(
            f"this question is already being answered in conversation {conv.id} (asked at "
            f"{utc(earlier.question.created_at).isoformat()}): its answer is stored there when it ends; "
            "send regenerate: true to ask it anew",
            code="question_in_progress",
        )
    if earlier is not None and earlier.answer is not None:
        return Exchange(conversation_id=conv.id, question_id=earlier.question.id, history=[],
                        answered=_public(earlier.answer))
    if earlier is not None:  # stored, never answered (stopped, or its stream failed): answer that copy
        return Exchange(conversation_id=conv.id, question_id=earlier.question.id,
                        history=_history(messages[: messages.index(earlier.question)]))
    if regenerate:
        last_question = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
        if last_question is not None:
            for message in messages[last_question:]:
                session.query(Feedback).filter(Feedback.message_id == message.id).update(
                    {Feedback.message_id: None}, synchronize_session=False
                )
                session.delete(message)
            messages = messages[:last_question]
    history = _history(messages)
    stored = Message(conversation_id=conv.id, role="user", content=question, citations=[], created_at=now,
                     idempotency_key=idempotency_key or None)
    session.add(stored)
    if not conv.title:
        conv.title = " ".join(question.split())[:TITLE_CHARS]
    conv.updated_at = now
    try:
        session.flush()
    except IntegrityError as exc:  # another API process stored the same key a moment ago
        raise ConflictError(
            f"this question is already being answered in conversation {conv.id} (Idempotency-Key {idempotency_key!r})",
            code="question_in_progress",
        ) from exc
    return Exchange(conversation_id=conv.id, question_id=stored.id, history=history)


@transactional
def add_answer(
    session: Session,
    conversation_id: str,
    *,
    user_id: int | None,
    answer: str,
    citations: list[dict[str, Any]],
    abstained: bool,
) -> MessagePublic:
    """Store the answer to the conversation's last question.

    Args:
        answer: the text the reader was shown (the grounded answer, or the "not found" text).
        citations: the citations as the chat stream sent them (`Citation.to_dict()`).
        abstained: True for the "not found" answer.

    Raises:
        NotFoundError: as `get_conversation` (e.g. deleted while the answer was generated).
    """
    conv = _owned(session, conversation_id, user_id)
    now = utcnow()
    message = Message(
        conversation_id=conv.id, role="assistant", content=answer, citations=list(citations),
        abstained=abstained, created_at=now,
    )
    session.add(message)
    conv.updated_at = now
    session.flush()
    return _public(message)


def _public(message: Message) -> MessagePublic:
    return MessagePublic(
        id=message.id, role=message.role, content=message.content, citations=list(message.citations or []),
        abstained=message.abstained, created_at=message.created_at,
    )


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
    `visibility` (None: the server's own use, everything): the rule for what its answer cited, and, as
    the question (and any comment) is the member's own words, on an answer that cited nothing the
    author's groups (`Visibility.may_see_authored`: a "not found" question may name what only they read)."""
    if visibility is None:
        return True
    return visibility.may_see_authored(feedback_cited(row, message_citations), author_id=row.user_id)


def _feedback_public(row: Feedback, *, shown: bool = True) -> FeedbackPublic:
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


@transactional
def rate_answer(session: Session, message_id: int, *, principal: Principal, rating: int, comment: str = "",
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
    return _feedback_public(row)


@transactional
def list_feedback(session: Session, *, visibility: Visibility | None = None, rating: int | None = None,
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
    rows = session.execute(stmt).all()
    return [
        _feedback_public(row, shown=feedback_shown(visibility, row, citations))
        for row, citations in rows
    ]


@transactional
def _count_conversations(
    session: Session, since: datetime, counts: dict[date, dict[str, int]], endpoints: dict[str, int]
) -> None:
    # The conversations' questions, answers and ratings since `since`, added into `counts` (per UTC day)
    # and `endpoints`; one transaction, before the answers outside conversations are read in another.
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
    _count_conversations(db, since, counts, endpoints)
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
