"""Celery tasks for ingestion: thin wrappers that take IDs and call the pipeline."""

from __future__ import annotations

from pathlib import Path

from assistant.core import resources
from assistant.core.db.models import Job
from assistant.core.jobs import get_celery
from ingest.acl import AclManifest
from ingest.pipeline import Ingestor

celery = get_celery()


@celery.task(name="ingest.sync_source", acks_late=True, reject_on_worker_lost=True)
def sync_source(job_id: int) -> dict:
    """Run the sync job `job_id` (its row holds the path and optional ACL manifest)."""
    res = resources.current()
    with res.db.session() as session:
        job = session.get(Job, job_id)
        params = dict(job.params)
    manifest = AclManifest.from_dict(params["acl"]) if params.get("acl") else None
    outcomes = Ingestor(res).sync(Path(params["path"]), acl=manifest, job_id=job_id)
    return {"files": len(outcomes)}
