"""Accounts, groups, API keys, single sign-on claims, document access and audit against real SQL.

Every test runs on SQLite and on PostgreSQL (a fresh database per test).
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from assistant.auth.accounts import (
    add_member,
    authenticate_password,
    create_user,
    ensure_bootstrap_admin,
    list_users,
    remove_member,
    set_password,
)
from assistant.auth.api_keys import create_api_key, principal_for_api_key, revoke_api_key
from assistant.auth.oidc import sign_in_oidc_user
from assistant.compliance.audit import recent_events, record_event
from assistant.core.db.documents import readable_document
from assistant.core.db.identity import load_principal, load_principal_by_id
from assistant.core.db.models import ApiKey, Document, Source, User
from assistant.core.db.session import Database
from assistant.core.errors import AuthenticationError, ConflictError, InvalidRequestError, NotFoundError
from assistant.core.principals import Principal
from tests.conftest import make_settings


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else f"sqlite:///{tmp_path / 'id.db'}"
    database = Database(url)
    database.migrate()
    yield database
    database.dispose()


def test_local_accounts_hash_passwords_and_check_them(db):
    create_user(db, "alice", groups=["finance", "people"], password="correct horse battery")
    with db.session() as session:
        stored = session.scalar(select(User.password_hash).where(User.name == "alice"))
    assert stored.startswith("$argon2id$") and "correct" not in stored
    user_id = authenticate_password(db, "alice", "correct horse battery")
    assert load_principal_by_id(db, user_id) == load_principal(db, "alice")
    assert load_principal(db, "alice").acl_tokens == ["everyone", "group:finance", "group:people", "user:alice"]
    for name, password in (("alice", "wrong password!"), ("nobody", "correct horse battery")):
        with pytest.raises(AuthenticationError):
            authenticate_password(db, name, password)
    set_password(db, "alice", "another long one")
    assert authenticate_password(db, "alice", "another long one") == user_id


def test_account_rules(db):
    create_user(db, "bob")
    with pytest.raises(ConflictError):
        create_user(db, "bob")
    for bad in ("has space", "a:b", "", "everyone", "Anonymous", "../etc", "..", "a/b", "a\\b", "tab\x07"):
        with pytest.raises(InvalidRequestError):
            create_user(db, bad)
    create_user(db, "alice.smith@example.com", groups=["/staff/it"])  # e-mail names, group paths from an IdP
    with pytest.raises(ConflictError, match="differ only in case"):
        create_user(db, "BOB")
    with pytest.raises(InvalidRequestError):
        create_user(db, "carol", password="short")
    with pytest.raises(AuthenticationError):  # no local password: single sign-on only
        authenticate_password(db, "bob", "")


def test_group_names_keep_idp_paths_and_refuse_dot_segments(db):
    """Group paths as identity providers send them are kept; a name that is dots only, or a path with a
    dots-only part (`..`), is refused as user and key names are (fresh-user trial: `..` was accepted)."""
    create_user(db, "gil")
    for good in ("/eng/backend", "eng/backend", "/staff/it.ops", ".hidden", "a..b", "v1.2"):
        assert good in add_member(db, "gil", good).groups
    for bad in ("..", ".", "...", "/eng/../hr", "../hr", "/eng/..", "/eng/./backend", "nul\x00", "del\x7f"):
        with pytest.raises(InvalidRequestError, match="group name"):
            add_member(db, "gil", bad)
        with pytest.raises(InvalidRequestError, match="group name"):
            create_api_key(db, f"k-{uuid.uuid4().hex[:6]}", groups=[bad])
    assert load_principal(db, "gil").groups == {"/eng/backend", "eng/backend", "/staff/it.ops", ".hidden", "a..b", "v1.2"}


def test_memberships_apply_to_the_next_principal_load(db):
    create_user(db, "dan")
    assert load_principal(db, "dan").groups == frozenset()
    add_member(db, "dan", "legal")
    assert load_principal(db, "dan").groups == {"legal"}
    remove_member(db, "dan", "legal")
    assert load_principal(db, "dan").groups == frozenset()
    with pytest.raises(NotFoundError):
        remove_member(db, "dan", "legal")
    with pytest.raises(NotFoundError):
        add_member(db, "nobody", "legal")


def test_bootstrap_admin_only_on_an_empty_database(db):
    create_api_key(db, "early-service")  # service accounts do not count as people
    password = ensure_bootstrap_admin(db, name="admin", password=None)
    assert password and len(password) >= 16
    assert load_principal(db, "admin").is_admin
    assert authenticate_password(db, "admin", password)
    assert ensure_bootstrap_admin(db, name="admin2", password="given-password") is None
    assert [u.name for u in list_users(db) if u.is_admin] == ["admin"]


def test_api_keys_are_stored_hashed_scoped_and_revocable(db):
    created = create_api_key(db, "helpdesk", groups=["it"])
    assert created.key.startswith("ak_")
    with db.session() as session:
        row = session.scalar(select(ApiKey).where(ApiKey.name == "helpdesk"))
        assert created.key not in (row.key_hash, row.prefix) and len(row.key_hash) == 64
    principal = principal_for_api_key(db, created.key)
    assert principal.name == "helpdesk" and principal.is_service and principal.groups == {"it"}
    assert principal_for_api_key(db, created.key).user_id == principal.user_id  # last_used_at throttled write
    with pytest.raises(ConflictError):
        create_api_key(db, "helpdesk")
    for wrong in (created.key[:-1] + ("A" if created.key[-1] != "A" else "B"), "ak_x_y", "nope"):
        with pytest.raises(AuthenticationError):
            principal_for_api_key(db, wrong)
    revoke_api_key(db, "helpdesk")
    with pytest.raises(AuthenticationError):
        principal_for_api_key(db, created.key)
    with pytest.raises(NotFoundError):
        revoke_api_key(db, "helpdesk")
    again = create_api_key(db, "helpdesk", groups=["finance"])  # a revoked name can be issued again
    replacement = principal_for_api_key(db, again.key)
    assert again.key != created.key and replacement.name == "helpdesk"
    # The replacement has the groups it was created with, not the revoked key's as well.
    assert replacement.groups == {"finance"} and again.groups == ("finance",)
    create_user(db, "erin")
    with pytest.raises(ConflictError):
        create_api_key(db, "erin")


def test_oidc_claims_create_the_user_and_sync_mapped_groups(db, tmp_path):
    settings = make_settings(tmp_path, oidc_issuer_url="https://sso.example.com", oidc_client_id="c",
                             oidc_client_secret="s", oidc_group_map={"Finance-Team": "finance", "Sec": "security"})
    claims = {"iss": "https://sso.example.com", "sub": "42", "preferred_username": "fay",
              "groups": ["Finance-Team", "Unmapped"]}
    uid = sign_in_oidc_user(db, claims, settings=settings)
    assert load_principal_by_id(db, uid).groups == {"finance"}
    add_member(db, "fay", "local-only")
    assert sign_in_oidc_user(db, {**claims, "groups": ["Sec"]}, settings=settings) == uid
    assert load_principal_by_id(db, uid).groups == {"security", "local-only"}
    create_user(db, "gus", password="a local password")
    with pytest.raises(AuthenticationError):
        sign_in_oidc_user(db, {**claims, "sub": "43", "preferred_username": "gus"}, settings=settings)
    with pytest.raises(AuthenticationError):
        sign_in_oidc_user(db, {"preferred_username": "x"}, settings=settings)


def test_documents_open_only_to_readers_in_their_acl(db):
    with db.session() as session:
        source = Source(uri=f"/src/{uuid.uuid4().hex}")
        session.add(source)
        session.flush()
        for doc_id, acl, status in (("d-fin", ["group:finance"], "done"), ("d-all", ["everyone"], "done"),
                                    ("d-none", [], "done"), ("d-failed", ["everyone"], "failed")):
            session.add(Document(id=doc_id, source_id=source.id, path=f"{doc_id}.md", uri=f"file:///x/{doc_id}.md",
                                 acl=acl, status=status))
    outsider, member = Principal("olivia"), Principal("fran", groups=frozenset({"finance"}))
    admin = Principal("ada", is_admin=True)
    assert readable_document(db, "d-fin", principal=member).source == "d-fin.md"
    assert readable_document(db, "d-all", principal=outsider).local_path.name == "d-all.md"
    for doc_id, who in (("d-fin", outsider), ("d-fin", admin), ("d-none", member), ("d-failed", member), ("x", member)):
        with pytest.raises(NotFoundError) as err:
            readable_document(db, doc_id, principal=who)
        assert err.value.message == f"document '{doc_id}' not found"


def test_audit_events_keep_who_asked_what_and_the_chunks(db):
    record_event(db, principal=Principal("hal"), action="search", query="q1", chunk_ids=["c1", "c2"], details={"top_k": 2})
    record_event(db, principal=Principal("ivy"), action="chat", query="q2", chunk_ids=[])
    event = recent_events(db, principal="hal")[0]
    assert (event["action"], event["query"], event["chunk_ids"], event["details"]) == ("search", "q1", ["c1", "c2"], {"top_k": 2})
    assert [e["principal"] for e in recent_events(db, limit=2)] == ["ivy", "hal"]
