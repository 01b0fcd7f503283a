"""Incremental folder sync on real files: skip, replace, delete, reuse embeddings, job rows, limits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import select

from assistant.auth.acl_manifest import AclManifest
from assistant.core import resources as resources_mod
from assistant.core.db.jobs import JobLease
from assistant.core.db.models import Document, Job, JobItem
from assistant.core.db.session import Database
from assistant.core.jobs import JobDispatcher
from assistant.core.resources import Resources
from ingest.pipeline import Ingestor, document_id
from ingest.tasks import run_sync_job, sync_all_sources
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import FORMATS, HANDBOOK

REPO = Path(__file__).resolve().parents[2]

FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/internal-security/computer-standards.md",
    "departments/tech-ops/process/application_access_request.md",
]
EML = FORMATS / "unstructured/example-docs/eml/fake-email-attachment.eml"
JOB_STATES = {"queued", "running", "done", "failed", "skipped", "needs_ocr", "encrypted", "unsupported", "too_large", "empty", "deleted"}


@contextmanager
def ingesting(tmp_path: Path, **overrides) -> Iterator[tuple[Resources, Ingestor]]:
    """Resources and an ingestor on a scratch data folder (settings `overrides` applied), closed after."""
    res = open_resources(make_settings(tmp_path / "var", **overrides))
    ingestor = Ingestor(res)
    try:
        yield res, ingestor
    finally:
        ingestor.close()
        res.close()


@pytest.fixture
def synced(tmp_path):
    """A scratch folder of three handbook pages, synced once; yields (folder, resources, ingestor, outcomes)."""
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES)
    with ingesting(tmp_path) as (res, ingestor):
        yield folder, res, ingestor, ingestor.sync(folder)


def _ids(res, uri: str) -> set[str]:
    return res.store.scroll_ids(doc_id=document_id(uri))


def _items(res, job_id: int) -> dict[str, JobItem]:
    with res.db.session() as session:
        return {i.path: i for i in session.scalars(select(JobItem).where(JobItem.job_id == job_id))}


def _last_job(res) -> Job:
    with res.db.session() as session:
        return session.scalars(select(Job).order_by(Job.id.desc())).first()


def test_unchanged_files_are_skipped_and_the_job_rows_say_so(synced):
    folder, res, ingestor, first = synced
    assert [o.status for o in first] == ["done"] * 3
    job = _last_job(res)
    items = _items(res, job.id)
    assert job.status == "done" and job.attempts == 1 and job.totals["done"] == 3
    assert job.totals["chunks"] == sum(o.chunks for o in first) == res.store.count()
    assert {"parse_s", "embed_s", "store_s"} <= set(job.totals)
    assert sorted(items) == sorted(FILES)
    for o in first:
        item = items[o.source]
        assert (item.status, item.chunks, item.document_id) == ("done", o.chunks, document_id(o.uri))
        assert item.duration_s > 0 and item.status in JOB_STATES

    ids_before = {o.uri: _ids(res, o.uri) for o in first}
    second = ingestor.sync(folder)
    assert [(o.status, o.reason) for o in second] == [("skipped", "unchanged")] * 3
    assert {o.uri: _ids(res, o.uri) for o in second} == ids_before
    assert {i.status for i in _items(res, _last_job(res).id).values()} == {"skipped"}

    # A file that failed for a reason outside it (LibreOffice missing) is tried again, not skipped.
    legacy = folder.parent / "legacy"
    legacy.mkdir()
    shutil.copy(FORMATS / "unstructured/example-docs/simple.doc", legacy)
    first_status = "done" if shutil.which("soffice") or shutil.which("libreoffice") else "unsupported"
    assert [o.status for o in ingestor.sync(legacy)] == [first_status]
    assert [o.status for o in ingestor.sync(legacy)] == ["skipped" if first_status == "done" else "unsupported"]


def test_changed_file_replaces_its_chunks(synced):
    folder, res, ingestor, first = synced
    target = next(o for o in first if o.source == FILES[0])
    old_ids = _ids(res, target.uri)
    path = folder / FILES[0]
    path.write_text(path.read_text() + "\n\n## Rotation\n\nRotate the zebra-quartz passphrase every 90 days.\n")
    outcomes = {o.source: o for o in ingestor.sync(folder)}
    changed = outcomes[FILES[0]]
    assert changed.status == "done" and {outcomes[f].status for f in FILES[1:]} == {"skipped"}
    new_ids = _ids(res, target.uri)
    assert len(new_ids) == changed.chunks and new_ids != old_ids
    # Unchanged passages kept their embeddings; only the edited tail went through the model.
    assert 0 < changed.reused < changed.chunks
    texts = [h.payload["text"] for h in res.store.query(
        dense=res.embedder.embed_query("zebra-quartz passphrase rotation"), sparse=None, acl_any=["everyone"],
        mode="dense", limit=3)]
    assert any("zebra-quartz" in t for t in texts)
    assert res.store.count() == sum(o.chunks for o in outcomes.values())


def test_deleted_file_loses_its_chunks(synced):
    folder, res, ingestor, first = synced
    gone = next(o for o in first if o.source == FILES[1])
    (folder / FILES[1]).unlink()
    outcomes = {o.source: o for o in ingestor.sync(folder)}
    assert (outcomes[FILES[1]].status, outcomes[FILES[1]].reason) == ("deleted", "removed at the source")
    assert _ids(res, gone.uri) == set()
    assert res.store.count() == sum(o.chunks for o in first if o.source != FILES[1])
    assert _items(res, _last_job(res).id)[FILES[1]].status == "deleted"


def test_identical_content_at_two_paths_is_embedded_once_and_found_under_both(synced):
    folder, res, ingestor, first = synced
    original = next(o for o in first if o.source == FILES[2])
    copy = folder / "elsewhere" / "access-request-copy.md"
    copy.parent.mkdir()
    shutil.copy2(folder / FILES[2], copy)
    outcomes = {o.source: o for o in ingestor.sync(folder)}
    dup = outcomes["elsewhere/access-request-copy.md"]
    assert dup.status == "done" and dup.chunks == original.chunks
    assert dup.reused == dup.chunks, "the copy went through the embedding model again"
    assert _ids(res, dup.uri).isdisjoint(_ids(res, original.uri))
    query = res.embedder.embed_query("how do I request access to an application")
    hits = res.store.query(dense=query, sparse=None, acl_any=["everyone"], mode="dense", limit=10)
    sources = {h.payload["source"] for h in hits}
    assert {FILES[2], "elsewhere/access-request-copy.md"} <= sources


def test_identical_files_in_one_batch_share_one_embedding(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES[2:])
    shutil.copy2(folder / FILES[2], folder / "twin.md")
    with ingesting(tmp_path) as (res, ingestor):
        outcomes = {o.source: o for o in ingestor.sync(folder)}
    first, twin = outcomes[FILES[2]], outcomes["twin.md"]
    assert first.status == twin.status == "done"
    # Whichever was batched second reused every vector of the other.
    assert sorted([first.reused, twin.reused]) == [0, first.chunks]


def test_hung_parser_is_killed_and_the_batch_goes_on(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES[:1])
    # Real text, enough of it that parsing and chunking it takes far longer than the limit.
    pages = [p.read_text() for p in sorted(HANDBOOK.rglob("*.md"))]
    with (folder / "huge.md").open("w") as out:
        while out.tell() < 12 * 1024 * 1024:
            out.write("\n\n".join(pages))
    with ingesting(tmp_path, parse_timeout_s=4) as (res, ingestor):
        outcomes = {o.source: o for o in ingestor.sync(folder)}
        items = _items(res, _last_job(res).id)
    assert (outcomes["huge.md"].status, outcomes["huge.md"].reason) == ("failed", "huge.md: parse timed out after 4 s")
    assert (items["huge.md"].status, items["huge.md"].reason) == ("failed", "huge.md: parse timed out after 4 s")
    assert outcomes[FILES[0]].status == "done" and outcomes[FILES[0]].chunks > 0


def test_parser_over_its_memory_limit_fails_alone(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES[:1])
    (folder / "big.txt").write_text("word " * (40 * 1024 * 1024 // 5))
    with ingesting(tmp_path, parse_memory_limit_bytes=64 * 1024**2, parse_timeout_s=300) as (res, ingestor):
        outcomes = {o.source: o for o in ingestor.sync(folder)}
    big = outcomes["big.txt"]
    assert big.status == "failed"
    assert "memory limit of 67,108,864 bytes" in big.reason or "parser process" in big.reason, big.reason
    assert outcomes[FILES[0]].status == "done", outcomes[FILES[0]].reason


def test_email_attachments_become_documents_of_their_own(tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    shutil.copy2(EML, folder / "note.eml")
    with ingesting(tmp_path) as (res, ingestor):
        outcomes = {o.source: o for o in ingestor.sync(folder)}
        assert outcomes["note.eml"].status == "done"
        attachment = outcomes["note.eml#fake-attachment.txt"]
        assert attachment.status == "done" and attachment.chunks >= 1
        assert attachment.uri == (folder / "note.eml").resolve().as_uri() + "#fake-attachment.txt"
        hits = res.store.query(dense=res.embedder.embed_query("attachment"), sparse=None, acl_any=["everyone"],
                               mode="dense", doc_ids=[document_id(attachment.uri)], limit=5)
        assert hits and hits[0].payload["source"] == "note.eml#fake-attachment.txt"
        assert {o.status for o in ingestor.sync(folder)} == {"skipped"}  # the carrier and its attachment stay
        assert res.store.count(doc_id=document_id(attachment.uri)) == attachment.chunks
        (folder / "note.eml").unlink()
        gone = {o.source: o.status for o in ingestor.sync(folder)}
        assert gone == {"note.eml": "deleted", "note.eml#fake-attachment.txt": "deleted"}
        assert res.store.count() == 0


def test_a_message_without_text_still_yields_its_attachments(tmp_path):
    from email.message import EmailMessage

    folder = tmp_path / "mail"
    folder.mkdir()
    message = EmailMessage()  # no headers, an empty body: only the attachment carries text
    message.set_content("")
    message.add_attachment(b"The Q3 revenue grew by twelve percent.\n", maintype="text", subtype="plain", filename="q3.txt")
    (folder / "bare.eml").write_bytes(bytes(message))
    with ingesting(tmp_path) as (res, ingestor):
        outcomes = {o.source: o for o in ingestor.sync(folder)}
        assert outcomes["bare.eml"].status == "empty" and "1 attachment" in outcomes["bare.eml"].reason
        assert outcomes["bare.eml#q3.txt"].status == "done" and outcomes["bare.eml#q3.txt"].chunks == 1
        assert {o.status for o in ingestor.sync(folder)} == {"skipped"}


def test_a_file_name_that_is_not_utf8_is_ingested_under_an_escaped_name(tmp_path):
    folder = tmp_path / "names"
    folder.mkdir()
    with open(bytes(folder) + b"/bad\xffname.md", "w") as handle:
        handle.write("# Parking\n\nThe parking garage opens at seven.\n")
    (folder / "good.md").write_text("# Cafeteria\n\nThe cafeteria opens at eight.\n")
    with ingesting(tmp_path) as (res, ingestor):
        outcomes = {o.source: o.status for o in ingestor.sync(folder)}
        assert outcomes == {"bad\\xffname.md": "done", "good.md": "done"}
        assert {o.status for o in ingestor.sync(folder)} == {"skipped"}
        with res.db.session() as session:
            assert session.scalars(select(Job.status)).all() == ["done", "done"]


def test_a_folder_holding_the_data_folder_and_the_model_cache_indexes_neither(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cafeteria.md").write_text("# Cafeteria\n\nThe cafeteria opens at eight.\n")
    cache = tmp_path / "model-cache"
    cache.mkdir()
    (cache / "notes.md").write_text("# Converted models\n\nThe converted models are kept here.\n")
    # The ignore file cannot bring them back.
    (tmp_path / ".assistantignore").write_text("!var/\n!var/**\n!model-cache/**\n")
    with ingesting(tmp_path, model_cache_dir=cache) as (res, ingestor):
        (res.settings.storage.data_dir / "notes.md").write_text("# Data folder\n\nThe database lives here.\n")
        assert (res.settings.storage.data_dir / "assistant.db").is_file()
        outcomes = ingestor.sync(tmp_path)
        assert {o.source: o.status for o in outcomes} == {"docs/cafeteria.md": "done"}
        with res.db.session() as session:
            assert [Path(p).name for p in session.scalars(select(Document.path)).all()] == ["cafeteria.md"]


def test_periodic_sync_of_every_source_makes_one_job_per_source(synced):
    folder, res, ingestor, first = synced
    resources_mod.set_current(res)  # the task functions use the process's resources
    try:
        job_ids = sync_all_sources(res, submit=lambda job_id: run_sync_job(res, job_id))
        assert len(job_ids) == 1
        assert run_sync_job(res, job_ids[0]) == {"job_id": job_ids[0], "status": "done"}  # a redelivery: no-op
    finally:
        resources_mod.set_current(None)
    with res.db.session() as session:
        job = session.get(Job, job_ids[0])
        assert (job.status, job.params["path"], job.totals["skipped"]) == ("done", str(folder.resolve()), 3)


def test_unfinished_job_is_resumed_on_start(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES[:2])
    settings = make_settings(tmp_path / "var")
    res = open_resources(settings)
    resources_mod.set_current(res)
    try:
        with res.db.session() as session:  # as a process that stopped mid-job would leave it
            job = Job(kind="sync", status="running", params={"path": str(folder)}, attempts=1)
            session.add(job)
            session.flush()
            job_id = job.id
        dispatcher = JobDispatcher(settings)
        assert dispatcher.resume_unfinished(res.db) == [job_id]
        assert dispatcher.join(600)
        with res.db.session() as session:
            job = session.get(Job, job_id)
            assert (job.status, job.attempts, job.totals["done"]) == ("done", 2, 2)
        assert dispatcher.resume_unfinished(res.db) == []
    finally:
        resources_mod.set_current(None)
        res.close()


def test_a_stale_job_is_not_replayed_over_a_newer_sync_of_its_source(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES[:2])
    settings = make_settings(tmp_path / "var")
    res = open_resources(settings)
    resources_mod.set_current(res)
    try:
        open_manifest = {"default": ["everyone"]}
        with res.db.session() as session:  # a sync that carried an open manifest, cut off mid-run
            stale = Job(kind="sync", status="running", params={"path": str(folder), "acl": open_manifest}, attempts=1)
            session.add(stale)
            session.flush()
            stale_id = stale.id
        strict = AclManifest.from_dict({"default": ["group:hr"]})
        ingestor = Ingestor(res)
        assert {o.status for o in ingestor.sync(folder, acl=strict)} == {"done"}  # the admin's newer sync
        ingestor.close()
        dispatcher = JobDispatcher(settings)
        assert dispatcher.resume_unfinished(res.db) == [stale_id]
        assert dispatcher.join(600)
        with res.db.session() as session:
            job = session.get(Job, stale_id)
            assert job.status == "failed" and "superseded by job" in job.reason
            assert all(doc.acl == ["group:hr"] for doc in session.scalars(select(Document)))
    finally:
        resources_mod.set_current(None)
        res.close()


HOLD_LEASE = """
import sys, time
from assistant.core.db.session import Database
from assistant.core.db.jobs import JobLease
lease = JobLease(Database(sys.argv[1]), int(sys.argv[2])).__enter__()
print("held" if lease.acquired else "busy", flush=True)
time.sleep(600)
"""


@pytest.mark.postgres
def test_a_leased_job_is_not_resumed_and_a_killed_holder_frees_it(tmp_path, pg_url):
    db = Database(pg_url)
    db.migrate()
    holder = None
    try:
        with db.session() as session:
            job = Job(kind="sync", status="running", params={"path": str(tmp_path)}, attempts=5)
            session.add(job)
            session.flush()
            job_id = job.id
        settings = make_settings(tmp_path / "var", database_url=pg_url, jobs_backend="celery", vector_store="qdrant",
                                 qdrant_path=tmp_path / "q", job_max_attempts=5)
        # Another process (a worker) holds the job's lease.
        holder = subprocess.Popen([sys.executable, "-c", HOLD_LEASE, pg_url, str(job_id)], cwd=REPO,
                                  env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        with JobLease(db, job_id) as lease:
            assert not lease.acquired
        assert JobDispatcher(settings).resume_unfinished(db) == []
        with db.session() as session:
            assert session.get(Job, job_id).status == "running"  # left alone: its worker is alive
        holder.kill()
        holder.wait()
        # Free again, but it already ran job_max_attempts times: failed with the reason, not resumed.
        deadline = time.monotonic() + 30
        status = "running"
        while status == "running" and time.monotonic() < deadline:
            assert JobDispatcher(settings).resume_unfinished(db) == []
            with db.session() as session:
                job = session.get(Job, job_id)
                status, reason = job.status, job.reason
            time.sleep(0.2)
        assert status == "failed" and "after 5 attempts" in reason
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait()
        db.dispose()


def test_a_queued_sync_asked_to_stop_does_not_run_until_the_server_starts_again(tmp_path):
    from assistant.core.db.jobs import queue_sync_job
    from assistant.core.errors import ConflictError
    from assistant.operations.store import request_stop

    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES[:2])
    settings = make_settings(tmp_path / "var")
    res = open_resources(settings)
    resources_mod.set_current(res)
    try:
        job_id = queue_sync_job(res.db, {"path": str(folder)}).id
        stopped = request_stop(res.db, job_id, by="cli:someone")  # before its worker took it
        assert (stopped.status, stopped.reason) == ("interrupted", "stopped by cli:someone before it started")
        assert run_sync_job(res, job_id) == {"job_id": job_id, "status": "stopped"}  # its message comes: not run
        with pytest.raises(ConflictError) as refused:
            request_stop(res.db, job_id, by="cli:someone")
        assert refused.value.code == "job_not_running"
        dispatcher = JobDispatcher(settings)  # the next start resumes it, and it runs to its end
        assert dispatcher.resume_unfinished(res.db) == [job_id]
        assert dispatcher.join(600)
        with res.db.session() as session:
            job = session.get(Job, job_id)
            assert (job.status, job.totals["done"]) == ("done", 2), job.reason
    finally:
        resources_mod.set_current(None)
        res.close()


def test_a_stop_leaves_files_parsed_but_not_yet_embedding_for_the_resumed_run(tmp_path):
    # Fresh-user trial (issue 41): parsing runs up to an embedding batch ahead of the embedder, so a stop
    # asked after 11 files were done finished 54 more. Here every file fits in one batch and the stop
    # comes once two files are started: none of them had reached the embedder, so none is finished.
    from ingest.pipeline import SyncInterrupted

    class StopAfter:  # the `stop` a sync reads once per file started
        def __init__(self, files: int):
            self.files = files

        def is_set(self) -> bool:
            self.files -= 1
            return self.files < 0

    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES)
    with ingesting(tmp_path, embedding_batch_chunks=100_000) as (res, ingestor):
        with pytest.raises(SyncInterrupted):
            ingestor.sync(folder, stop=StopAfter(2))
        with res.db.session() as session:
            assert session.scalars(select(Document.status)).all().count("done") == 0
        job = _last_job(res)
        assert job.status == "interrupted" and job.reason.startswith("interrupted after 0 of 3 files"), job.reason
        assert {o.status for o in ingestor.sync(folder)} == {"done"}  # the next run indexes all three


def test_a_stop_cancels_the_embedding_of_files_already_gathered(tmp_path):
    # Fresh-user trial (issue 41): small files are all parsed and gathered into one embedding batch
    # (512 chunks) long before they are embedded, so a stop read only when a file starts came too late:
    # an admin's Stop at 0 files done let all 150 finish. Now the batch's slices not yet embedded are
    # cancelled, and their files stay for the resumed run.
    import threading

    from ingest.pipeline import SyncInterrupted

    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES)
    stop = threading.Event()
    with ingesting(tmp_path, embedding_batch_chunks=100_000, embedding_slice_chunks=1) as (res, ingestor):
        # On a fast machine the embedding thread could finish every slice before the first file is
        # written (CI: no stop took). Each slice after the first waits (up to 2 s) for the stop, so the
        # thread is at most one slice ahead of the writes when the first file is done: the slices
        # after it are not started yet, whatever the machine's speed. The model still embeds them all.
        embed, calls = ingestor.embedder.embed_passages, []

        def paced(texts):
            calls.append(len(texts))
            if len(calls) > 1:
                stop.wait(2)
            return embed(texts)

        ingestor.embedder.embed_passages = paced
        with pytest.raises(SyncInterrupted):
            ingestor.sync(folder, stop=stop, on_file=lambda outcome: stop.set())  # stop once one file is done
        with res.db.session() as session:
            done = session.scalars(select(Document.status)).all().count("done")
        assert 1 <= done < len(FILES)
        job = _last_job(res)
        assert job.status == "interrupted" and job.reason.startswith(f"interrupted after {done} of {len(FILES)} files")
        assert {o.status for o in ingestor.sync(folder)} <= {"done", "skipped"}  # the next run indexes the rest
        with res.db.session() as session:
            assert session.scalars(select(Document.status)).all().count("done") == len(FILES)
