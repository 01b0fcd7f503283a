"""Each reader's own conversations: list (newest first, searchable), create, rename, delete, read their
messages, and rate an answer. Another reader's conversation or answer is "not found"."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from assistant.answering.store import (
    ConversationPublic,
    FeedbackPublic,
    MessagePublic,
    conversation_messages,
    create_conversation,
    delete_conversation,
    get_conversation,
    list_conversations,
    rate_answer,
    rename_conversation,
)
from assistant.api.deps import AssistantDep, DatabaseDep, PrincipalDep, RowId
from assistant.api.schemas.conversations import ConversationCreate, ConversationUpdate, FeedbackCreate
from assistant.core.db.documents import readable_sources
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError
from assistant.core.principals import Principal

router = APIRouter(prefix="/api", tags=["conversations"])


def _user_id(principal: Principal) -> int:
    if principal.user_id is None:
        raise InvalidRequestError(f"'{principal.name}' has no account: conversations belong to accounts")
    return principal.user_id


@router.get("/conversations", response_model=list[ConversationPublic])
async def conversations(
    principal: PrincipalDep,
    db: DatabaseDep,
    q: str = Query("", max_length=200, description="only those whose title or messages contain this"),
    limit: int = Query(50, ge=1, le=200),
) -> list[ConversationPublic]:
    """The caller's conversations, the most recently active first."""
    return await run_in_threadpool(list_conversations, db, user_id=_user_id(principal), query=q, limit=limit)


@router.post("/conversations", response_model=ConversationPublic, status_code=201)
async def new_conversation(body: ConversationCreate, principal: PrincipalDep, db: DatabaseDep) -> ConversationPublic:
    """A new, empty conversation (named after its first question when `title` is blank)."""
    return await run_in_threadpool(create_conversation, db, user_id=_user_id(principal), title=body.title)


@router.get("/conversations/{conversation_id}", response_model=ConversationPublic)
async def conversation(conversation_id: str, principal: PrincipalDep, db: DatabaseDep) -> ConversationPublic:
    """One of the caller's conversations.

    Raises:
        NotFoundError: no such conversation, or another reader's.
    """
    return await run_in_threadpool(get_conversation, db, conversation_id, user_id=principal.user_id)


@router.patch("/conversations/{conversation_id}", response_model=ConversationPublic)
async def rename(conversation_id: str, body: ConversationUpdate, principal: PrincipalDep, db: DatabaseDep) -> ConversationPublic:
    """Rename one of the caller's conversations.

    Raises:
        NotFoundError: as `conversation`.
    """
    return await run_in_threadpool(rename_conversation, db, conversation_id, user_id=principal.user_id, title=body.title)


@router.delete("/conversations/{conversation_id}", status_code=204)
async def delete(conversation_id: str, principal: PrincipalDep, db: DatabaseDep) -> Response:
    """Delete one of the caller's conversations and its messages (ratings stay, for the quality view).

    Raises:
        NotFoundError: as `conversation`.
    """
    await run_in_threadpool(delete_conversation, db, conversation_id, user_id=principal.user_id)
    return Response(status_code=204)


def _readable_messages(db: Database, conversation_id: str, principal: Principal) -> list[MessagePublic]:
    stored = conversation_messages(db, conversation_id, user_id=principal.user_id)
    # A citation shows a passage of its document: only while the reader may still open that document.
    readable = readable_sources(db, {c.get("source", "") for m in stored for c in m.citations}, principal=principal)
    return [replace(m, citations=[c for c in m.citations if c.get("source") in readable]) for m in stored]


@router.get("/conversations/{conversation_id}/messages", response_model=list[MessagePublic])
async def messages(conversation_id: str, principal: PrincipalDep, db: DatabaseDep) -> list[MessagePublic]:
    """The conversation's questions and answers, oldest first; answers with the caller's rating and
    those of their citations whose documents the caller may still open (deleted or since restricted
    documents' citations, with their snippets, are left out).

    Raises:
        NotFoundError: as `conversation`.
    """
    return await run_in_threadpool(_readable_messages, db, conversation_id, principal)


@router.put("/messages/{message_id}/feedback", response_model=FeedbackPublic)
async def rate(
    message_id: RowId, body: FeedbackCreate, principal: PrincipalDep, db: DatabaseDep, assistant: AssistantDep
) -> FeedbackPublic:
    """Rate an answer of one of the caller's conversations (again: replaces the earlier rating). An
    answer rated down leaves the answer cache: the next reader of the same scope who asks the same
    question gets a new answer instead of it.

    Raises:
        InvalidRequestError: `rating` is not 1 or -1.
        NotFoundError: no such answer, or not the caller's.
    """
    rated = await run_in_threadpool(
        rate_answer, db, message_id, principal=principal, rating=body.rating, comment=body.comment,
        corrected_answer=body.corrected_answer,
    )
    if rated.rating == -1 and rated.question:
        assistant.answerer.forget_answer(rated.question, principal=principal)
    return rated
