"""Deterministic chunk IDs: ingesting the same folder twice changes nothing; metadata also on PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from assistant.core.db.models import Document, Job
from ingest.pipeline import Ingestor
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/internal-security/computer-standards.md",
    "departments/tech-ops/process/application_access_request.md",
]


def _all_ids(res, outcomes):
    from ingest.pipeline import document_id

    ids = set()
    for o in outcomes:
        ids |= res.store.scroll_ids(doc_id=document_id(o.uri))
    return ids


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_second_ingest_changes_nothing(tmp_path, backend, request):
    overrides = {}
    if backend == "postgres":
        overrides["database_url"] = request.getfixturevalue("pg_url")
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES)
    res = open_resources(make_settings(tmp_path / "var", **overrides))
    try:
        ingestor = Ingestor(res)
        first = ingestor.sync(folder)
        assert [o.status for o in first] == ["done"] * 3
        ids_before = _all_ids(res, first)
        count_before = res.store.count()
        assert count_before == len(ids_before) == sum(o.chunks for o in first) > 3

        second = ingestor.sync(folder)
        assert [o.status for o in second] == ["skipped"] * 3
        assert _all_ids(res, second) == ids_before
        assert res.store.count() == count_before

        with res.db.session() as session:
            assert session.scalar(select(func.count()).select_from(Document)) == 3
            jobs = session.scalars(select(Job).order_by(Job.id)).all()
            assert [j.status for j in jobs] == ["done", "done"]
            assert jobs[1].totals.get("skipped") == 3
    finally:
        res.close()


def test_changed_file_replaces_its_chunks_and_deleted_file_loses_them(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES)
    res = open_resources(make_settings(tmp_path / "var"))
    try:
        ingestor = Ingestor(res)
        ingestor.sync(folder)
        target = folder / FILES[0]
        target.write_text(target.read_text() + "\n\n## Rotation\n\nRotate the zebra-quartz passphrase every 90 days.\n")
        (folder / FILES[1]).unlink()
        outcomes = {o.source: o for o in ingestor.sync(folder)}
        assert outcomes[FILES[0]].status == "done"
        assert outcomes[FILES[1]].status == "deleted"
        assert outcomes[FILES[2]].status == "skipped"
        assert res.store.count() == outcomes[FILES[0]].chunks + outcomes[FILES[2]].chunks
    finally:
        res.close()
