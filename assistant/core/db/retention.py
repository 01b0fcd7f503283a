"""Retention's queries: the users under legal hold, and the rows of each kind older than a cut-off
(conversations, feedback, job history, uploads) deleted or listed. The ages and the report are
`assistant.compliance.retention`'s; the audit trail's prefix is purged by `assistant.core.db.audit`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, or_, select

from assistant.core.db.models import Conversation, Feedback, Job, JobItem, User
from assistant.core.db.session import Database, changed_rows
from assistant.core.db.user_data import UploadFile, delete_upload_rows, user_uploads


def held_users(db: Database) -> list[tuple[int, str]]:
    """`(id, name)` of every user under legal hold."""
    with db.session() as session:
        return [(r.id, r.name) for r in session.execute(select(User.id, User.name).where(User.legal_hold.is_(True)))]


def delete_conversations(db: Database, before: datetime, *, keep_user_ids: list[int]) -> int:
    """Delete conversations last updated before `before`, except those of `keep_user_ids`; returns how many."""
    stmt = delete(Conversation).where(Conversation.updated_at < before)
    if keep_user_ids:
        stmt = stmt.where(or_(Conversation.user_id.is_(None), Conversation.user_id.not_in(keep_user_ids)))
    with db.session() as session:
        return changed_rows(session, stmt)


def delete_feedback(db: Database, before: datetime, *, keep_user_ids: list[int], keep_principals: list[str]) -> int:
    """Delete feedback given before `before`, except that of `keep_user_ids` (by account, or by the
    principal name it recorded, `keep_principals`); returns how many."""
    stmt = delete(Feedback).where(Feedback.created_at < before)
    if keep_user_ids:
        stmt = stmt.where(
            and_(or_(Feedback.user_id.is_(None), Feedback.user_id.not_in(keep_user_ids)),
                 Feedback.principal.not_in(keep_principals))
        )
    with db.session() as session:
        return changed_rows(session, stmt)


def delete_job_history(db: Database, before: datetime) -> tuple[int, int]:
    """Delete job items created before `before` and jobs that finished before it; returns
    `(items, jobs)` deleted."""
    with db.session() as session:
        items = changed_rows(session, delete(JobItem).where(JobItem.created_at < before))
        jobs = changed_rows(
            session,
            delete(Job).where(Job.finished_at.is_not(None), Job.finished_at < before)
        )
        return items, jobs


def expired_uploads(db: Database, before: datetime) -> list[UploadFile]:
    """The uploads made before `before` by users not under legal hold."""
    with db.session() as session:
        users = session.scalars(select(User.id).where(User.legal_hold.is_(False))).all()
        return [u for user_id in users for u in user_uploads(session, user_id, before=before)]


def delete_uploads(db: Database, upload_ids: list[str]) -> int:
    """Delete the `uploads` rows of `upload_ids`; returns how many."""
    with db.session() as session:
        return delete_upload_rows(session, upload_ids)
