"""The adapter registry's admin API: only admins may use it; promote and rollback switch in one step and
answer 409 when the adapter cannot move; starting a run goes out by task name."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from assistant.adapters import store as registry_db
from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from tests.api.test_auth import PASSWORD, login
from tests.conftest import make_settings, open_resources


@pytest.fixture(scope="module")
def admin_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune-api")
    res = open_resources(make_settings(root / "var", finetune_schedule_enabled=False))
    create_user(res.db, "ft-admin", password=PASSWORD, is_admin=True)
    create_user(res.db, "ft-reader", password=PASSWORD)
    yield create_app(res.settings, resources=res), res
    res.close()


def _csrf(client: TestClient) -> dict:
    return {"X-CSRF-Token": client.get("/api/auth/me").json()["csrf_token"]}


def test_readers_may_not_see_or_move_adapters(admin_app):
    app, _ = admin_app
    with TestClient(app) as client:
        login(client, "ft-reader")
        assert client.get("/api/admin/finetune/adapters").status_code == 403
        assert client.post("/api/admin/finetune/rollback", json={}, headers=_csrf(client)).status_code == 403


def _adapter_folder(res, name: str) -> str:
    """A folder holding an `adapter.gguf`: publishing on the embedded default only checks that llama.cpp's
    file is there (the router loads it at its first request, which this test makes none of)."""
    folder = res.settings.storage.data_dir / "test-adapters" / name
    folder.mkdir(parents=True)
    (folder / "adapter.gguf").write_bytes(b"GGUF")
    return str(folder)


def test_admin_promotes_to_live_and_rolls_back_in_one_step(admin_app):
    app, res = admin_app
    first = registry_db.add_adapter(res.db, name="api-a", audience="everyone", base_model="b", snapshot_id=None,
                                    job_id=None, hyperparameters={"rank": 8})
    first = registry_db.update_adapter(res.db, first.id, path=_adapter_folder(res, "api-a"))
    second = registry_db.add_adapter(res.db, name="api-b", audience="everyone", base_model="b", snapshot_id=None,
                                     job_id=None, hyperparameters={"rank": 8})
    second = registry_db.update_adapter(res.db, second.id, path=_adapter_folder(res, "api-b"))
    unservable = registry_db.add_adapter(res.db, name="api-c", audience="everyone", base_model="b", snapshot_id=None,
                                         job_id=None, hyperparameters={"rank": 8})
    with TestClient(app) as client:
        login(client, "ft-admin")
        csrf = _csrf(client)
        assert client.post(f"/api/admin/finetune/adapters/{first.id}/promote", json={"to": "live"}, headers=csrf).json() == {
            "loaded": ["api-a"], "unloaded": []}
        assert client.post(f"/api/admin/finetune/adapters/{second.id}/promote", json={}, headers=csrf).status_code == 200
        listed = {a["name"]: a for a in client.get("/api/admin/finetune/adapters").json()}
        assert listed["api-a"]["status"] == "live" and listed["api-b"]["status"] == "canary"
        served = client.get("/api/admin/model").json()["adapter"]  # the admin's model view names both
        assert served.startswith("live api-a (everyone); canary api-b (everyone, ") and served.endswith("% of it)")
        assert listed["api-b"]["promoted_by"] == "ft-admin"
        # Rollback retires the canary first; the live adapter keeps serving.
        assert client.post("/api/admin/finetune/rollback", json={}, headers=csrf).json() == {"loaded": [], "unloaded": ["api-b"]}
        assert client.post(f"/api/admin/finetune/adapters/{second.id}/promote", json={}, headers=csrf).status_code == 409
        assert client.post("/api/admin/finetune/rollback", json={}, headers=csrf).json() == {"loaded": [], "unloaded": ["api-a"]}
        assert client.post("/api/admin/finetune/rollback", json={}, headers=csrf).status_code == 409
        assert client.get("/api/admin/finetune/adapters/999999").status_code == 404
        # An adapter llama.cpp cannot serve (no GGUF LoRA, nothing to export it from) is refused, named.
        refused = client.post(f"/api/admin/finetune/adapters/{unservable.id}/promote", json={}, headers=csrf)
        assert refused.status_code == 409 and "api-c" in refused.json()["error"]["message"] and "adapter.gguf" in refused.json()["error"]["message"], refused.text
        assert {a["name"]: a for a in client.get("/api/admin/finetune/adapters").json()}["api-c"]["status"] != "canary"
