"""What the admins' sources page shows of each source: its documents and chunks, when it was last
synced, its latest job and the files of that job that did not make it into the index, with why. An
upload's source names its owner and audience; its path (the file's name) only where the viewer may
read the upload (`assistant.core.visibility`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sqlalchemy import select

from assistant.core.db.models import Job, JobItem, Source
from assistant.core.db.session import Database
from assistant.core.db.sources import SourceRow, source_summaries
from assistant.core.db.uploads import upload_owners
from assistant.core.visibility import Visibility

# Outcomes of a file that leave nothing to fix.
_FINE = ("done", "skipped", "deleted", "queued", "running")


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
    """Every source, by path, with its latest job and up to `max_errors` of that job's file errors.

    Args:
        visibility: the viewer's rule; None: every path shown (for the server's own use, never a view).
    """
    rows = source_summaries(db)
    uploads = {o.uri: o for o in upload_owners(db).values()}
    out = []
    with db.session() as session:
        uris = dict(session.execute(select(Source.id, Source.uri)).all())
        for row in rows:
            job = session.scalar(select(Job).where(Job.source_id == row.id).order_by(Job.id.desc()).limit(1))
            errors = []
            if job is not None:
                items = session.scalars(
                    select(JobItem).where(JobItem.job_id == job.id, JobItem.status.not_in(_FINE))
                    .order_by(JobItem.id).limit(max_errors)
                )
                errors = [FileErrorPublic(path=i.path, status=i.status, reason=i.reason) for i in items]
            upload = uploads.get(uris.get(row.id, ""))
            shown = upload is None or visibility is None or visibility.may_see_upload(upload.audience, owner_id=upload.user_id)
            values = asdict(row)
            if not shown:
                values["path"] = None
                errors = [FileErrorPublic(path=None, status=e.status, reason=None) for e in errors]
            out.append(SourceStatusPublic(
                **values, last_job_id=job.id if job else None, last_job_status=job.status if job else None,
                errors=errors, upload_owner=upload.owner if upload else None,
                audience=upload.audience if upload else None, withheld=not shown,
            ))
    return out
