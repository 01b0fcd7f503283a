"""`assistant ingest` while `assistant serve` holds the embedded store: the command hands the sync to
the running server, shows its progress bar on a pseudo-terminal, and the server keeps answering."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from assistant.api.routes.local_ingest import TOKEN_HEADER
from assistant.auth.signing import local_ingest_token
from assistant.core.principals import ANONYMOUS
from ingest.pipeline import Ingestor
from tests.api.live_server import LiveServer
from tests.conftest import CORPUS_MODEL, copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

REPO = Path(__file__).resolve().parents[2]
SECOND = [
    "departments/tech-ops/process/internal-security/computer-standards.md",
    "departments/tech-ops/process/application_access_request.md",
]


def _run_on_pty(argv: list[str], env: dict, server_url: str, timeout_s: float = 300.0) -> tuple[int, str, int]:
    """Run `argv` with a pseudo-terminal as its stdout and stderr, asking the server's /healthz twice a
    second meanwhile; returns (exit status, everything it printed, health answers that were 200)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO)
    os.close(slave)
    output, healthy = b"", 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    data = b""
                if not data and proc.poll() is not None:
                    break
                output += data
            elif proc.poll() is not None:
                break
            healthy += httpx.get(f"{server_url}/healthz", timeout=5.0).status_code == 200
        code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, output.decode("utf-8", "replace"), healthy


def test_ingest_while_serving_runs_through_the_server(tmp_path: Path):
    second = copy_subset(HANDBOOK, tmp_path / "second", SECOND)
    settings = make_settings(tmp_path / "var", embedding_model=CORPUS_MODEL)
    res = open_resources(settings)  # the server's: it holds the store, as `assistant serve` does
    server = LiveServer(settings, res).start()
    try:
        env = {
            **os.environ, "PYTHONPATH": str(REPO), "ASSISTANT_DATA_DIR": str(tmp_path / "var"),
            "ASSISTANT_PORT": str(server.port), "ASSISTANT_EMBEDDING_MODEL": CORPUS_MODEL,
            "TERM": "xterm-256color", "COLUMNS": "160",
        }
        code, text, healthy = _run_on_pty([sys.executable, "-m", "assistant.cli.main", "ingest", str(second)], env, server.url)
        assert code == 0, text[-3000:]
        assert "the sync runs in the server" in text, text[-3000:]
        assert "━" in text and "files" in text and "chunks/s" in text, text[-3000:]  # Rich's bar
        assert "done" in text and "store_locked" not in text
        assert healthy > 0  # the server answered while the sync ran in it
        hits = server.app.state.assistant.retriever.retrieve("computer standards for laptops", principal=ANONYMOUS, top_k=5)
        assert any(h.source.endswith("computer-standards.md") for h in hits), [h.source for h in hits]
        # A remote caller without the local token is refused.
        refused = httpx.post(f"{server.url}/api/local/ingest", json={"path": str(second)}, timeout=10.0)
        assert refused.status_code == 401
    finally:
        server.stop()
        res.close()


def test_a_second_ingest_says_which_sync_it_waits_for(tmp_path: Path, pg_url: str):
    """While the server runs one sync, `assistant ingest` of another folder is queued behind it: the
    command says so at once, naming the job and its folder, instead of waiting silently (fresh-user
    trial). The running sync is held at its last write by a PostgreSQL row lock on its source."""
    first = copy_subset(HANDBOOK, tmp_path / "first", SECOND[:1])
    second = copy_subset(HANDBOOK, tmp_path / "second", SECOND[1:])
    settings = make_settings(tmp_path / "var", embedding_model=CORPUS_MODEL, database_url=pg_url)
    res = open_resources(settings)
    ingestor = Ingestor(res)
    try:
        ingestor.sync(first)  # the source exists; its next sync skips the file and ends by stamping the source
    finally:
        ingestor.close()
    server = LiveServer(settings, res).start()
    engine = create_engine(pg_url)
    lock = engine.connect()
    proc = None
    try:
        lock.execute(text("SELECT id FROM sources WHERE uri = :uri FOR NO KEY UPDATE"), {"uri": first.resolve().as_uri()})
        headers = {TOKEN_HEADER: local_ingest_token(settings)}
        running = httpx.post(f"{server.url}/api/local/ingest", json={"path": str(first)}, headers=headers, timeout=10.0)
        job_id = running.json()["id"]
        deadline = time.monotonic() + 60
        while httpx.get(f"{server.url}/api/local/jobs/{job_id}", headers=headers, timeout=10.0).json()["status"] != "running":
            assert time.monotonic() < deadline, "the first sync did not start"
            time.sleep(0.2)
        env = {
            **os.environ, "PYTHONPATH": str(REPO), "ASSISTANT_DATA_DIR": str(tmp_path / "var"),
            "ASSISTANT_PORT": str(server.port), "ASSISTANT_EMBEDDING_MODEL": CORPUS_MODEL,
            "ASSISTANT_DATABASE_URL": pg_url, "COLUMNS": "400",
        }
        proc = subprocess.Popen([sys.executable, "-m", "assistant.cli.main", "ingest", str(second)], env=env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while not any("waiting" in line for line in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
            time.sleep(0.2)
        waiting = next(line for line in lines if "waiting" in line)
        assert "the sync already running in the server" in waiting, waiting
        assert f"job {job_id} of {first.resolve()} (running" in waiting, waiting
        lock.rollback()  # the first sync ends; the second runs after it
        code = proc.wait(timeout=300)
        reader.join(timeout=10)
        assert code == 0, "".join(lines)[-3000:]
        assert sum("waiting" in line for line in lines) == 1  # said once
    finally:
        lock.close()
        engine.dispose()
        if proc is not None and proc.poll() is None:
            proc.kill()
        server.stop()
        res.close()
