"""The jobs API: an admin starts a sync by task name and follows it to `done` with per-file items;
other callers may neither list jobs (file names can be sensitive) nor start one."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from tests.api.test_auth import PASSWORD, login
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/application_access_request.md",
]


@pytest.fixture(scope="module")
def jobs_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs")
    folder = copy_subset(HANDBOOK, root / "docs", FILES)
    res = open_resources(make_settings(root / "var", source_roots=[root / "docs"]))
    create_user(res.db, "jobs-admin", password=PASSWORD, is_admin=True)
    create_user(res.db, "jobs-reader", password=PASSWORD)
    app = create_app(res.settings, resources=res)
    yield app, folder, res
    res.close()


def _csrf(client: TestClient) -> dict:
    return {"X-CSRF-Token": client.get("/api/auth/me").json()["csrf_token"]}


def test_admin_starts_a_sync_and_follows_it_to_done(jobs_app):
    app, folder, res = jobs_app
    with TestClient(app) as client:
        assert login(client, "jobs-admin").status_code == 200
        r = client.post("/api/jobs/sync", json={"path": str(folder)}, headers=_csrf(client))
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        deadline = time.time() + 300
        while time.time() < deadline:
            job = client.get(f"/api/jobs/{job_id}").json()
            if job["status"] in ("done", "failed"):
                break
            time.sleep(1)
        assert job["status"] == "done", job
        assert sorted(i["path"] for i in job["items"]) == sorted(FILES)
        assert all(i["status"] == "done" and i["chunks"] > 0 for i in job["items"])
        assert any(j["id"] == job_id for j in client.get("/api/jobs").json())
        hits = client.post("/api/search", json={"query": "password length"}, headers=_csrf(client)).json()
        assert hits and hits[0]["source"].endswith("passwords.md")


def test_a_missing_path_is_a_clear_error(jobs_app):
    app, _folder, _res = jobs_app
    with TestClient(app) as client:
        login(client, "jobs-admin")
        r = client.post("/api/jobs/sync", json={"path": "/nonexistent/folder"}, headers=_csrf(client))
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "invalid_request" and "/nonexistent/folder" in r.json()["error"]["message"]


def test_readers_may_not_see_or_start_jobs(jobs_app):
    app, folder, _res = jobs_app
    with TestClient(app) as client:
        login(client, "jobs-reader")
        assert client.get("/api/jobs").status_code == 403
        assert client.post("/api/jobs/sync", json={"path": str(folder)}, headers=_csrf(client)).status_code == 403


def test_the_api_syncs_only_under_the_source_roots_and_checks_the_manifest_first(jobs_app, tmp_path):
    app, folder, res = jobs_app
    with TestClient(app) as client:
        login(client, "jobs-admin")
        before = len(client.get("/api/jobs").json())
        for outside in ("/etc", str(tmp_path), str(folder / ".." / ".."), "docs", str(folder) + "\u0000/x"):
            r = client.post("/api/jobs/sync", json={"path": outside}, headers=_csrf(client))
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
        bad = {"defaults": ["group:finance"]}  # a typo must not leave the folder open to everyone
        r = client.post("/api/jobs/sync", json={"path": str(folder), "acl": bad}, headers=_csrf(client))
        assert r.status_code == 400 and "defaults" in r.json()["error"]["message"], r.text
        assert len(client.get("/api/jobs").json()) == before  # nothing was queued


def test_a_manifest_for_a_path_inside_a_source_is_refused_before_queuing(jobs_app):
    app, folder, res = jobs_app
    from ingest.pipeline import Ingestor

    ingestor = Ingestor(res)
    ingestor.sync(folder)  # registers the folder source
    ingestor.close()
    inner = folder / FILES[0].rsplit("/", 1)[0]
    with TestClient(app) as client:
        login(client, "jobs-admin")
        r = client.post("/api/jobs/sync", json={"path": str(inner), "acl": {"default": ["everyone"]}}, headers=_csrf(client))
        assert r.status_code == 400 and "lies inside the source" in r.json()["error"]["message"], r.text


def test_an_admin_outside_a_folders_acl_sees_its_files_without_names(jobs_app, tmp_path):
    """Admins read through the same ACLs: a sync of a folder with a finance-only subfolder lists the
    finance files (done or failed) to an admin outside finance without path or reason, in the job
    view and in the sources view; an admin in finance sees them."""
    app, _folder, res = jobs_app
    from assistant.auth.acl_manifest import AclManifest
    from ingest.pipeline import Ingestor

    folder = tmp_path / "company"
    (folder / "finance").mkdir(parents=True)
    (folder / "open.md").write_text("# Open\n\nThe canteen opens at nine.\n")
    (folder / "finance" / "budget-2027.md").write_text("# Budget 2027\n\nTravel budget: 80,000 EUR.\n")
    (folder / "finance" / "layoffs-plan.pdf").write_bytes(b"%PDF-1.7\nnot really a pdf")
    manifest = AclManifest.from_dict({"default": ["everyone"], "rules": [{"path": "finance/**", "allow": ["group:finance"]}]})
    create_user(res.db, "finance-admin", password=PASSWORD, is_admin=True, groups=["finance"])
    ingestor = Ingestor(res)
    outcomes = ingestor.sync(folder, acl=manifest)
    ingestor.close()
    assert {o.source: o.status for o in outcomes}["finance/layoffs-plan.pdf"] == "failed", outcomes
    secret = {"finance/budget-2027.md", "finance/layoffs-plan.pdf"}
    for admin, sees_finance in (("jobs-admin", False), ("finance-admin", True)):
        with TestClient(app) as client:
            assert login(client, admin).status_code == 200
            job = next(j for j in client.get("/api/jobs").json() if j["params"].get("path") == str(folder))
            items = client.get(f"/api/jobs/{job['id']}").json()["items"]
            shown = {i["path"] for i in items if i["path"] is not None}
            assert "open.md" in shown and len(items) == 3
            assert (secret <= shown) == sees_finance and (not secret & shown) == (not sees_finance), items
            hidden = [i for i in items if i["path"] is None]
            assert all(i["reason"] is None and i["acl"] is None for i in hidden)
            _check_source_error(client, folder, sees_finance)
            if not sees_finance:
                assert "layoffs" not in client.get("/api/admin/sources").text + client.get(f"/api/jobs/{job['id']}").text
    # Synced again unchanged, the bad file is skipped; it still fails, and is still listed (fresh-user
    # trial: it vanished from the page), to the same admins only.
    ingestor = Ingestor(res)
    assert {o.source: o.status for o in ingestor.sync(folder, acl=manifest)}["finance/layoffs-plan.pdf"] == "skipped"
    ingestor.close()
    for admin, sees_finance in (("jobs-admin", False), ("finance-admin", True)):
        with TestClient(app) as client:
            assert login(client, admin).status_code == 200
            _check_source_error(client, folder, sees_finance)
            if not sees_finance:
                assert "layoffs" not in client.get("/api/admin/sources").text


def _check_source_error(client: TestClient, folder, sees_finance: bool) -> None:
    """The sources view lists the folder's one failed file, with its path and reason where the admin may see it."""
    source = next(s for s in client.get("/api/admin/sources").json() if s["path"] == str(folder))
    (error,) = source["errors"]
    assert error["status"] == "failed"
    if sees_finance:
        assert error["path"] == "finance/layoffs-plan.pdf" and error["reason"], error
    else:
        assert error["path"] is None and error["reason"] is None, error


def test_an_admin_stops_a_running_sync_at_a_file_boundary_and_the_next_sync_resumes_it(tmp_path):
    from sqlalchemy import select

    from assistant.core.db.models import AuditEvent

    names = sorted(str(p.relative_to(HANDBOOK)) for p in (HANDBOOK / "departments").rglob("*.md"))[:12]
    folder = copy_subset(HANDBOOK, tmp_path / "docs", names)
    res = open_resources(make_settings(tmp_path / "var", source_roots=[tmp_path / "docs"], embedding_batch_chunks=4))
    create_user(res.db, "stop-admin", password=PASSWORD, is_admin=True)
    create_user(res.db, "stop-reader", password=PASSWORD)
    try:
        with TestClient(create_app(res.settings, resources=res)) as client:
            login(client, "stop-admin")
            job_id = client.post("/api/jobs/sync", json={"path": str(folder)}, headers=_csrf(client)).json()["id"]
            deadline = time.time() + 300
            while time.time() < deadline:  # stopped once a file is done: the job is still running
                job = client.get(f"/api/jobs/{job_id}").json()
                if job["status"] not in ("queued", "running") or any(i["status"] == "done" for i in job["items"]):
                    break
                time.sleep(0.05)
            assert job["status"] == "running", job
            r = client.post(f"/api/jobs/{job_id}/stop", headers=_csrf(client))
            assert r.status_code == 202, r.text
            while time.time() < deadline and job["status"] == "running":
                time.sleep(0.2)
                job = client.get(f"/api/jobs/{job_id}").json()
            assert job["status"] == "interrupted", job
            assert job["reason"].startswith("stopped by stop-admin: interrupted after"), job["reason"]
            done = [i["path"] for i in job["items"] if i["status"] == "done"]
            assert 1 <= len(done) < len(names), job["items"]
            again = client.post(f"/api/jobs/{job_id}/stop", headers=_csrf(client))  # it has ended
            assert again.status_code == 409 and again.json()["error"]["code"] == "job_not_running", again.text
            with res.db.session() as session:
                details = session.scalars(select(AuditEvent.details).where(
                    AuditEvent.principal == "stop-admin", AuditEvent.action == "admin.source")).all()
            assert {"change": "stop", "job_id": job_id, "path": str(folder)} in details

            # the next sync of the folder indexes the rest, skipping the files done
            job_id = client.post("/api/jobs/sync", json={"path": str(folder)}, headers=_csrf(client)).json()["id"]
            while time.time() < deadline and job["status"] not in ("done", "failed"):
                time.sleep(0.5)
                job = client.get(f"/api/jobs/{job_id}").json()
            assert job["status"] == "done", job
            status = {i["path"]: i["status"] for i in job["items"]}
            assert {status[p] for p in done} == {"skipped"} and len(status) == len(names), status
            client.post("/api/auth/logout", headers=_csrf(client))
            login(client, "stop-reader")
            assert client.post(f"/api/jobs/{job_id}/stop", headers=_csrf(client)).status_code == 403
    finally:
        res.close()
