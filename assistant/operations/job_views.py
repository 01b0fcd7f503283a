"""Ingestion jobs as an admin may see them. Admins manage sources but read through the same ACLs as
everyone: a job item names a file (and its failure reason often quotes it), so an item's path and
reason are shown only where the file's ACL admits the viewer, and an upload's job names its file
only where the viewer may see the upload (`assistant.core.visibility`)."""

from __future__ import annotations

from dataclasses import replace

from assistant.core.db.jobs import JobItemRecord, JobRecord
from assistant.core.db.session import Database
from assistant.core.visibility import Visibility
from assistant.operations.store import upload_owners


def item_seen_by(item: JobItemRecord, visibility: Visibility) -> JobItemRecord:
    """`item` with its path, reason and ACL None where `visibility`'s viewer may not see the file."""
    return item if visibility.may_see_file(item.acl) else _hidden(item)


def _hidden(item: JobItemRecord) -> JobItemRecord:
    return JobItemRecord(path=None, status=item.status, reason=None, chunks=item.chunks, duration_s=item.duration_s)


def jobs_seen_by(db: Database, jobs: list[JobRecord], *, visibility: Visibility) -> list[JobRecord]:
    """`jobs` as `visibility`'s viewer may see them.

    An upload's job (its params name the upload) whose file the viewer may not see keeps its status,
    counts and times, with the server path, the failure reason and its items' paths and reasons None
    (`withheld: true`). In any other job, each item is shown through `item_seen_by`: a folder sync
    lists the files of a restricted subfolder without their names to an admin outside its ACL.
    """
    owners = upload_owners(db) if any("upload_id" in job.params for job in jobs) else {}
    out = []
    for job in jobs:
        if "upload_id" in job.params:
            owner = owners.get(str(job.params["upload_id"]))
            if owner is None or not visibility.may_see_upload(owner.audience, owner_id=owner.user_id):
                items = None if job.items is None else [_hidden(i) for i in job.items]
                params = {k: v for k, v in job.params.items() if k != "path"} | {"path": None}
                out.append(replace(job, params=params, reason=None, items=items, withheld=True))
                continue
        items = None if job.items is None else [item_seen_by(i, visibility) for i in job.items]
        out.append(replace(job, items=items))
    return out
