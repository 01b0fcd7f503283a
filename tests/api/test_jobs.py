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
