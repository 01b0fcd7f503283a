"""`assistant search` and `assistant ask` while `assistant serve` runs for the same data folder: the
command hands the call to the server (which holds the embedded vector store and has the models loaded)
and prints what the server found, in the same format as when it searches itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from assistant.api.routes.local_ingest import TOKEN_HEADER
from assistant.auth.api_keys import create_api_key
from assistant.auth.signing import local_ingest_token
from assistant.core.db.models import AuditEvent
from assistant.core.db.usage import usage_since
from ingest.pipeline import Ingestor
from tests.api.live_server import LiveServer
from tests.conftest import CORPUS_MODEL, copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK
from tests.standin_openai import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
FILES = [PASSWORDS, "departments/tech-ops/process/application_access_request.md"]
ANSWER = "Create a password that is ideally 15 characters or longer [1]."
ROW_KEYS = {"source", "uri", "chunk_id", "doc_id", "title", "heading", "page", "score", "text"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-server")
    docs = copy_subset(HANDBOOK, root / "docs", FILES)
    with ScriptedOpenAIServer(ANSWER) as llm:
        settings = make_settings(
            root / "var", embedding_model=CORPUS_MODEL, llm_backend="openai", openai_base_url=llm.base_url,
            openai_model="assistant", llm_context_tokens=4096, answer_cache_entries=0, query_rewrite="rules",
        )
        res = open_resources(settings)  # the server's: it holds the embedded store, as `assistant serve` does
        Ingestor(res).sync(docs)
        # Questions move to ONNX Runtime once the server has exported its graph: done here first, so
        # that the searches compared below embed the query with the same engine.
        res.prepare_query_runtime()
        server = LiveServer(settings, res).start()
        # The command's environment names the data folder and the port, nothing of the model: had it
        # loaded one itself, it would be the default GGUF, not the scripted server that answers here.
        env = {**os.environ, "PYTHONPATH": str(REPO), "ASSISTANT_DATA_DIR": str(root / "var"),
               "ASSISTANT_PORT": str(server.port), "ASSISTANT_EMBEDDING_MODEL": CORPUS_MODEL, "COLUMNS": "200"}
        try:
            yield server, res, llm, env
        finally:
            server.stop()
            res.close()


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "assistant.cli.main", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_search_is_handed_to_the_running_server_and_prints_what_it_found(served):
    server, res, _, env = served
    query = f"how long must a password be {uuid.uuid4().hex[:6]}"
    run = cli(env, "search", query, "--json", "--top-k", "3")
    # The store is the server's: searching in process would have failed with store_locked.
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)
    assert rows and all(set(r) == ROW_KEYS for r in rows)  # the same shape as in process
    assert rows[0]["source"] == PASSWORDS
    with res.db.session() as session:  # the server searched, and audited it as a search
        events = session.scalars(select(AuditEvent).where(AuditEvent.query == query)).all()
    assert [(e.action, e.auth_method) for e in events] == [("search", "cli")]
    key = create_api_key(res.db, f"cli-{uuid.uuid4().hex[:6]}")
    hits = httpx.post(f"{server.url}/api/search", json={"query": query, "top_k": 3},
                      headers={"Authorization": f"Bearer {key.key}"}, timeout=60).json()
    fields = ("source", "chunk_id", "doc_id", "title", "heading", "page", "score", "text")
    assert [{k: r[k] for k in fields} for r in rows] == [{k: h[k] for k in fields} for h in hits]
    plain = cli(env, "search", query, "--top-k", "3")
    assert plain.returncode == 0 and plain.stdout.startswith(f"1. {PASSWORDS} ({rows[0]['score']:.4f})"), plain.stdout
    unknown = cli(env, "search", query, "--as", "nobody-" + uuid.uuid4().hex[:6], "--json")
    assert unknown.returncode == 2 and json.loads(unknown.stderr.splitlines()[-1])["error"]["code"] == "not_found"


def test_a_reader_that_goes_away_ends_the_output_without_a_traceback(served):
    # Fresh-user trial (issue 41): `assistant search --json | head` printed a BrokenPipeError traceback.
    _, _, _, env = served
    proc = subprocess.Popen([sys.executable, "-m", "assistant.cli.main", "search", "password", "--json"], env=env,
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line
    stderr = proc.communicate(timeout=300)[1].decode()
    assert proc.returncode == 141 and "Traceback" not in stderr and "BrokenPipe" not in stderr, (proc.returncode, stderr)


def cli_answers(res) -> int:
    from datetime import datetime

    return sum(endpoint == "cli" for endpoint, _, _ in usage_since(res.db, datetime(2000, 1, 1)))


def test_ask_is_answered_by_the_running_server(served):
    _, res, llm, env = served
    asked, counted = len(llm.requests), cli_answers(res)
    run = cli(env, "ask", "How long should a password be?")
    assert run.returncode == 0, run.stderr
    assert ANSWER.replace(" [1]", "") in run.stdout.replace(" [1]", "") and f"[1] {PASSWORDS}" in run.stdout, run.stdout
    assert len(llm.requests) > asked  # the server's model wrote it
    as_json = cli(env, "ask", "How long should a password be?", "--json")
    assert as_json.returncode == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    assert {"answer", "citations", "abstained"} <= set(answer) and answer["citations"][0]["source"] == PASSWORDS
    # Fresh-user trial: the quality view's usage left out the command line's questions.
    assert cli_answers(res) == counted + 2


def test_another_data_folders_server_is_not_used(served, tmp_path):
    server, _, _, env = served
    other = {**env, "ASSISTANT_DATA_DIR": str(tmp_path / "var")}
    settings = make_settings(tmp_path / "var", embedding_model=CORPUS_MODEL)
    refused = httpx.post(f"{server.url}/api/local/search", json={"query": "password", "data_dir": str(tmp_path / "var")},
                         headers={TOKEN_HEADER: local_ingest_token(settings)}, timeout=10)
    assert refused.status_code == 401
    run = cli(other, "search", "password", "--json")  # its own, empty data folder, searched in process
    assert run.returncode == 0 and json.loads(run.stdout) == [], run.stderr


def test_a_command_finds_the_server_of_its_data_folder_on_another_port(served):
    """`assistant serve --port N` announces its address in the data folder: a command run for that folder
    without ASSISTANT_PORT reaches it there (before, it tried the default port and failed with store_locked)."""
    from assistant.cli.local_server import announced_address

    server, res, _, env = served
    env = {k: v for k, v in env.items() if k != "ASSISTANT_PORT"}
    with announced_address(res.settings, "0.0.0.0", server.port):
        run = cli(env, "search", "how long must a password be", "--json", "--top-k", "1")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)[0]["source"] == PASSWORDS
    assert not (res.settings.storage.data_dir / "server-address.json").exists()  # removed when it stops


def test_a_misspelt_setting_is_named_when_the_server_searches(served):
    # Fresh-user trial: `ASSISTANT_TOPK=3 assistant search ...` was silently ignored on the hand-off path.
    _, res, _, env = served
    query = f"how long must a password be {uuid.uuid4().hex[:6]}"
    run = cli({**env, "ASSISTANT_TOPK": "3"}, "search", query, "--json", "--top-k", "1")
    assert run.returncode == 0, run.stderr
    assert "warning: ASSISTANT_TOPK is not a setting and is ignored (did you mean ASSISTANT_TOP_K?)" in run.stderr
    assert json.loads(run.stdout)[0]["source"] == PASSWORDS
    with res.db.session() as session:  # the server searched all the same
        assert session.scalars(select(AuditEvent.action).where(AuditEvent.query == query)).all() == ["search"]


# What the hand-off must not import: it is the whole point of `server_queries.hand_off` (issue 41: a CLI search
# under 2 s with a server running; these cost about 1.5 s of start-up on 2 cores).
HEAVY = ("pydantic", "pydantic_settings", "typer", "click", "rich", "httpx", "numpy", "torch", "sqlalchemy",
         "assistant.core.settings", "assistant.cli.commands", "assistant.composition")


@pytest.mark.parametrize("args", [["search", "how long must a password be", "--json", "--top-k", "2"],
                                  ["ask", "How long should a password be?", "--json"]], ids=["search", "ask"])
def test_the_hand_off_imports_nothing_heavy(served, args):
    _, _, _, env = served
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "assistant.cli.main", *args], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert (result[0] if args[0] == "search" else result["citations"][0])["source"] == PASSWORDS
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "assistant.cli.server_queries" in imported
    heavy = sorted(name for name in imported if name.split(".")[0] in HEAVY or name in HEAVY)
    assert not heavy, heavy
