"""Conversations, messages and feedback in SQL, on SQLite and PostgreSQL, migrated by Alembic: ownership,
search, regeneration, ratings that outlive their conversation, and the quality view's figures."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from assistant.answering.store import (
    add_answer,
    conversation_messages,
    create_conversation,
    delete_conversation,
    list_conversations,
    list_feedback,
    quality_report,
    rate_answer,
    rename_conversation,
    start_exchange,
)
from assistant.auth.accounts import create_user
from assistant.core.db.identity import load_principal
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError, NotFoundError
from assistant.core.visibility import Visibility

CITATION = {"n": 1, "source": "a.md", "route": "/api/documents/d1/content", "doc_id": "d1", "chunk_id": "c1",
            "title": "A", "heading": "", "page": None, "score": 1.0, "snippet": "text", "inline": True}


def _user(db: Database):
    name = f"u{uuid.uuid4().hex[:8]}"
    create_user(db, name)
    return load_principal(db, name)


def _exchange(db, conv_id, user, question, answer, *, abstained=False, citations=(CITATION,)):
    start_exchange(db, conv_id, user_id=user.user_id, question=question)
    return add_answer(db, conv_id, user_id=user.user_id, answer=answer, citations=list(citations), abstained=abstained)


def test_conversations_are_their_owners_newest_first_and_searchable(db):
    alice, bob = _user(db), _user(db)
    first = create_conversation(db, user_id=alice.user_id)
    second = create_conversation(db, user_id=alice.user_id, title="100% sure_thing")
    _exchange(db, first.id, alice, "How long must passwords be?", "At least 15 characters [1].")
    # The first question names an untitled conversation; its new message puts it first.
    assert [(c.id, c.title) for c in list_conversations(db, user_id=alice.user_id)] == [
        (first.id, "How long must passwords be?"), (second.id, "100% sure_thing")]
    rename_conversation(db, second.id, user_id=alice.user_id, title="Renamed")
    assert [c.id for c in list_conversations(db, user_id=alice.user_id)] == [first.id, second.id]  # a rename is not activity
    assert [c.id for c in list_conversations(db, user_id=alice.user_id, query="15 CHARACTERS")] == [first.id]  # message text
    assert [c.id for c in list_conversations(db, user_id=alice.user_id, query="renam")] == [second.id]  # title
    create_conversation(db, user_id=alice.user_id, title="50% off")
    # LIKE's wildcards match themselves only.
    assert [c.title for c in list_conversations(db, user_id=alice.user_id, query="%")] == ["50% off"]
    assert list_conversations(db, user_id=alice.user_id, query="_") == []
    assert list_conversations(db, user_id=bob.user_id) == []
    for call in (
        lambda: conversation_messages(db, first.id, user_id=bob.user_id),
        lambda: rename_conversation(db, first.id, user_id=bob.user_id, title="mine"),
        lambda: delete_conversation(db, first.id, user_id=bob.user_id),
        lambda: start_exchange(db, first.id, user_id=bob.user_id, question="and?"),
        lambda: conversation_messages(db, first.id, user_id=None),
    ):
        with pytest.raises(NotFoundError, match=first.id):
            call()
    assert len(conversation_messages(db, first.id, user_id=alice.user_id)) == 2


def test_history_pairs_answered_questions_and_regenerate_replaces_the_last_exchange(db):
    alice = _user(db)
    conv = create_conversation(db, user_id=alice.user_id)
    _exchange(db, conv.id, alice, "Q1", "A1 [1].")
    start_exchange(db, conv.id, user_id=alice.user_id, question="Q2 stopped")  # its answer never came
    follow_up = start_exchange(db, conv.id, user_id=alice.user_id, question="Q3")
    assert follow_up.history == [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1 [1]."}]
    answer = add_answer(db, conv.id, user_id=alice.user_id, answer="A3", citations=[], abstained=False)
    rate_answer(db, answer.id, principal=alice, rating=-1, comment="wrong")
    again = start_exchange(db, conv.id, user_id=alice.user_id, question="Q3", regenerate=True)
    assert again.history == follow_up.history
    add_answer(db, conv.id, user_id=alice.user_id, answer="A3 better", citations=[], abstained=False)
    assert [(m.role, m.content) for m in conversation_messages(db, conv.id, user_id=alice.user_id)] == [
        ("user", "Q1"), ("assistant", "A1 [1]."), ("user", "Q2 stopped"), ("user", "Q3"), ("assistant", "A3 better")]
    kept = [f for f in list_feedback(db, visibility=Visibility(db, alice)) if f.principal == alice.name]
    assert [(f.answer, f.message_id, f.comment) for f in kept] == [("A3", None, "wrong")]  # the rating stays


def test_a_rating_keeps_question_answer_and_chunks_and_outlives_the_conversation(db):
    alice, bob = _user(db), _user(db)
    conv = create_conversation(db, user_id=alice.user_id)
    answer = _exchange(db, conv.id, alice, "How long must passwords be?", "At least 15 characters [1].")
    question_id = conversation_messages(db, conv.id, user_id=alice.user_id)[0].id
    with pytest.raises(NotFoundError):
        rate_answer(db, answer.id, principal=bob, rating=1)  # not bob's answer
    with pytest.raises(NotFoundError):
        rate_answer(db, question_id, principal=alice, rating=1)  # a question is not an answer
    with pytest.raises(InvalidRequestError, match="rating"):
        rate_answer(db, answer.id, principal=alice, rating=0)
    rate_answer(db, answer.id, principal=alice, rating=1)
    rated = rate_answer(db, answer.id, principal=alice, rating=-1, comment="  too vague ")
    assert (rated.rating, rated.comment, rated.question, rated.answer, rated.chunk_ids, rated.principal) == (
        -1, "too vague", "How long must passwords be?", "At least 15 characters [1].", ["c1"], alice.name)
    assert conversation_messages(db, conv.id, user_id=alice.user_id)[1].rating == -1
    delete_conversation(db, conv.id, user_id=alice.user_id)
    mine = [f for f in list_feedback(db, visibility=Visibility(db, alice)) if f.principal == alice.name]
    assert len(mine) == 1 and mine[0].message_id is None and mine[0].answer == rated.answer
    # Its cited document is gone from the database: only the one who asked still sees the text.
    [seen_by_bob] = [f for f in list_feedback(db, visibility=Visibility(db, bob)) if f.principal == alice.name]
    assert seen_by_bob.withheld and seen_by_bob.answer is seen_by_bob.question is None and seen_by_bob.rating == -1
    assert list_conversations(db, user_id=alice.user_id) == []


def test_quality_report_counts_questions_answers_not_found_and_ratings_per_day(db):
    alice = _user(db)
    conv = create_conversation(db, user_id=alice.user_id)
    good = _exchange(db, conv.id, alice, "Q1", "A1 [1].")
    _exchange(db, conv.id, alice, "Q2", "I could not find the answer.", abstained=True, citations=())
    other = _exchange(db, conv.id, alice, "Q3", "A3 [1].")
    rate_answer(db, good.id, principal=alice, rating=1)
    rate_answer(db, other.id, principal=alice, rating=-1)
    now = datetime.now(UTC)
    report = quality_report(db, days=3, now=now)
    assert [d.day for d in report.days] == [(now - timedelta(days=i)).date() for i in (2, 1, 0)]
    today = report.days[-1]
    assert (today.questions, today.answered, today.not_found, today.thumbs_up, today.thumbs_down) == (3, 2, 1, 1, 1)
    assert (report.questions, report.answered, report.not_found) == (3, 2, 1)
    assert report.positive_ratio == 0.5 and report.rated_ratio == pytest.approx(2 / 3)
    assert quality_report(db, days=1, now=now + timedelta(days=2)).questions == 0  # outside the window
