"""`assistant doctor`: every part of a healthy deployment passes; each broken one fails with what to fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from assistant.core.db.session import Database
from assistant.operations.doctor import run_checks
from tests.conftest import make_settings

CLOSED = "127.0.0.1:9"  # the discard port: nothing listens there


def test_a_healthy_embedded_deployment_passes_every_check(tmp_path):
    settings = make_settings(tmp_path / "var", llm_model="smollm2", doctor_min_free_bytes=0)
    settings.ensure_dirs()
    db = Database(settings.resolved_database_url)
    with db.engine.connect():  # an empty database file: reachable, not migrated
        pass
    stale = {c.name: c for c in run_checks(settings)}
    assert stale["database"].ok and not stale["migrations"].ok and "assistant migrate" in stale["migrations"].fix
    db.migrate()
    db.dispose()
    checks = run_checks(settings)
    assert {c.name for c in checks} >= {"database", "migrations", "vector store", "chat model", "embedding model", "disk space"}
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_each_unreachable_or_missing_part_fails_with_a_fix(tmp_path):
    settings = make_settings(
        tmp_path / "var", database_url=f"postgresql+psycopg://assistant:secret@{CLOSED}/assistant",
        vector_store="qdrant", qdrant_url=f"http://{CLOSED}", answer_cache_redis_url=f"redis://{CLOSED}/0",
        llm_backend="openai", openai_base_url=f"http://{CLOSED}/v1", embedding_model=str(tmp_path / "no-model"),
        doctor_min_free_bytes=1 << 60, connect_timeout_s=1.0,
    )
    checks = {c.name: c for c in run_checks(settings)}
    failed = {name for name, c in checks.items() if not c.ok}
    assert failed == {"database", "vector store", "redis: answer cache (ASSISTANT_ANSWER_CACHE_REDIS_URL)",
                      "LLM server", "embedding model", "disk space"}, checks
    assert all(checks[name].fix for name in failed)
    assert "secret" not in checks["database"].detail  # the password is hidden
    assert "ASSISTANT_DATABASE_URL" in checks["database"].fix


def test_the_command_exits_1_with_json_naming_the_failures(tmp_path):
    env = {**os.environ, "ASSISTANT_DATA_DIR": str(tmp_path / "var"), "ASSISTANT_LLM_BACKEND": "openai",
           "ASSISTANT_OPENAI_BASE_URL": f"http://{CLOSED}/v1", "ASSISTANT_CONNECT_TIMEOUT_S": "1"}
    done = subprocess.run([str(Path(sys.executable).parent / "assistant"), "doctor", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    failed = {c["name"] for c in report["checks"] if not c["ok"]}
    assert report["ok"] is False and {"LLM server", "database"} <= failed  # no database yet, no LLM server
    assert not (tmp_path / "var" / "assistant.db").exists()  # the doctor changes nothing
