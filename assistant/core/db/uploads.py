"""The queries on uploads: a person's uploaded files with their audience and the state of the job that
ingests each one, as the upload page shows them.

An upload's state is read from its sync job and the job's one item (the file's outcome), so the job
row stays the truth: `queued`, `running`, `done`, or the reason it failed in a word the page translates
(`encrypted`, `needs_ocr`, `unsupported`, `too_large`, `empty`, `failed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from assistant.core.db.models import Document, Job, JobItem, Source, Upload, User, utcnow
from assistant.core.db.session import Database
from assistant.core.errors import NotFoundError
from assistant.core.index.payload import document_id
from assistant.core.visibility import Visibility

# Outcomes of a file that mean its document is searchable.
_INDEXED = ("done", "skipped")
# The words `ingest.formats.limits.too_large` puts in a reason: the file broke a size limit.
_LIMIT_WORDS = "exceeds the limit"


@dataclass(frozen=True)
class UploadPublic:
    """An upload as its owner sees it.

    Attributes:
        status: `queued`, `running`, `done`, or why it failed (`encrypted`, `needs_ocr`,
            `unsupported`, `too_large`, `empty`, `failed`).
        progress: 0.0 (queued) to 1.0 (finished, whatever the outcome).
        reason: the pipeline's own words for a failure ("" otherwise).
        document_id: the document's ID once it is searchable (for its preview), else None.
    """

    id: str
    filename: str
    audience: str
    size_bytes: int
    created_at: datetime
    job_id: int | None
    status: str
    progress: float
    reason: str
    chunks: int
    document_id: str | None


def _state(job: Job | None, item: JobItem | None) -> tuple[str, float, str, int]:
    """`(status, progress, reason, chunks)` of an upload from its job and the job's item."""
    if job is None:
        return "failed", 1.0, "its ingestion job was removed", 0
    if item is not None and item.status not in ("queued", "running"):
        if item.status in _INDEXED:
            return "done", 1.0, "", item.chunks
        status = "too_large" if _LIMIT_WORDS in item.reason else item.status
        return status, 1.0, item.reason, 0
    if job.status == "failed":
        return ("too_large" if _LIMIT_WORDS in job.reason else "failed"), 1.0, job.reason, 0
    if job.status == "done":
        return "done", 1.0, "", item.chunks if item else 0
    if job.status == "running":
        return "running", 0.5 if item is not None and item.status == "running" else 0.25, "", 0
    return "queued", 0.0, "", 0


def _public(upload: Upload, job: Job | None, item: JobItem | None) -> UploadPublic:
    status, progress, reason, chunks = _state(job, item)
    doc = document_id(Path(upload.path).resolve().as_uri()) if status == "done" else None
    return UploadPublic(
        id=upload.id, filename=upload.filename, audience=upload.audience, size_bytes=upload.size_bytes,
        created_at=upload.created_at, job_id=upload.job_id, status=status, progress=progress, reason=reason,
        chunks=chunks, document_id=doc,
    )


def _with_job(session: Session, upload: Upload) -> UploadPublic:
    job = session.get(Job, upload.job_id) if upload.job_id is not None else None
    item = None
    if job is not None:
        item = session.scalar(select(JobItem).where(JobItem.job_id == job.id).order_by(JobItem.id).limit(1))
    return _public(upload, job, item)


def add_upload(db: Database, *, upload_id: str, user_id: int, filename: str, path: Path, audience: str,
               size_bytes: int, params: dict[str, Any], refused: str | None = None) -> UploadPublic:
    """Record an upload stored at `path` and queue the sync job that ingests it, in one transaction.

    Args:
        upload_id: the upload's UUID (also the name of its folder).
        user_id: the owner.
        filename: the file's name as uploaded.
        path: where the file is stored.
        audience: the one ACL entry that may read it (validated by the caller).
        size_bytes: the file's size.
        params: the sync job's params (`path`, `acl` manifest).
        refused: why the file is refused before any parsing (its job is then recorded failed with
            this reason and must not be submitted); None: queued.

    Returns:
        The upload, `queued` (its `job_id` is what the caller submits) or failed.
    """
    with db.session() as session:
        job = Job(kind="sync", params=params)
        if refused is not None:
            job.status, job.reason, job.finished_at = "failed", refused, utcnow()
        session.add(job)
        session.flush()
        upload = Upload(id=upload_id, user_id=user_id, filename=filename, path=str(path), audience=audience,
                        size_bytes=size_bytes, job_id=job.id)
        session.add(upload)
        session.flush()
        return _public(upload, job, None)


def list_uploads(db: Database, *, user_id: int, limit: int = 200) -> list[UploadPublic]:
    """The uploads of user `user_id`, newest first, each with its job's state."""
    with db.session() as session:
        rows = session.scalars(
            select(Upload).where(Upload.user_id == user_id).order_by(Upload.created_at.desc(), Upload.id).limit(limit)
        ).all()
        return [_with_job(session, row) for row in rows]


def get_upload(db: Database, upload_id: str, *, user_id: int) -> UploadPublic:
    """Upload `upload_id` if user `user_id` owns it.

    Raises:
        NotFoundError: no such upload, or another person's (never told apart).
    """
    with db.session() as session:
        row = session.get(Upload, upload_id)
        if row is None or row.user_id != user_id:
            raise NotFoundError(f"upload {upload_id!r} not found")
        return _with_job(session, row)


@dataclass(frozen=True)
class UploadFiles:
    """Where an upload's file lies and the source its ingestion registered (None before it ran)."""

    path: Path
    source_id: int | None


def upload_files(db: Database, upload_id: str) -> UploadFiles:
    """The stored file of upload `upload_id` and the ID of the file source that holds its document.

    Raises:
        NotFoundError: no such upload.
    """
    with db.session() as session:
        row = session.get(Upload, upload_id)
        if row is None:
            raise NotFoundError(f"upload {upload_id!r} not found")
        path = Path(row.path)
        source_id = session.scalar(select(Source.id).where(Source.uri == path.resolve().as_uri()))
        if source_id is None:  # the pipeline registers the file's source under its resolved URI
            source_id = session.scalar(
                select(Document.source_id).where(Document.id == document_id(path.resolve().as_uri()))
            )
        return UploadFiles(path=path, source_id=source_id)


def delete_upload_row(db: Database, upload_id: str) -> None:
    """Delete the row of upload `upload_id` (after its chunks, documents and file are gone)."""
    with db.session() as session:
        row = session.get(Upload, upload_id)
        if row is not None:
            session.delete(row)


# --- what admins see of uploads (issue 36): owner, audience, size, state; the name only where allowed ---


@dataclass(frozen=True)
class UploadAdminPublic:
    """An upload as an admin sees it: owner, audience, size, state and chunks; `filename` is None and
    `withheld` True unless the admin may read the upload's audience (a private upload: never)."""

    id: str
    owner: str
    audience: str
    size_bytes: int
    created_at: datetime
    job_id: int | None
    status: str
    chunks: int
    filename: str | None
    withheld: bool = False


def all_uploads(db: Database, *, visibility: Visibility, limit: int = 500) -> list[UploadAdminPublic]:
    """Everyone's uploads, newest first, with the file name only where `visibility` allows."""
    with db.session() as session:
        rows = session.execute(
            select(Upload, User.name).join(User, User.id == Upload.user_id)
            .order_by(Upload.created_at.desc(), Upload.id).limit(limit)
        ).all()
        out = []
        for upload, owner in rows:
            state = _with_job(session, upload)
            shown = visibility.may_see_upload(upload.audience, owner_id=upload.user_id)
            out.append(UploadAdminPublic(
                id=upload.id, owner=owner, audience=upload.audience, size_bytes=upload.size_bytes,
                created_at=upload.created_at, job_id=upload.job_id, status=state.status, chunks=state.chunks,
                filename=upload.filename if shown else None, withheld=not shown,
            ))
        return out
