"""Sign-in over HTTP: every route but health and sign-in refuses anonymous callers; sessions, CSRF, keys, roles."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from assistant.api.app import create_app
from assistant.auth.accounts import create_user
from assistant.auth.api_keys import create_api_key, revoke_api_key
from assistant.core.db.models import User
from assistant.core.errors import ConfigError
from tests.conftest import make_settings, open_resources

PUBLIC_ROUTES = {
    ("GET", "/healthz"),
    ("GET", "/api/auth/providers"),
    ("POST", "/api/auth/login"),
    ("GET", "/api/auth/oidc/login"),
    ("GET", "/api/auth/oidc/callback"),
}
PASSWORD = "a-long-enough-password"


@pytest.fixture(scope="module")
def auth_res(tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("auth") / "var")
    res = open_resources(settings)
    yield res
    res.close()


@pytest.fixture(scope="module")
def app(auth_res):
    return create_app(auth_res.settings, resources=auth_res)


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def new_user(res, **kwargs) -> str:
    name = f"u-{uuid.uuid4().hex[:8]}"
    create_user(res.db, name, password=PASSWORD, **kwargs)
    return name


def login(client: TestClient, name: str, password: str = PASSWORD):
    return client.post("/api/auth/login", json={"username": name, "password": password})


def api_routes(app) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route of the app, found by walking its routers."""
    out = []
    for route in iter_route_contexts(app.routes):
        for method in sorted(route.methods or ()):
            if method != "HEAD" and route.path:
                out.append((method, route.path))
    return out


def test_every_route_but_health_and_sign_in_refuses_anonymous_callers(app, client):
    routes = api_routes(app)
    assert ("POST", "/api/chat") in routes and ("GET", "/api/documents/{doc_id}/content") in routes
    checked = 0
    for method, path in routes:
        if (method, path) in PUBLIC_ROUTES:
            continue
        url = re.sub(r"\{[^}]+\}", "x", path)
        r = client.request(method, url, json={})
        assert r.status_code == 401, (method, path, r.status_code, r.text)
        assert r.json()["error"]["code"] == "unauthenticated"
        if not path.startswith("/api/local/"):  # the CLI's hand-over takes a local token, not a bearer
            assert r.headers.get("www-authenticate", "").startswith("Bearer"), (method, path)
        checked += 1
    assert checked >= 8
    # Everything else the app serves is the static UI (the login form must load without a session).
    mounts = [r for r in iter_route_contexts(app.routes) if not getattr(r, "methods", None)]
    assert [m.path for m in mounts] == [""]
    assert client.get("/").status_code == 200 and "login" in client.get("/").text


def test_a_bad_bearer_header_or_key_is_refused(client):
    for header in ("Bearer", "Basic dXNlcjpwYXNz", "Bearer ak_nope_nope", "Bearer not-a-key"):
        r = client.get("/api/auth/me", headers={"Authorization": header})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", header


def test_password_login_sets_an_httponly_cookie_and_me_answers(auth_res, client):
    name = new_user(auth_res, groups=["finance"])
    assert login(client, name, "wrong-password-here").status_code == 401
    assert login(client, "nobody-" + name).status_code == 401
    r = login(client, name)
    assert r.status_code == 200
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie
    me = client.get("/api/auth/me").json()
    assert me["name"] == name and me["groups"] == ["finance"] and me["auth"] == "session"
    assert me["csrf_token"] == r.json()["csrf_token"]


def test_secure_cookie_flag_is_configurable(auth_res, tmp_path):
    settings = make_settings(auth_res.settings.storage.data_dir, session_cookie_secure=True)
    name = new_user(auth_res)
    # The app's settings are its resources': the same clients, with the cookie setting changed.
    with TestClient(create_app(resources=dataclasses.replace(auth_res, settings=settings)), base_url="https://testserver") as c:
        r = login(c, name)
        assert "; secure" in r.headers["set-cookie"].lower()
        assert c.get("/api/auth/me").status_code == 200


def test_the_app_reads_the_settings_of_its_resources(auth_res):
    app = create_app(resources=auth_res)
    assert app.state.settings is auth_res.settings
    other = make_settings(auth_res.settings.storage.data_dir, session_cookie_secure=True)
    with pytest.raises(ConfigError, match="differ from its resources' settings"):
        create_app(other, resources=auth_res)


def test_state_changing_cookie_requests_need_the_csrf_token(auth_res, client):
    name = new_user(auth_res)
    token = login(client, name).json()["csrf_token"]
    for path, body in (("/api/chat", {"question": "hi"}), ("/api/search", {"query": "hi"}), ("/api/auth/logout", None)):
        for headers in ({}, {"X-CSRF-Token": "forged"}):
            r = client.post(path, json=body, headers=headers)
            assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed", (path, headers)
    assert client.get("/api/auth/me").status_code == 200  # safe methods need no token
    assert client.post("/api/auth/logout", headers={"X-CSRF-Token": token}).status_code == 204
    assert client.get("/api/auth/me").status_code == 401


def test_login_needs_json_so_a_cross_site_form_cannot_sign_anyone_in(auth_res, client):
    name = new_user(auth_res)
    r = client.post("/api/auth/login", data={"username": name, "password": PASSWORD})
    assert r.status_code == 422
    assert client.get("/api/auth/me").status_code == 401


def test_a_new_login_replaces_the_session_and_its_csrf_token(auth_res, client):
    a, b = new_user(auth_res), new_user(auth_res)
    first = login(client, a).json()["csrf_token"]
    second = login(client, b).json()
    assert second["name"] == b and second["csrf_token"] != first


def test_disabling_a_user_ends_its_session_at_the_next_request(auth_res, client):
    name = new_user(auth_res)
    login(client, name)
    assert client.get("/api/auth/me").status_code == 200
    with auth_res.db.session() as session:
        session.execute(update(User).where(User.name == name).values(disabled=True))
    assert client.get("/api/auth/me").status_code == 401
    assert login(client, name).status_code == 401


def test_api_keys_authenticate_without_csrf_and_stop_when_revoked(auth_res, client):
    key = create_api_key(auth_res.db, f"svc-{uuid.uuid4().hex[:6]}", groups=["helpdesk"])
    headers = {"Authorization": f"Bearer {key.key}"}
    me = client.get("/api/auth/me", headers=headers).json()
    assert me == {"name": key.name, "groups": ["helpdesk"], "is_admin": False, "is_service": True,
                  "auth": "api_key", "csrf_token": None}
    revoke_api_key(auth_res.db, key.name)
    assert client.get("/api/auth/me", headers=headers).status_code == 401
    # A service account cannot sign in with a password.
    assert login(client, key.name, "anything-at-all").status_code == 401


def test_only_admins_list_users(auth_res, client):
    login(client, new_user(auth_res))
    r = client.get("/api/users")
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"
    admin = new_user(auth_res, is_admin=True)
    login(client, admin)
    users = client.get("/api/users").json()
    assert any(u["name"] == admin and u["is_admin"] for u in users)
    assert all("password" not in str(u) for u in users)


def test_openapi_schema_needs_a_session(auth_res, client):
    assert client.get("/api/openapi.json").status_code == 401
    assert client.get("/docs").status_code == 404 or "swagger" not in client.get("/docs").text.lower()
    login(client, new_user(auth_res))
    assert "/api/search" in client.get("/api/openapi.json").json()["paths"]


def test_api_docs_page_is_served_offline_to_signed_in_callers_only(auth_res, client):
    for path in ("/api/docs", "/api/docs/start.js", "/api/docs/assets/swagger-ui-bundle.js", "/api/openapi.json"):
        r = client.get(path)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", path
    login(client, new_user(auth_res))
    page = client.get("/api/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    styles = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page.text)
    assert scripts and styles and all(src.startswith("/api/docs/") for src in scripts + styles)  # no CDN
    assert "<script>" not in page.text and "script-src" not in page.headers["content-security-policy"]
    bundle = client.get("/api/docs/assets/swagger-ui-bundle.js")
    assert bundle.status_code == 200 and "SwaggerUIBundle" in bundle.text and len(bundle.content) > 500_000
    assert client.get(styles[0]).status_code == 200 and ".swagger-ui" in client.get(styles[0]).text
    assert "/api/openapi.json" in client.get("/api/docs/start.js").text
    assert client.get("/api/docs/assets/..%2Fcore.py").status_code == 404
    paths = client.get("/api/openapi.json").json()["paths"]
    assert {"/api/helpdesk/tickets", "/api/helpdesk/tickets/{ticket_id}"} <= set(paths), sorted(paths)


def test_providers_say_whether_single_sign_on_is_offered(client):
    assert client.get("/api/auth/providers").json() == {"password": True, "oidc": False}
    r = client.get("/api/auth/oidc/login", follow_redirects=False)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_a_session_never_passes_to_a_new_account_that_reuses_the_id(auth_res, client):
    name = new_user(auth_res)
    login(client, name)
    with auth_res.db.session() as session:
        user = session.scalar(select(User).where(User.name == name))
        old_id = user.id
        session.delete(user)
    with auth_res.db.session() as session:
        session.add(User(id=old_id, name=f"{name}-new"))
    assert client.get("/api/auth/me").status_code == 401


def _copy_of_cookies(app, client: TestClient) -> TestClient:
    """A second client holding a copy of `client`'s session cookie (a stolen or backed-up cookie)."""
    thief = TestClient(app)
    for name, value in client.cookies.items():
        thief.cookies.set(name, value)
    return thief


def test_sign_out_ends_the_session_on_the_server_not_only_in_the_browser(app, auth_res, client):
    name = new_user(auth_res)
    token = login(client, name).json()["csrf_token"]
    thief = _copy_of_cookies(app, client)
    assert thief.get("/api/auth/me").json()["name"] == name
    assert client.post("/api/auth/logout", headers={"X-CSRF-Token": token}).status_code == 204
    r = thief.get("/api/auth/me")
    assert r.status_code == 401 and "session has ended" in r.json()["error"]["message"]


def test_a_password_change_or_disabling_ends_every_session_of_the_account(app, auth_res, client):
    from assistant.auth.accounts import remove_user, set_disabled, set_password

    name = new_user(auth_res)
    login(client, name)
    other_device = _copy_of_cookies(app, client)
    set_password(auth_res.db, name, "another-long-password")
    assert other_device.get("/api/auth/me").status_code == 401
    assert client.get("/api/auth/me").status_code == 401
    login(client, name, "another-long-password")
    set_disabled(auth_res.db, name, True)
    assert client.get("/api/auth/me").status_code == 401
    set_disabled(auth_res.db, name, False)
    assert login(client, name, "another-long-password").status_code == 200
    remove_user(auth_res.db, name)
    assert client.get("/api/auth/me").status_code == 401
    assert login(client, name, "another-long-password").status_code == 401


def test_repeated_failed_sign_ins_make_that_account_wait_from_that_address(auth_res, client):
    name, other = new_user(auth_res), new_user(auth_res)
    limit = auth_res.settings.auth.login_max_failures
    for _ in range(limit):
        assert login(client, name, "wrong-password-guess").status_code == 401
    r = login(client, name)  # even the right password now waits, from this address (back-off, not a lock)
    assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_attempts"
    assert int(r.headers["retry-after"]) == round(auth_res.settings.auth.login_backoff_base_s)
    # The name with white space around it is the same account, not ten more guesses.
    for padded in (f"{name} ", f"\t{name}\n"):
        assert login(client, padded).status_code == 429
    assert login(client, other).status_code == 200  # other accounts are not affected


def test_pages_and_api_answers_forbid_framing_and_foreign_script(client):
    for path in ("/", "/healthz", "/api/auth/me"):
        r = client.get(path)
        assert r.headers["x-frame-options"] == "DENY", path
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
        assert r.headers["x-content-type-options"] == "nosniff"
