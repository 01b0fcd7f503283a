"""The queries behind the quality view's lists: the slowest answers, and the questions the documents
did not answer (the "not found" answer) or whose answer was rated down, from which knowledge gaps are
grouped (`assistant.operations.knowledge_gaps`); and what the admins' sources page shows of each
source (`source_statuses`). A question's text is shown through `assistant.core.visibility`:
withheld where the viewer may not read every document its answer cited.

Every query is called with the `Database` as its first argument, as before: `transactional` opens its
session (one transaction per call); this module never opens one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from assistant.answering.store import feedback_cited
from assistant.core.db.jobs import STOP_KEY, JobRecord, get_job
from assistant.core.db.models import (
    Conversation,
    Document,
    Feedback,
    HelpdeskTicket,
    Job,
    JobItem,
    Message,
    Source,
    Upload,
    User,
    utcnow,
)
from assistant.core.db.session import Database, transactional
from assistant.core.db.sources import SourceRow, source_summaries
from assistant.core.errors import ConflictError, NotFoundError
from assistant.core.visibility import Cited, Visibility


@dataclass(frozen=True)
class SlowAnswer:
    """An answer and the seconds from its question being stored to the answer being stored;
    `question` is None and `withheld` True where the viewer may not see it."""

    question: str | None
    seconds: float
    answered_at: datetime
    not_found: bool
    withheld: bool = False


@dataclass(frozen=True)
class GapQuestion:
    """A question the documents did not serve: `why` is `not_found` or `rated_down`."""

    question: str
    why: str
    at: datetime


def _since(days: int) -> datetime:
    return utcnow() - timedelta(days=days)


@transactional
def _recent_messages(
    session: Session, days: int
) -> Sequence[Row[str, str, str, bool, datetime, list[dict[str, Any]], int | None]]:
    # Every message of the last `days` days with its conversation's owner, by conversation then in order.
    return session.execute(
        select(Message.conversation_id, Message.role, Message.content, Message.abstained, Message.created_at,
               Message.citations, Conversation.user_id)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(Message.created_at >= _since(days)).order_by(Message.conversation_id, Message.id)
    ).all()


def slowest_answers(db: Database, *, visibility: Visibility, days: int = 30, limit: int = 10) -> list[SlowAnswer]:
    """The `limit` answers of the last `days` days that took longest, slowest first: each answer is
    timed from the question before it in its conversation (both are stored as they happen). A
    question is the asker's own words: shown only where `visibility` allows for the documents its answer
    cited and, when it cited none, to viewers holding every group of the asker (`may_see_authored`: a
    "not found" question may name what only the asker's groups read)."""
    rows = _recent_messages(db, days)
    timed, question = [], None
    for conversation_id, role, content, abstained, at, citations, asker in rows:
        if role == "user":
            question = (conversation_id, content, at)
        elif question is not None and question[0] == conversation_id:
            seconds = (at - question[2]).total_seconds()
            timed.append((round(seconds, 3), question[1], at, abstained, citations, asker))
            question = None
    slowest = sorted(timed, key=lambda a: -a[0])[:limit]
    out = []
    for seconds, text, at, abstained, citations, asker in slowest:
        shown = visibility.may_see_authored(Cited.of_citations(citations), author_id=asker)
        out.append(SlowAnswer(question=text if shown else None, seconds=seconds, answered_at=at, not_found=abstained,
                              withheld=not shown))
    return out


@dataclass(frozen=True)
class GapQuestions:
    """The unserved questions the viewer may see (newest first, each once) and how many were withheld."""

    shown: list[GapQuestion]
    withheld: int


@transactional
def gap_questions(session: Session, *, visibility: Visibility, days: int = 30, limit: int = 2000) -> GapQuestions:
    """The questions of the last `days` days answered "not found" or rated down, newest first, each once
    (a question both unanswered and rated down counts as `not_found`); those `visibility` withholds
    (their answer cited a document the viewer may not read, or cited none and the viewer lacks one of the
    asker's groups: `may_see_authored`) are only counted."""
    since = _since(days)
    withheld = 0
    answers = session.execute(
        select(Message.conversation_id, Message.id, Message.created_at, Message.citations, Conversation.user_id)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(Message.created_at >= since, Message.role == "assistant", Message.abstained.is_(True))
        .order_by(Message.id.desc()).limit(limit)
    ).all()
    found: list[GapQuestion] = []
    for conversation_id, answer_id, at, citations, asker in answers:
        asked = session.scalar(
            select(Message.content).where(
                Message.conversation_id == conversation_id, Message.role == "user", Message.id < answer_id
            ).order_by(Message.id.desc()).limit(1)
        )
        if not asked:
            continue
        if visibility.may_see_authored(Cited.of_citations(citations), author_id=asker):
            found.append(GapQuestion(question=asked, why="not_found", at=at))
        else:
            withheld += 1
    for row, citations in session.execute(
        select(Feedback, Message.citations).outerjoin(Message, Message.id == Feedback.message_id)
        .where(Feedback.rating < 0, Feedback.updated_at >= since, Feedback.abstained.is_(False))
        .order_by(Feedback.updated_at.desc()).limit(limit)
    ):
        if not row.question:
            continue
        if visibility.may_see_authored(feedback_cited(row, citations), author_id=row.user_id):
            found.append(GapQuestion(question=row.question, why="rated_down", at=row.updated_at))
        else:
            withheld += 1
    seen, unique = set(), []
    for gap in sorted(found, key=lambda g: g.at, reverse=True):
        key = " ".join(gap.question.casefold().split())
        if key not in seen:
            seen.add(key)
            unique.append(gap)
    return GapQuestions(shown=unique, withheld=withheld)


# Outcomes of a file that leave nothing to fix.
_FINE_FILE_STATES = ("done", "skipped", "deleted", "queued", "running")


@dataclass(frozen=True)
class FileErrorPublic:
    """A file of a source's latest job that was not indexed: its path in the source, status and reason
    (None where the source's path is withheld)."""

    path: str | None
    status: str
    reason: str | None


@dataclass(frozen=True)
class SourceStatusPublic(SourceRow):
    """A source as listed to admins (`SourceRow`: kind, path on the server, live documents and chunks,
    last finished sync), with its latest job's ID and status and that job's file errors. For an
    upload: `upload_owner` and `audience`; `path` and the errors' paths and reasons are None and
    `withheld` True where the viewer may not read the upload."""

    # A withheld upload's path is None here, where SourceRow's is always set (one field, two meanings).
    path: str | None  # type: ignore[assignment]
    last_job_id: int | None = None
    last_job_status: str | None = None
    errors: list[FileErrorPublic] = field(default_factory=list)
    upload_owner: str | None = None
    audience: str | None = None
    withheld: bool = False


def source_statuses(db: Database, *, visibility: Visibility | None = None, max_errors: int = 50) -> list[SourceStatusPublic]:
    """What the admins' sources page shows: every source, by path, with its latest job and up to
    `max_errors` of its files that did not make it into the index, with why (that job's, then those
    still failing since an earlier one). An upload's source
    names its owner and audience; its path only where the viewer may read the upload. A failed file's
    path and reason only where its ACL admits the viewer (`Visibility.may_see_file`).

    Args:
        visibility: the viewer's rule; None: every path shown (for the server's own use, never a view).
    """
    rows = source_summaries(db)
    uploads = {o.uri: o for o in upload_owners(db).values()}
    uris, latest = _latest_jobs(db, [row.id for row in rows], max_errors)
    out = []
    for row in rows:
        job_id, job_status, errors = latest.get(row.id, (None, None, []))
        upload = uploads.get(uris.get(row.id, ""))
        shown = upload is None or visibility is None or visibility.may_see_upload(upload.audience, owner_id=upload.user_id)
        values = asdict(row)
        if not shown:
            values["path"] = None
        errors = [
            FileErrorPublic(path=e.path, status=e.status, reason=e.reason)
            if shown and (visibility is None or visibility.may_see_file(acl))
            else FileErrorPublic(path=None, status=e.status, reason=None)
            for e, acl in errors
        ]
        out.append(SourceStatusPublic(
            **values, last_job_id=job_id, last_job_status=job_status, errors=errors,
            upload_owner=upload.owner if upload else None, audience=upload.audience if upload else None,
            withheld=not shown,
        ))
    return out


@transactional
def _latest_jobs(
    session: Session, source_ids: list[int], max_errors: int,
) -> tuple[dict[int, str], dict[int, tuple[int, str, list[tuple[FileErrorPublic, list[str] | None]]]]]:
    """Each source's URI, and for each source with a job: its latest job's ID, status and file errors,
    each with the file's ACL: those of the job's files, then those of the files that still fail since
    an earlier job (an unchanged file that failed is skipped by the next sync, and would vanish from
    the page while it is still not in the index)."""
    uris = dict(session.execute(select(Source.id, Source.uri)).all())
    latest = {}
    for source_id in source_ids:
        job = session.scalar(select(Job).where(Job.source_id == source_id).order_by(Job.id.desc()).limit(1))
        if job is None:
            continue
        items = session.scalars(
            select(JobItem).where(JobItem.job_id == job.id, JobItem.status.not_in(_FINE_FILE_STATES))
            .order_by(JobItem.id).limit(max_errors)
        )
        errors = [(FileErrorPublic(path=i.path, status=i.status, reason=i.reason), i.acl) for i in items]
        listed = {e.path for e, _acl in errors}
        still_failing = session.scalars(
            select(Document).where(Document.source_id == source_id, Document.deleted_at.is_(None),
                                   Document.status.not_in(_FINE_FILE_STATES)).order_by(Document.path).limit(max_errors)
        )
        errors += [(FileErrorPublic(path=d.path, status=d.status, reason=d.reason), d.acl)
                   for d in still_failing if d.path not in listed][: max_errors - len(errors)]
        latest[source_id] = (job.id, job.status, errors)
    return uris, latest


@transactional
def operations_counts(session: Session) -> dict[str, dict[tuple[Any, ...], int]]:
    """Counts for operators (the `/metrics` scrape), each a few rows however large the tables (indexed
    columns); called with the `Database`.

    Returns:
        `{"jobs": {(kind, status): n}, "helpdesk_decisions": {(category, decision): n},
        "helpdesk_outcomes": {(category, outcome): n}}`; a None category, decision or outcome stays None
        (tickets not categorised, pending, or not resolved yet; the last are left out of the outcomes).
    """
    jobs = session.execute(select(Job.kind, Job.status, func.count()).group_by(Job.kind, Job.status)).all()
    decisions = session.execute(
        select(HelpdeskTicket.category, HelpdeskTicket.decision, func.count())
        .group_by(HelpdeskTicket.category, HelpdeskTicket.decision)
    ).all()
    outcomes = session.execute(
        select(HelpdeskTicket.category, HelpdeskTicket.outcome, func.count())
        .where(HelpdeskTicket.outcome.is_not(None))
        .group_by(HelpdeskTicket.category, HelpdeskTicket.outcome)
    ).all()
    return {
        "jobs": {(kind, status): n for kind, status, n in jobs},
        "helpdesk_decisions": {(category, decision): n for category, decision, n in decisions},
        "helpdesk_outcomes": {(category, outcome): n for category, outcome, n in outcomes},
    }


@transactional
def _ask_to_stop(session: Session, job_id: int, *, by: str) -> None:
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"job {job_id} not found")
    if job.kind != "sync" or job.status not in ("queued", "running"):
        raise ConflictError(f"job {job_id} is a {job.status} {job.kind} job: only a queued or running sync stops",
                            code="job_not_running")
    job.params = {**(job.params or {}), STOP_KEY: by}
    if job.status == "queued":
        job.status, job.finished_at, job.reason = "interrupted", utcnow(), f"stopped by {by} before it started"


def request_stop(db: Database, job_id: int, *, by: str) -> JobRecord:
    """Ask sync job `job_id` to stop at its next file boundary on behalf of `by` (a user name), as a first
    Ctrl-C would (the sync reads `core.db.jobs.stop_requested` per file, then `interrupt_job`); a queued one
    is `interrupted` at once. Both resume like any interrupted job. Returns the job as it is now.

    Raises:
        NotFoundError: no such job.
        ConflictError: code `job_not_running`: not a queued or running sync.
    """
    _ask_to_stop(db, job_id, by=by)
    return get_job(db, job_id)


@transactional
def active_syncs_of(session: Session, path: str) -> list[int]:
    """Ids of the queued or running sync jobs of source `path` (the resolved path as `queue_sync` stores it)."""
    jobs = session.execute(
        select(Job.id, Job.params).where(Job.kind == "sync", Job.status.in_(("queued", "running")))
    ).all()
    return [job_id for job_id, params in jobs if (params or {}).get("path") == path]


@transactional
def close_interrupted_syncs(session: Session, path: str, source_id: int, *, reason: str) -> list[int]:
    """Mark failed, with `reason`, the interrupted sync jobs of source `path` (as `queue_sync` stores it)
    or `source_id`, so that no restart resumes them (`JobDispatcher.resume_unfinished` resumes
    interrupted jobs): a removed source must not be indexed again. Returns their ids."""
    jobs = session.scalars(select(Job).where(Job.kind == "sync", Job.status == "interrupted")).all()
    closed = [job for job in jobs if job.source_id == source_id or (job.params or {}).get("path") == path]
    for job in closed:
        job.status, job.finished_at, job.reason = "failed", utcnow(), reason
    return [job.id for job in closed]


@transactional
def delete_uploads_stored_at(session: Session, uri: str) -> list[Path]:
    """Delete the rows of the uploads whose stored file is `uri` (the `file://` URI of the file source
    that ingested it); returns their stored files, for the caller to delete."""
    rows = [row for row in session.scalars(select(Upload)).all() if Path(row.path).resolve().as_uri() == uri]
    for row in rows:
        session.delete(row)
    return [Path(row.path) for row in rows]


@dataclass(frozen=True)
class UploadOwner:
    """Who owns an upload and who may read it: `audience` is its one ACL entry; `uri` its file's URI
    (the file source its ingestion registers)."""

    id: str
    user_id: int
    owner: str
    audience: str
    uri: str


@transactional
def upload_owners(session: Session) -> dict[str, UploadOwner]:
    """Every upload's owner and audience, by upload ID."""
    rows = session.execute(
        select(Upload.id, Upload.user_id, User.name, Upload.audience, Upload.path).join(User, User.id == Upload.user_id)
    ).all()
    return {
        upload_id: UploadOwner(upload_id, user_id, owner, audience, Path(path).resolve().as_uri())
        for upload_id, user_id, owner, audience, path in rows
    }
