"""A Celery worker SIGKILLed mid-sync: after a restart the job finishes and the collection holds
exactly the points of a clean sync, none lost and none duplicated."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select

from assistant.core.db.models import Job, JobItem
from assistant.core.db.session import Database
from assistant.core.jobs import make_celery
from assistant.core.vectorstore.server import QdrantServerStore
from ingest.pipeline import Ingestor, document_id
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

REPO = Path(__file__).resolve().parents[2]
N_FILES = 30  # about 500 chunks: long enough to kill mid-way, short enough for a 2-core box
BROKER = "redis://127.0.0.1:6379/0"
pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _worker_env(tmp: Path, pg_url: str, queue: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    env.update(
        PYTHONPATH=str(REPO),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        ASSISTANT_DATA_DIR=str(tmp / "var"),
        ASSISTANT_DATABASE_URL=pg_url,
        ASSISTANT_VECTOR_STORE="qdrant",
        ASSISTANT_QDRANT_PATH=str(tmp / "qdrant"),  # local mode: only the worker ever opens it
        ASSISTANT_JOBS_BACKEND="celery",
        ASSISTANT_BROKER_URL=BROKER,
        ASSISTANT_CELERY_QUEUE=queue,
        ASSISTANT_SYNC_INTERVAL_S="0",
        ASSISTANT_EMBEDDING_BATCH_CHUNKS="64",  # small batches: files finish one by one before the kill
    )
    return env


def _start_worker(env: dict[str, str], queue: str, log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "celery", "-A", "ingest.tasks:celery", "worker", "--pool=prefork",
        "--concurrency=1", "-Q", queue, "-n", f"{queue}@%h", "--loglevel=INFO",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]
    # Its own process group, so that the kill takes the pool child too, as a machine crash would.
    return subprocess.Popen(cmd, env=env, cwd=log.parent, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for(predicate, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


def _job(db: Database, job_id: int) -> tuple[str, int, int]:
    with db.session() as session:
        job = session.get(Job, job_id)
        done = session.scalar(
            select(func.count()).select_from(JobItem).where(JobItem.job_id == job_id, JobItem.status == "done")
        )
        return job.status, job.attempts, done


def test_sigkilled_worker_resumes_and_converges(tmp_path, pg_url):
    files = sorted(p.relative_to(HANDBOOK).as_posix() for p in HANDBOOK.rglob("*.md"))[:N_FILES]
    folder = copy_subset(HANDBOOK, tmp_path / "docs", files)
    queue = f"test-kill-{uuid.uuid4().hex[:10]}"
    env = _worker_env(tmp_path, pg_url, queue)
    log = tmp_path / "worker.log"
    db = Database(pg_url)
    db.migrate()
    with db.session() as session:
        job = Job(kind="sync", params={"path": str(folder)})
        session.add(job)
        session.flush()
        job_id = job.id
    app = make_celery(make_settings(tmp_path / "client", broker_url=BROKER, celery_queue=queue))
    workers: list[subprocess.Popen] = []
    try:
        workers.append(_start_worker(env, queue, log))
        app.send_task("ingest.sync_source", kwargs={"job_id": job_id}, queue=queue)
        _wait_for(lambda: _job(db, job_id)[2] >= 3, 300, "3 files done before the kill", log)
        os.killpg(workers[0].pid, signal.SIGKILL)
        workers[0].wait()
        status, attempts, done_at_kill = _job(db, job_id)
        assert status == "running" and done_at_kill < N_FILES, "the sync finished before the kill: nothing tested"

        workers.append(_start_worker(env, queue, log))  # its start-up resumes the orphaned job
        _wait_for(lambda: _job(db, job_id)[0] == "done", 400, "the resumed job to finish", log)
        status, attempts, done = _job(db, job_id)
        assert attempts == 2
        workers[1].send_signal(signal.SIGTERM)  # warm shutdown releases the Qdrant folder
        workers[1].wait(timeout=60)
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        redis.Redis.from_url(BROKER).delete(queue)
        db.dispose()

    # What the worker left in the collection, read once it is the only thing holding the folder.
    store = QdrantServerStore("chunks", path=tmp_path / "qdrant")
    try:
        points, offset = [], None
        while True:
            batch, offset = store.client.scroll("chunks", limit=1024, offset=offset, with_payload=["doc_id", "chunk_index"])
            points.extend(batch)
            if offset is None:
                break
    finally:
        store.close()
    got = [str(p.id) for p in points]
    places = [(p.payload["doc_id"], p.payload["chunk_index"]) for p in points]

    # A clean sync of the same folder (same URIs, so same IDs), reusing the worker's embeddings.
    clean = tmp_path / "clean" / "var"
    clean.mkdir(parents=True)
    for name in ("embedding-cache.sqlite", "embedding-cache.sqlite-wal"):
        if (tmp_path / "var" / name).exists():
            shutil.copy2(tmp_path / "var" / name, clean / name)
    res = open_resources(make_settings(clean))
    try:
        ingestor = Ingestor(res)
        outcomes = ingestor.sync(folder)
        ingestor.close()
        assert {o.status for o in outcomes} == {"done"}
        expected = set()
        for o in outcomes:
            expected |= res.store.scroll_ids(doc_id=document_id(o.uri))
    finally:
        res.close()

    assert len(got) == len(set(got)), "a point ID appears twice"
    assert len(places) == len(set(places)), "two points hold the same chunk of one document"
    assert set(got) - expected == set(), "stale points survived the crash"
    assert expected - set(got) == set(), "points were lost"
    assert len(got) == sum(o.chunks for o in outcomes) > N_FILES
