"""SQL of a user's own data for export, erasure and retention: conversations, feedback, uploads, keys,
sessions, and the audit rows written for them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, Select, Table, delete, inspect, or_, select, update
from sqlalchemy.orm import Session

from assistant.core.db.feedback import feedback_shown
from assistant.core.db.models import (
    ApiKey,
    AuditEvent,
    AuthSession,
    Conversation,
    Feedback,
    Message,
    SignInThrottle,
    Source,
    User,
)
from assistant.core.db.session import Database, changed_rows
from assistant.core.errors import NotFoundError
from assistant.core.visibility import Cited, Visibility

ERASED_TEXT = "[erased]"


@dataclass(frozen=True)
class UploadFile:
    """One uploaded file of a user: its row id, the file on disk and the file source it was ingested as."""

    id: str
    path: str
    filename: str
    source_id: int | None
    created_at: datetime | None
    audience: str = ""


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def find_user(session: Session, name: str) -> User:
    """The account named `name`.

    Raises:
        NotFoundError: no such user.
    """
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFoundError(f"user '{name}' not found")
    return user


def uploads_table(session: Session) -> Table | None:
    """The `uploads` table (files people upload through the web app) when this database has it."""
    if not inspect(session.get_bind()).has_table("uploads"):
        return None
    return Table("uploads", MetaData(), autoload_with=session.get_bind())


def user_uploads(session: Session, user_id: int, *, before: datetime | None = None) -> list[UploadFile]:
    """The user's uploaded files (all, or those uploaded before `before`), with the file source each
    was ingested as (matched by the file's URI)."""
    table = uploads_table(session)
    if table is None:
        return []
    stmt = select(table).where(table.c.user_id == user_id)
    if before is not None and "created_at" in table.c:
        stmt = stmt.where(table.c.created_at < before)
    out = []
    for row in session.execute(stmt).mappings():
        path = str(row["path"])
        uri = Path(path).resolve().as_uri()
        source_id = session.scalar(select(Source.id).where(Source.uri == uri))
        out.append(UploadFile(
            id=str(row["id"]), path=path, filename=str(row.get("filename") or Path(path).name),
            source_id=source_id, created_at=row.get("created_at"), audience=str(row.get("audience") or ""),
        ))
    return out


def hold_and_uploads(db: Database, name: str) -> tuple[bool, list[UploadFile]]:
    """Whether user `name` is under legal hold, and their uploads.

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        user = find_user(session, name)
        return bool(user.legal_hold), user_uploads(session, user.id)


def delete_upload_rows(session: Session, upload_ids: list[str]) -> int:
    """Delete the rows of uploads `upload_ids` (their files, sources and chunks are the caller's)."""
    table = uploads_table(session)
    if table is None or not upload_ids:
        return 0
    return changed_rows(session, delete(table).where(table.c.id.in_(upload_ids)))


def _exchanges_shown(messages: list[Message], visibility: Visibility | None, asker: int) -> list[bool]:
    """Per message, whether its text is shown: an answer by the rule on its citations, a question with
    the answer that follows it (a question without an answer yet: shown)."""
    if visibility is None:
        return [True] * len(messages)
    shown = [True] * len(messages)
    pending: list[int] = []
    for i, m in enumerate(messages):
        if m.role == "user":
            pending.append(i)
            continue
        ok = visibility.may_see(Cited.of_citations(m.citations), asked_by=asker)
        for j in pending + [i]:
            shown[j] = ok
        pending = []
    return shown


def _message_dict(m: Message, shown: bool) -> dict[str, Any]:
    if not shown:
        return {"id": m.id, "role": m.role, "content": None, "citations": None, "abstained": m.abstained,
                "created_at": _iso(m.created_at), "withheld": True}
    return {"id": m.id, "role": m.role, "content": m.content, "citations": m.citations,
            "abstained": m.abstained, "created_at": _iso(m.created_at)}


def user_records(db: Database, name: str, *, visibility: Visibility | None = None) -> dict[str, Any]:
    """Everything the product keeps of user `name` as its own, JSON-ready: the account (never its
    password hash), conversations with their messages, feedback, API keys (names and prefixes, never
    hashes) and uploads (the files themselves are the caller's to add).

    Args:
        visibility: the rule for who will read it (`assistant.core.visibility`): text it withholds is
            None with `withheld: true` (a conversation's title too, when any of its messages is), an
            upload's file name and path likewise. None: everything (the operator's CLI export).

    Raises:
        NotFoundError: no such user.
    """
    with db.session() as session:
        user = find_user(session, name)
        conversations = []
        for conv in session.scalars(select(Conversation).where(Conversation.user_id == user.id).order_by(Conversation.created_at)):
            messages = list(session.scalars(select(Message).where(Message.conversation_id == conv.id).order_by(Message.id)))
            shown = _exchanges_shown(messages, visibility, user.id)
            whole = all(shown)
            conversations.append({
                "id": conv.id, "title": conv.title if whole else None, "created_at": _iso(conv.created_at),
                "updated_at": _iso(conv.updated_at), "messages": [_message_dict(m, ok) for m, ok in zip(messages, shown)],
                **({} if whole else {"withheld": True}),
            })
        feedback = []
        for f in session.scalars(_feedback_of(user).order_by(Feedback.id)):
            citations = session.scalar(select(Message.citations).where(Message.id == f.message_id)) if f.message_id else None
            if feedback_shown(visibility, f, citations):
                feedback.append({"id": f.id, "message_id": f.message_id, "rating": f.rating, "comment": f.comment,
                                 "corrected_answer": f.corrected_answer, "question": f.question, "answer": f.answer,
                                 "chunk_ids": f.chunk_ids, "created_at": _iso(f.created_at)})
            else:
                feedback.append({"id": f.id, "message_id": f.message_id, "rating": f.rating, "comment": None,
                                 "corrected_answer": None, "question": None, "answer": None, "chunk_ids": None,
                                 "created_at": _iso(f.created_at), "withheld": True})
        keys = [
            {"name": k.name, "prefix": k.prefix, "created_at": _iso(k.created_at), "revoked_at": _iso(k.revoked_at)}
            for k in session.scalars(select(ApiKey).where(ApiKey.user_id == user.id))
        ]
        uploads: list[dict[str, Any]] = []
        for u in user_uploads(session, user.id):
            if visibility is None or visibility.may_see_upload(u.audience, owner_id=user.id):
                uploads.append({"id": u.id, "filename": u.filename, "path": u.path, "audience": u.audience,
                                "created_at": _iso(u.created_at)})
            else:
                uploads.append({"id": u.id, "filename": None, "path": None, "audience": u.audience,
                                "created_at": _iso(u.created_at), "withheld": True})
        account: dict[str, Any] = {
            "name": user.name, "display_name": user.display_name, "email": user.email,
            "created_at": _iso(user.created_at), "is_admin": user.is_admin, "legal_hold": bool(user.legal_hold),
        }
    return {"account": account, "conversations": conversations, "feedback": feedback, "api_keys": keys, "uploads": uploads}


def _feedback_of(user: User) -> Select[Feedback]:
    return select(Feedback).where(or_(Feedback.user_id == user.id, Feedback.principal == user.name))


def erase_user_rows(db: Database, name: str, *, redact_audit: bool, upload_ids: list[str]) -> dict[str, int]:
    """In one transaction, delete user `name`'s conversations (with messages), feedback, API keys,
    sessions, sign-in throttles, the rows of uploads `upload_ids` and the account itself; with
    `redact_audit`, replace the query text of the audit rows written for the user (the row, its
    principal, time, action and documents stay; the chain keeps verifying through the content hash).

    Returns:
        Rows deleted (or redacted) per kind.

    Raises:
        NotFoundError: no such user.
    """
    now = datetime.now(UTC)
    with db.session() as session:
        user = find_user(session, name)
        counts = {
            "conversations": changed_rows(session, delete(Conversation).where(Conversation.user_id == user.id)),
            "feedback": changed_rows(
                session,
                delete(Feedback).where(or_(Feedback.user_id == user.id, Feedback.principal == user.name))
            ),
            "api_keys": changed_rows(session, delete(ApiKey).where(ApiKey.user_id == user.id)),
            "sessions": changed_rows(session, delete(AuthSession).where(AuthSession.user_id == user.id)),
            "uploads": delete_upload_rows(session, upload_ids),
        }
        session.execute(delete(SignInThrottle).where(SignInThrottle.account == user.name))
        counts["audit_rows_redacted"] = 0
        if redact_audit:
            counts["audit_rows_redacted"] = changed_rows(
                session,
                update(AuditEvent)
                .where(AuditEvent.principal == user.name, AuditEvent.erased_at.is_(None), AuditEvent.query != "")
                .values(query=ERASED_TEXT, erased_at=now)
            )
        session.delete(user)
    return counts
