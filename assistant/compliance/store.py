"""Compliance's tables in SQL: the audit trail, retention's deletions, and a user's own data for export
and erasure.

- Audit trail: appending a row to the hash chain under the chain head's lock, reading rows with
  filters or in batches, and deleting the oldest prefix for retention. The chain's digests are
  `assistant.compliance.audit_chain`'s: the caller passes the function that computes a row's hash.
- Retention: the users under legal hold, and the rows of each kind older than a cut-off
  (conversations, feedback, job history, uploads) deleted or listed. The ages and the report are
  `assistant.compliance.retention`'s; the audit trail's prefix is purged by `purge_prefix`.
- A user's own data for export, erasure and retention: conversations, feedback, uploads, keys,
  sessions, and the audit rows written for them.

Every query is called with the `Database` as its first argument, as before: `transactional` (or
`transactional_iter` for `event_batches`) opens its session, one transaction per call; the helpers
that take a `Session` run inside the caller's. This module never opens a session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    MetaData,
    Select,
    String,
    Table,
    and_,
    bindparam,
    cast,
    delete,
    false,
    func,
    insert,
    inspect,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from assistant.answering.store import feedback_shown
from assistant.core.db.models import (
    ApiKey,
    AuditChainHead,
    AuditEvent,
    AuthSession,
    Conversation,
    Feedback,
    Job,
    JobItem,
    Message,
    SignInThrottle,
    Source,
    User,
    utcnow,
)
from assistant.core.db.session import changed_rows, transactional, transactional_iter
from assistant.core.errors import NotFoundError
from assistant.core.visibility import Cited, Visibility

CHAIN_HEAD_ID = 1
# `append_event`'s statements, built once (building them per row cost more than running them).
_HEADS, _EVENTS = AuditChainHead.__table__, AuditEvent.__table__
_BUMP_HEAD = (
    update(_HEADS).where(_HEADS.c.id == CHAIN_HEAD_ID).values(appended=_HEADS.c.appended + 1)
    .returning(_HEADS.c.last_hash)
)
_INSERT_EVENT = insert(_EVENTS).returning(_EVENTS.c.id)
_SET_ROW_HASH = update(_EVENTS).where(_EVENTS.c.id == bindparam("event_id")).values(row_hash=bindparam("row_hash"))
_SET_HEAD_HASH = update(_HEADS).where(_HEADS.c.id == CHAIN_HEAD_ID).values(last_hash=bindparam("row_hash"))


@transactional
def append_event(
    session: Session,
    *,
    principal: str,
    action: str,
    query: str,
    chunk_ids: Sequence[str],
    doc_ids: Sequence[str],
    details: dict[str, Any],
    auth_method: str,
    address: str,
    request_id: str | None,
    content_hash: str,
    row_digest: Callable[[AuditEvent], str],
) -> int:
    """Append one row after the chain head and make it the head; returns its id.

    Args:
        content_hash: the digest of `query` (the row's erasable content).
        row_digest: computes the row's hash from the row as written (its id, time and `prev_hash` set).
    """
    # Updating the head first takes the write lock, so concurrent appends queue here (one chain). Plain
    # statements on the tables, not the ORM's unit of work: its two flushes per row were most of the
    # audit row's cost, a fixed cost of every chat (issue 38).
    last_hash = session.execute(_BUMP_HEAD).scalar_one_or_none()
    if last_hash is None:  # a database made without the migrations (the migration inserts the head)
        session.execute(insert(_HEADS).values(id=CHAIN_HEAD_ID, last_hash="", appended=1))
        last_hash = ""
    row: dict[str, Any] = {
        "at": utcnow(), "principal": principal, "action": action, "query": query, "chunk_ids": list(chunk_ids),
        "doc_ids": list(dict.fromkeys(doc_ids)), "details": details, "auth_method": auth_method,
        "address": address[:64], "content_hash": content_hash, "prev_hash": last_hash, "request_id": request_id,
        "row_hash": "", "erased_at": None,
    }
    event_id = session.execute(_INSERT_EVENT, row).scalar_one()
    row_hash = row_digest(AuditEvent(id=event_id, **row))  # the row as written, not added to the session
    session.execute(_SET_ROW_HASH, {"event_id": event_id, "row_hash": row_hash})
    session.execute(_SET_HEAD_HASH, {"row_hash": row_hash})
    return event_id


@transactional
def find_events(
    session: Session,
    *,
    user: str | None = None,
    action: str | None = None,
    doc_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after_id: int = 0,
    limit: int = 100,
) -> list[AuditEvent]:
    """Rows matching every filter given, oldest first from `after_id` (exclusive), at most `limit`.
    `since` is inclusive, `until` exclusive."""
    stmt = select(AuditEvent).where(AuditEvent.id > after_id).order_by(AuditEvent.id).limit(limit)
    if user:
        stmt = stmt.where(AuditEvent.principal == user)
    if action:
        stmt = stmt.where(AuditEvent.action == action)
    if doc_id:
        # Portable across SQLite and PostgreSQL's `json`: document IDs are UUIDs, quoted in the array text.
        stmt = stmt.where(cast(AuditEvent.doc_ids, String).like(f'%"{doc_id}"%'))
    if since:
        stmt = stmt.where(AuditEvent.at >= since)
    if until:
        stmt = stmt.where(AuditEvent.at < until)
    return list(session.scalars(stmt))


@transactional
def newest_events(session: Session, *, principal: str | None = None, limit: int = 50) -> list[AuditEvent]:
    """Newest rows first, optionally of one principal."""
    stmt = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if principal:
        stmt = stmt.where(AuditEvent.principal == principal)
    return list(session.scalars(stmt))


@transactional
def count_events(session: Session, *, principal: str, action: str, window_s: float) -> int:
    """How many `action` events `principal` has in the last `window_s` seconds."""
    since = utcnow() - timedelta(seconds=window_s)
    return session.scalar(
        select(func.count()).select_from(AuditEvent).where(
            AuditEvent.principal == principal, AuditEvent.action == action, AuditEvent.at >= since
        )
    ) or 0


@transactional
def chain_state(session: Session, *, anchor_action: str) -> tuple[str | None, set[Any]]:
    """The chain head's hash (None without a head row) and the `chain_anchor` detail of every
    `anchor_action` row (the hashes retention recorded for the rows it deleted)."""
    head = session.get(AuditChainHead, CHAIN_HEAD_ID)
    anchors = {
        (e.details or {}).get("chain_anchor")
        for e in session.scalars(select(AuditEvent).where(AuditEvent.action == anchor_action))
    }
    return (head.last_hash if head is not None else None), anchors


@transactional_iter
def event_batches(session: Session, *, batch_rows: int = 5000) -> Iterator[list[AuditEvent]]:
    """Every row, oldest first, `batch_rows` at a time, read in one session (each batch is let go
    before the next is read, so memory stays at one batch)."""
    after = 0
    while True:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.id > after).order_by(AuditEvent.id).limit(batch_rows)
        ).all()
        if not rows:
            return
        after = rows[-1].id
        yield list(rows)
        session.expunge_all()


@transactional
def purge_prefix(session: Session, cutoff: datetime, held: list[str]) -> tuple[int, str]:
    """Delete the oldest rows up to (not including) the first row that is newer than `cutoff` or
    belongs to one of the `held` principals: only a prefix, so the hash chain stays whole from the
    first kept row. Returns the rows deleted and the hash of the last one (the kept chain's anchor)."""
    stop = select(AuditEvent.id).where(or_(AuditEvent.at >= cutoff, AuditEvent.principal.in_(held) if held else false()))
    first_kept = session.scalar(stop.order_by(AuditEvent.id).limit(1))
    scope = AuditEvent.id < first_kept if first_kept is not None else AuditEvent.id.is_not(None)
    last = session.scalars(select(AuditEvent).where(scope).order_by(AuditEvent.id.desc()).limit(1)).first()
    if last is None:
        return 0, ""
    anchor = last.row_hash
    deleted = changed_rows(session, delete(AuditEvent).where(AuditEvent.id <= last.id))
    return deleted, anchor


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


@transactional
def hold_and_uploads(session: Session, name: str) -> tuple[bool, list[UploadFile]]:
    """Whether user `name` is under legal hold, and their uploads.

    Raises:
        NotFoundError: no such user.
    """
    user = find_user(session, name)
    return bool(user.legal_hold), user_uploads(session, user.id)


def delete_upload_rows(session: Session, upload_ids: list[str]) -> int:
    """Delete the rows of uploads `upload_ids` (their files, sources and chunks are the caller's)."""
    table = uploads_table(session)
    if table is None or not upload_ids:
        return 0
    return changed_rows(session, delete(table).where(table.c.id.in_(upload_ids)))


def _exchanges_shown(messages: list[Message], visibility: Visibility | None, asker: int) -> list[bool]:
    """Per message, whether its text is shown: a question (the member's own words) with the answer that
    follows it, by the rule on the answer's citations and, where it cited none (a "not found", or no
    answer yet), the asker's groups (`Visibility.may_see_authored`)."""
    if visibility is None:
        return [True] * len(messages)
    shown = [True] * len(messages)
    pending: list[int] = []
    for i, m in enumerate(messages):
        if m.role == "user":
            pending.append(i)
            continue
        ok = visibility.may_see_authored(Cited.of_citations(m.citations), author_id=asker)
        for j in pending + [i]:
            shown[j] = ok
        pending = []
    if pending:
        ok = visibility.may_see_authored(Cited(), author_id=asker)
        for j in pending:
            shown[j] = ok
    return shown


def _message_dict(m: Message, shown: bool) -> dict[str, Any]:
    if not shown:
        return {"id": m.id, "role": m.role, "content": None, "citations": None, "abstained": m.abstained,
                "created_at": _iso(m.created_at), "withheld": True}
    return {"id": m.id, "role": m.role, "content": m.content, "citations": m.citations,
            "abstained": m.abstained, "created_at": _iso(m.created_at)}


@transactional
def user_records(session: Session, name: str, *, visibility: Visibility | None = None) -> dict[str, Any]:
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


@transactional
def erase_user_rows(session: Session, name: str, *, redact_audit: bool, upload_ids: list[str]) -> dict[str, int]:
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


@transactional
def held_users(session: Session) -> list[tuple[int, str]]:
    """`(id, name)` of every user under legal hold."""
    return [(r.id, r.name) for r in session.execute(select(User.id, User.name).where(User.legal_hold.is_(True)))]


@transactional
def delete_conversations(session: Session, before: datetime, *, keep_user_ids: list[int]) -> int:
    """Delete conversations last updated before `before`, except those of `keep_user_ids`; returns how many."""
    stmt = delete(Conversation).where(Conversation.updated_at < before)
    if keep_user_ids:
        stmt = stmt.where(or_(Conversation.user_id.is_(None), Conversation.user_id.not_in(keep_user_ids)))
    return changed_rows(session, stmt)


@transactional
def delete_feedback(session: Session, before: datetime, *, keep_user_ids: list[int], keep_principals: list[str]) -> int:
    """Delete feedback given before `before`, except that of `keep_user_ids` (by account, or by the
    principal name it recorded, `keep_principals`); returns how many."""
    stmt = delete(Feedback).where(Feedback.created_at < before)
    if keep_user_ids:
        stmt = stmt.where(
            and_(or_(Feedback.user_id.is_(None), Feedback.user_id.not_in(keep_user_ids)),
                 Feedback.principal.not_in(keep_principals))
        )
    return changed_rows(session, stmt)


@transactional
def delete_job_history(session: Session, before: datetime) -> tuple[int, int]:
    """Delete job items created before `before` and jobs that finished before it; returns
    `(items, jobs)` deleted."""
    items = changed_rows(session, delete(JobItem).where(JobItem.created_at < before))
    jobs = changed_rows(
        session,
        delete(Job).where(Job.finished_at.is_not(None), Job.finished_at < before)
    )
    return items, jobs


@transactional
def expired_uploads(session: Session, before: datetime) -> list[UploadFile]:
    """The uploads made before `before` by users not under legal hold."""
    users = session.scalars(select(User.id).where(User.legal_hold.is_(False))).all()
    return [u for user_id in users for u in user_uploads(session, user_id, before=before)]


@transactional
def delete_uploads(session: Session, upload_ids: list[str]) -> int:
    """Delete the `uploads` rows of `upload_ids`; returns how many."""
    return delete_upload_rows(session, upload_ids)
