"""Removing a source: nothing of it comes back, not even through a sync that a restart would resume."""

from __future__ import annotations

from sqlalchemy import select

from assistant.core.db.jobs import interrupt_job, queue_sync_job, unfinished_job_ids
from assistant.core.db.models import Job
from assistant.operations.sources import remove_source
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

FILE = "departments/tech-ops/process/internal-security/passwords.md"


def test_a_removed_sources_interrupted_sync_is_not_resumed(tmp_path):
    # Fresh-user trial: a source removed after a stopped sync was indexed again at the server's next
    # start, which resumes interrupted jobs.
    docs = copy_subset(HANDBOOK, tmp_path / "docs", [FILE])
    res = open_resources(make_settings(tmp_path / "var"))
    ingestor = Ingestor(res)
    try:
        assert [o.status for o in ingestor.sync(docs)] == ["done"]
        stopped = queue_sync_job(res.db, {"path": str(docs.resolve())})
        interrupt_job(res.db, stopped.id, "stopped by cli:test", totals={})
        assert stopped.id in unfinished_job_ids(res.db, ("running", "interrupted"), ("sync",))

        removed = remove_source(res, docs)
        assert removed.documents == 1
        assert stopped.id not in unfinished_job_ids(res.db, ("running", "interrupted"), ("sync",))
        with res.db.session() as session:
            job = session.get_one(Job, stopped.id)
            assert (job.status, job.reason) == ("failed", f"source {removed.path} was removed: not resumed")
            assert session.scalars(select(Job).where(Job.status == "done")).all()  # the finished sync stays done
    finally:
        ingestor.close()
        res.close()


def test_removing_an_uploads_source_removes_the_upload_from_its_owners_list(tmp_path):
    # Fresh-user trial: an upload removed with `assistant sources remove` went on listing as done in its
    # owner's uploads, with no document behind it.
    from assistant.core.db.accounts import insert_user, user_id
    from assistant.core.db.uploads import add_upload, list_uploads
    from ingest.tasks import run_sync_job

    settings = make_settings(tmp_path / "var")
    res = open_resources(settings)
    try:
        insert_user(res.db, "uploader")
        owner_id = user_id(res.db, "uploader")
        stored = settings.resolved_uploads_dir / "u-1" / "passwords.md"
        stored.parent.mkdir(parents=True)
        stored.write_bytes((HANDBOOK / FILE).read_bytes())
        upload = add_upload(res.db, upload_id="u-1", user_id=owner_id, filename="passwords.md", path=stored,
                            audience="user:uploader", size_bytes=stored.stat().st_size,
                            params={"path": str(stored), "acl": {"default": ["user:uploader"]}, "upload_id": "u-1"})
        assert run_sync_job(res, upload.job_id)["status"] == "done"
        assert [u.status for u in list_uploads(res.db, user_id=owner_id)] == ["done"]

        assert remove_source(res, stored).documents == 1
        assert list_uploads(res.db, user_id=owner_id) == [] and not stored.exists()
        assert res.store.count() == 0
    finally:
        res.close()
