"""The audit trail's hash chain, retention with legal hold, and sign-in throttling, on SQLite and
PostgreSQL migrated by Alembic; `assistant audit verify` on an edited trail."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text, update
from typer.testing import CliRunner

from assistant.answering.store import create_conversation
from assistant.auth.accounts import create_user, set_flags, set_password, unlock_account
from assistant.auth.sign_in_throttle import ThrottlePolicy, clear_account, record_failure, wait_s
from assistant.cli.admin_audit import cli_principal
from assistant.cli.main import app
from assistant.compliance.audit import AuditQuery, list_events, record_event
from assistant.compliance.audit_chain import row_digest, verify_chain
from assistant.compliance.erasure import erase_user
from assistant.compliance.retention import apply_retention
from assistant.compliance.store import erase_user_rows
from assistant.compliance.tasks import RETENTION_TASK
from assistant.core import resources
from assistant.core.db.models import AuditChainHead, AuditEvent, Conversation, Feedback, Job, JobItem, User
from assistant.core.db.session import Database
from assistant.core.errors import ConflictError, NotFoundError
from assistant.core.jobs import JobDispatcher, make_celery
from assistant.core.principals import Principal
from assistant.core.resources import Resources
from assistant.core.settings import get_settings
from tests.conftest import make_settings

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)


def _name() -> str:
    return f"u{uuid.uuid4().hex[:8]}"


def _record(db: Database, who: str, n: int = 2, **kwargs) -> list[int]:
    return [
        record_event(db, principal=Principal(who), action="search", query=f"{who} asks {i}", chunk_ids=["c1"],
                     doc_ids=["d1"], auth_method="session", address="10.0.0.9", details={"top_k": 5}, **kwargs)
        for i in range(n)
    ]


def _execute(db: Database, statement: str, **params) -> None:
    with db.engine.begin() as conn:
        conn.execute(text(statement), params)


def _broken_after(db: Database, statement: str, **params) -> str:
    _execute(db, statement, **params)
    report = verify_chain(db)
    assert not report.ok and report.broken_id is not None
    return report.problem


def test_the_chain_verifies_and_any_edit_insert_or_removal_breaks_it(db):
    who = _name()
    ids = _record(db, who, 4)
    report = verify_chain(db)
    assert report.ok and report.checked == 4, report
    assert [r["id"] for r in list_events(db, AuditQuery(doc_id="d1"))] == ids
    assert list_events(db, AuditQuery(doc_id="d2")) == []
    original = list_events(db, AuditQuery(after_id=ids[0], limit=1))[0]["query"]
    assert "query text" in _broken_after(db, "UPDATE audit_events SET query = 'something else' WHERE id = :id", id=ids[1])
    _execute(db, "UPDATE audit_events SET query = :q WHERE id = :id", q=original, id=ids[1])
    assert verify_chain(db).ok  # put back as it was, it verifies again
    assert "fields" in _broken_after(db, "UPDATE audit_events SET principal = 'mallory' WHERE id = :id", id=ids[2])
    _execute(db, "UPDATE audit_events SET principal = :p WHERE id = :id", p=who, id=ids[2])
    assert "removed or inserted" in _broken_after(db, "DELETE FROM audit_events WHERE id = :id", id=ids[1])


def test_the_newest_rows_cannot_be_dropped_unseen(db):
    ids = _record(db, _name(), 3)
    _execute(db, "DELETE FROM audit_events WHERE id = :id", id=ids[-1])
    report = verify_chain(db)
    assert not report.ok and "newest rows" in report.problem


def test_erasure_redacts_the_query_and_the_chain_still_verifies(db, tmp_path):
    name = _name()
    create_user(db, name, password="a-long-enough-password")
    ids = _record(db, name, 2)
    set_flags(db, name, legal_hold=True)
    with pytest.raises(ConflictError, match="legal hold"):
        erase_user(db, name, store=None, tables_dir=tmp_path, redact_audit=True, actor=Principal("admin"))
    set_flags(db, name, legal_hold=False)
    counts = erase_user_rows(db, name, redact_audit=True, upload_ids=[])
    assert counts["audit_rows_redacted"] == 2
    rows = list_events(db, AuditQuery(user=name))
    assert [r["id"] for r in rows] == ids and {r["query"] for r in rows} == {"[erased]"}
    assert all(r["erased"] and r["doc_ids"] == ["d1"] for r in rows)  # who saw which document stays
    report = verify_chain(db)
    assert report.ok and report.erased >= 2


def test_retention_deletes_what_is_past_its_age_and_keeps_held_users(db, tmp_path):
    kept, held = _name(), _name()
    ids = {}
    for name in (kept, held):
        create_user(db, name)
        with db.session() as session:
            ids[name] = session.scalar(select(User.id).where(User.name == name))
    set_flags(db, held, legal_hold=True)
    old_conv = create_conversation(db, user_id=ids[kept], title="old").id
    new_conv = create_conversation(db, user_id=ids[kept], title="new").id
    held_conv = create_conversation(db, user_id=ids[held], title="held").id
    with db.session() as session:
        session.execute(update(Conversation).where(Conversation.id.in_([old_conv, held_conv])).values(updated_at=OLD))
        for name, when in ((kept, OLD), (held, OLD), (kept, NOW)):
            session.add(Feedback(user_id=ids[name], principal=name, rating=1, created_at=when))
        job = Job(kind="sync", status="done", finished_at=OLD, created_at=OLD)
        session.add(job)
        session.flush()
        session.add_all([JobItem(job_id=job.id, path="a.md", created_at=OLD)])
        live = Job(kind="sync", status="done", finished_at=NOW)
        session.add(live)
        session.flush()
        session.add(JobItem(job_id=live.id, path="b.md"))
        live_id = live.id
    old_audit = _record(db, kept, 2)
    held_audit = _record(db, held, 1)
    with db.session() as session:
        session.execute(update(AuditEvent).where(AuditEvent.id.in_(old_audit + held_audit)).values(at=OLD))
    # Rewrite those rows' hashes as if they had been written 40 days ago (the chain covers `at`).
    _rechain(db)
    settings = make_settings(
        tmp_path / "var", retention_audit_days=30, retention_conversations_days=30, retention_feedback_days=30,
        retention_job_items_days=30,
    )
    report = apply_retention(db, settings=settings, now=NOW)
    assert report.deleted["conversations"] >= 1 and held in report.held_users
    with db.session() as session:
        convs = set(session.scalars(select(Conversation.id).where(Conversation.user_id.in_(ids.values()))))
        assert convs == {new_conv, held_conv}
        ratings = session.execute(select(Feedback.principal, Feedback.created_at).where(Feedback.user_id.in_(ids.values()))).all()
        assert sorted(p for p, _ in ratings) == sorted([held, kept])  # kept's old rating went
        assert session.scalar(select(Job).where(Job.id == live_id)) is not None
        assert session.scalars(select(JobItem.path).where(JobItem.job_id == live_id)).all() == ["b.md"]
        remaining = set(session.scalars(select(AuditEvent.id).where(AuditEvent.id.in_(old_audit + held_audit))))
    assert remaining == set(held_audit)  # the old rows before the held user's went; the held user's stay
    assert report.deleted["audit"] >= 2
    assert verify_chain(db).ok  # the kept chain starts at the anchor the purge recorded


def _rechain(db: Database) -> None:
    """Recompute every hash in id order (stands in for rows written in the past)."""
    with db.session() as session:
        prev = ""
        for e in session.scalars(select(AuditEvent).where(AuditEvent.row_hash != "").order_by(AuditEvent.id)):
            e.prev_hash = prev
            e.row_hash = row_digest(e)
            prev = e.row_hash
        session.get(AuditChainHead, 1).last_hash = prev


def test_throttling_is_per_address_and_a_reset_clears_it(db):
    name = _name()
    create_user(db, name, password="a-long-enough-password")
    policy = ThrottlePolicy(free_failures=3, base_s=2.0, max_s=60.0, forget_s=900.0)
    waits = [record_failure(db, name, "10.0.0.1", policy=policy, now=NOW) for _ in range(6)]
    assert waits == [0.0, 0.0, 2.0, 4.0, 8.0, 16.0]  # exponential, not a fixed lock
    assert wait_s(db, name, "10.0.0.1", now=NOW) == 16.0
    assert wait_s(db, name, "10.0.0.2", now=NOW) == 0.0  # the owner elsewhere is not held up
    assert wait_s(db, name, "10.0.0.1", now=NOW + timedelta(seconds=17)) == 0.0
    set_password(db, name, "another-long-password")
    assert wait_s(db, name, "10.0.0.1", now=NOW) == 0.0
    record_failure(db, name, "10.0.0.3", policy=ThrottlePolicy(free_failures=1), now=NOW)
    assert clear_account(db, name) == 1
    assert unlock_account(db, name) == 0  # an account with nothing to clear
    record_failure(db, "guessed-name", "10.0.0.4", policy=ThrottlePolicy(free_failures=1), now=NOW)
    assert unlock_account(db, "guessed-name") == 1  # a name without an account, but throttled
    with pytest.raises(NotFoundError):
        unlock_account(db, "no-such-name")  # a typo is not "cleared (0 addresses)"


def test_audit_verify_command_fails_on_an_edited_row_and_admin_commands_are_audited(cli_env):
    runner = CliRunner()
    name = _name()
    assert runner.invoke(app, ["users", "add", name, "--group", "finance"]).exit_code == 0
    assert runner.invoke(app, ["users", "auditor", name]).exit_code == 0
    ok = runner.invoke(app, ["audit", "verify"])
    assert ok.exit_code == 0 and "intact" in ok.stdout
    listed = runner.invoke(app, ["audit", "export", "--user", cli_principal().name, "--format", "jsonl"])
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["details"]["command"] for r in rows] == ["users add", "users auditor"]
    assert [r["details"]["params"]["name"] for r in rows] == [name, name]
    assert {r["action"] for r in rows} == {"admin.user"} and all(r["auth_method"] == "cli" for r in rows)
    csv_out = runner.invoke(app, ["audit", "export", "--format", "csv"]).stdout.splitlines()
    assert csv_out[0].startswith("id,at,principal,auth_method,action") and len(csv_out) == 3
    listed = runner.invoke(app, ["audit", "list", "--user", cli_principal().name, "--since", "2000-01-01", "--format", "jsonl"])
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [r["id"] for r in rows]
    db = Database(get_settings().resolved_database_url)
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET details = '{}' WHERE id = (SELECT MIN(id) FROM audit_events)"))
    db.dispose()
    broken = runner.invoke(app, ["audit", "verify"])
    assert broken.exit_code == 1 and "broken" in broken.output


def test_retention_runs_on_celery_beat_and_on_the_in_process_scheduler(tmp_path):
    settings = make_settings(tmp_path / "var", retention_interval_s=0.2, sync_interval_s=0)
    assert make_celery(settings).conf.beat_schedule["apply-retention"] == {"task": RETENTION_TASK, "schedule": 0.2}
    res = Resources.open(settings)
    resources.set_current(res)
    dispatcher = JobDispatcher(settings)
    try:
        for _ in range(300):  # the in-process beat submits the task every 0.2 s; wait for its first report
            runs = list_events(res.db, AuditQuery(action="retention.purge"))
            if runs:
                break
            time.sleep(0.1)
        assert runs and runs[0]["principal"] == "system" and runs[0]["details"]["deleted"]["job_items"] == 0
    finally:
        dispatcher.stop()
        dispatcher.join(30)
        resources.set_current(None)
        res.close()
