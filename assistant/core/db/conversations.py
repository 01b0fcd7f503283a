"""The queries on conversations and their messages: each user's own chat threads, stored in SQL.

Every function takes the caller's `user_id` and acts only on that user's conversations: another
user's conversation is "not found", exactly as one that does not exist.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import flag_modified

from assistant.core.db.models import Conversation, Feedback, Message, utcnow
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError

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


def _public(conv: Conversation) -> ConversationPublic:
    return ConversationPublic(id=conv.id, title=conv.title, created_at=conv.created_at, updated_at=conv.updated_at)


def _owned(session: Session, conversation_id: str, user_id: int | None) -> Conversation:
    conv = session.get(Conversation, conversation_id)
    if conv is None or user_id is None or conv.user_id != user_id:
        raise NotFoundError(f"conversation '{conversation_id}' not found")
    return conv


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def create_conversation(db: Database, *, user_id: int, title: str = "") -> ConversationPublic:
    """A new, empty conversation of `user_id` (named after its first question if `title` is blank)."""
    with db.session() as session:
        now = utcnow()
        conv = Conversation(id=str(uuid.uuid4()), user_id=user_id, title=title.strip(), created_at=now, updated_at=now)
        session.add(conv)
        session.flush()
        return _public(conv)


def list_conversations(db: Database, *, user_id: int, query: str = "", limit: int = 50) -> list[ConversationPublic]:
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
    with db.session() as session:
        return [_public(c) for c in session.scalars(stmt)]


def get_conversation(db: Database, conversation_id: str, *, user_id: int | None) -> ConversationPublic:
    """One of `user_id`'s conversations.

    Raises:
        NotFoundError: no such conversation, or another user's.
    """
    with db.session() as session:
        return _public(_owned(session, conversation_id, user_id))


def rename_conversation(db: Database, conversation_id: str, *, user_id: int | None, title: str) -> ConversationPublic:
    """Give one of `user_id`'s conversations a new title (its `updated_at`, and so its place in the
    list, stays).

    Raises:
        NotFoundError: as `get_conversation`.
    """
    with db.session() as session:
        conv = _owned(session, conversation_id, user_id)
        conv.title = title.strip()
        flag_modified(conv, "updated_at")  # a rename is not activity: keep the list's order (no onupdate)
        session.flush()
        return _public(conv)


def delete_conversation(db: Database, conversation_id: str, *, user_id: int | None) -> None:
    """Delete one of `user_id`'s conversations with its messages. Ratings given in it stay, with
    their copy of the question and answer, detached from the deleted message.

    Raises:
        NotFoundError: as `get_conversation`.
    """
    with db.session() as session:
        conv = _owned(session, conversation_id, user_id)
        message_ids = select(Message.id).where(Message.conversation_id == conv.id)
        # SET NULL by hand too: SQLite enforces foreign keys only where the connection turned them on.
        session.query(Feedback).filter(Feedback.message_id.in_(message_ids)).update(
            {Feedback.message_id: None}, synchronize_session=False
        )
        session.execute(delete(Message).where(Message.conversation_id == conv.id))
        session.delete(conv)


def conversation_messages(db: Database, conversation_id: str, *, user_id: int | None) -> list[MessagePublic]:
    """The messages of one of `user_id`'s conversations, oldest first, each answer with the owner's rating.

    Raises:
        NotFoundError: as `get_conversation`.
    """
    with db.session() as session:
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


def start_exchange(
    db: Database, conversation_id: str, *, user_id: int | None, question: str, regenerate: bool = False
) -> Exchange:
    """Store `question` in one of `user_id`'s conversations and return the history it is asked with.

    Args:
        regenerate: first remove the conversation's last question and everything after it (its
            answer), so that `question` is asked again in its place.

    Raises:
        NotFoundError: as `get_conversation`.
    """
    with db.session() as session:
        conv = _owned(session, conversation_id, user_id)
        messages = list(session.scalars(select(Message).where(Message.conversation_id == conv.id).order_by(Message.id)))
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
        now = utcnow()
        stored = Message(conversation_id=conv.id, role="user", content=question, citations=[], created_at=now)
        session.add(stored)
        if not conv.title:
            conv.title = " ".join(question.split())[:TITLE_CHARS]
        conv.updated_at = now
        session.flush()
        return Exchange(conversation_id=conv.id, question_id=stored.id, history=history)


def add_answer(
    db: Database,
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
    with db.session() as session:
        conv = _owned(session, conversation_id, user_id)
        now = utcnow()
        message = Message(
            conversation_id=conv.id, role="assistant", content=answer, citations=list(citations),
            abstained=abstained, created_at=now,
        )
        session.add(message)
        conv.updated_at = now
        session.flush()
        return MessagePublic(
            id=message.id, role=message.role, content=message.content, citations=list(message.citations),
            abstained=message.abstained, created_at=message.created_at,
        )
