"""What the admins' sources page shows of each source: its documents and chunks, when it was last
synced, its latest job and the files of that job that did not make it into the index, with why."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sqlalchemy import select

from assistant.core.db.models import Job, JobItem
from assistant.core.db.session import Database
from assistant.core.db.sources import SourceRow, source_summaries

# Outcomes of a file that leave nothing to fix.
_FINE = ("done", "skipped", "deleted", "queued", "running")


@dataclass(frozen=True)
class FileErrorPublic:
    """A file of a source's latest job that was not indexed: its path in the source, status and reason."""

    path: str
    status: str
    reason: str


@dataclass(frozen=True)
class SourceStatusPublic(SourceRow):
    """A source as listed to admins (`SourceRow`: kind, path on the server, live documents and chunks,
    last finished sync), with its latest job's ID and status and that job's file errors."""

    last_job_id: int | None = None
    last_job_status: str | None = None
    errors: list[FileErrorPublic] = field(default_factory=list)


def source_statuses(db: Database, *, max_errors: int = 50) -> list[SourceStatusPublic]:
    """Every source, by path, with its latest job and up to `max_errors` of that job's file errors."""
    rows = source_summaries(db)
    out = []
    with db.session() as session:
        for row in rows:
            job = session.scalar(select(Job).where(Job.source_id == row.id).order_by(Job.id.desc()).limit(1))
            errors = []
            if job is not None:
                items = session.scalars(
                    select(JobItem).where(JobItem.job_id == job.id, JobItem.status.not_in(_FINE))
                    .order_by(JobItem.id).limit(max_errors)
                )
                errors = [FileErrorPublic(path=i.path, status=i.status, reason=i.reason) for i in items]
            out.append(SourceStatusPublic(
                **asdict(row), last_job_id=job.id if job else None, last_job_status=job.status if job else None,
                errors=errors,
            ))
    return out
