"""Single sign-on against a real OpenID Connect issuer (oidc-provider-mock: Flask + Authlib's server side).

The issuer runs in a thread on localhost; the app discovers it, redirects, exchanges the code over HTTP
and verifies the signed ID token; IdP groups are mapped to local groups on every sign-in.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from oidc_provider_mock import run_server_in_thread

from assistant.api.app import create_app
from assistant.auth.accounts import add_member, create_user
from tests.conftest import make_settings, open_resources

GROUP_MAP = {"idp-finance": "finance", "idp-security": "security"}


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with run_server_in_thread() as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def sso(issuer, tmp_path_factory) -> Iterator[tuple[TestClient, object]]:
    settings = make_settings(
        tmp_path_factory.mktemp("oidc") / "var",
        oidc_issuer_url=issuer, oidc_client_id="assistant", oidc_client_secret="test-client-secret",
        oidc_group_map=GROUP_MAP,
    )
    res = open_resources(settings)
    with TestClient(create_app(settings, resources=res)) as client:
        yield client, res
    res.close()


def set_idp_user(issuer: str, sub: str, claims: dict) -> None:
    r = httpx.put(f"{issuer}/users/{sub}", json=claims)
    assert r.status_code == 204, r.text


def sso_login(client: TestClient, sub: str):
    """The browser's round trip: app -> issuer (the user picks `sub`) -> app's callback."""
    client.cookies.clear()
    start = client.get("/api/auth/oidc/login", follow_redirects=False)
    assert start.status_code == 302, start.text
    authorize_url = start.headers["location"]
    approved = httpx.post(authorize_url, data={"sub": sub}, follow_redirects=False)
    assert approved.status_code == 302, approved.text
    back = urlsplit(approved.headers["location"])
    return client.get(f"{back.path}?{back.query}", follow_redirects=False)


def test_sign_in_maps_idp_groups_to_local_groups(issuer, sso):
    client, res = sso
    sub = f"sub-{uuid.uuid4().hex[:8]}"
    name = f"carol-{sub[-4:]}"
    set_idp_user(issuer, sub, {"preferred_username": name, "email": f"{name}@example.com",
                              "groups": ["idp-finance", "idp-unmapped"]})
    done = sso_login(client, sub)
    assert done.status_code == 303 and done.headers["location"] == "/"
    me = client.get("/api/auth/me").json()
    assert me["name"] == name and me["groups"] == ["finance"] and me["auth"] == "session" and me["csrf_token"]

    # A locally granted group survives; IdP-owned groups follow the claim at the next sign-in.
    add_member(res.db, name, "book-club")
    set_idp_user(issuer, sub, {"preferred_username": name, "groups": ["idp-security"]})
    assert sso_login(client, sub).status_code == 303
    assert client.get("/api/auth/me").json()["groups"] == ["book-club", "security"]


def test_an_idp_user_cannot_take_over_a_local_account(issuer, sso):
    client, res = sso
    name = f"dave-{uuid.uuid4().hex[:6]}"
    create_user(res.db, name, password="a-local-password")
    sub = f"sub-{uuid.uuid4().hex[:8]}"
    set_idp_user(issuer, sub, {"preferred_username": name, "groups": ["idp-finance"]})
    r = sso_login(client, sub)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    assert client.get("/api/auth/me").status_code == 401


def test_a_preprovisioned_account_is_linked_on_first_sign_in(issuer, sso):
    client, res = sso
    name = f"erin-{uuid.uuid4().hex[:6]}"
    create_user(res.db, name, groups=["ops"])  # no password: waits for single sign-on
    sub = f"sub-{uuid.uuid4().hex[:8]}"
    set_idp_user(issuer, sub, {"preferred_username": name})
    assert sso_login(client, sub).status_code == 303
    assert client.get("/api/auth/me").json()["groups"] == ["ops"]


def test_a_forged_callback_is_refused(sso):
    client, _ = sso
    client.cookies.clear()
    client.get("/api/auth/oidc/login", follow_redirects=False)
    r = client.get("/api/auth/oidc/callback?code=forged&state=forged", follow_redirects=False)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    assert client.get("/api/auth/me").status_code == 401
    assert client.get("/api/auth/providers").json() == {"password": True, "oidc": True}
