"""Pure sign-in rules: password hashing and policy, ACL matching, IdP group mapping, settings refusals."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from assistant.auth.oidc import mapped_groups
from assistant.auth.passwords import hash_password, verify_password
from assistant.core.errors import ConfigError, InvalidRequestError
from assistant.core.principals import Principal, may_read
from assistant.core.settings import Settings


def test_passwords_hash_with_argon2id_and_verify():
    hashed = hash_password("correct horse battery")
    assert hashed.startswith("$argon2id$") and hash_password("correct horse battery") != hashed  # salted
    assert verify_password(hashed, "correct horse battery")
    assert not verify_password(hashed, "correct horse batterY")
    assert not verify_password(None, "anything")
    assert not verify_password("not-a-hash", "anything")
    with pytest.raises(InvalidRequestError, match="at least 8"):
        hash_password("short")


@pytest.mark.parametrize(
    "acl,principal,allowed",
    [
        (["everyone"], Principal("x"), True),
        (["group:finance"], Principal("x"), False),
        (["group:finance"], Principal("x", groups=frozenset({"finance"})), True),
        (["group:finance"], Principal("x", is_admin=True), False),
        (["user:x"], Principal("x"), True),
        (["user:x"], Principal("y"), False),
        ([], Principal("x", groups=frozenset({"finance"})), False),
        (None, Principal("x"), False),
    ],
)
def test_may_read(acl, principal, allowed):
    assert may_read(acl, principal) is allowed


def test_idp_groups_map_to_local_groups_and_unmapped_ones_are_ignored():
    settings = Settings(_env_file=None, oidc_group_map={"Fin": "finance", "Sec": "security"}, oidc_groups_claim="roles")
    assert mapped_groups({"roles": ["Fin", "Other", "Sec"]}, settings) == ["finance", "security"]
    assert mapped_groups({"roles": "Fin"}, settings) == ["finance"]
    assert mapped_groups({}, settings) == []


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"oidc_issuer_url": "https://sso.example.com"}, "ASSISTANT_OIDC_CLIENT_ID"),
        ({"oidc_issuer_url": "sso.example.com", "oidc_client_id": "c", "oidc_client_secret": "s"}, "ASSISTANT_OIDC_ISSUER_URL"),
        ({"environment": "production", "secret_key": "r4nd0m-long-secret", "session_cookie_secure": False},
         "ASSISTANT_SESSION_COOKIE_SECURE"),
    ],
)
def test_settings_refuse_impossible_sign_in_configuration(kwargs, field):
    with pytest.raises((ConfigError, ValueError), match=field):
        Settings(_env_file=None, **kwargs)


def test_cookie_secure_defaults_to_production_only():
    assert Settings(_env_file=None).cookie_secure is False
    assert Settings(_env_file=None, environment="production", secret_key="r4nd0m-long-secret").cookie_secure is True
    assert Settings(_env_file=None, session_cookie_secure=True).cookie_secure is True


@pytest.mark.parametrize("raw, shown", [
    (b"caf\xe9.txt", "café.txt"),  # Latin-1 / Windows-1252, as a Windows tool or an old zip writes it
    (b"Gr\xfc\xdfe \x80 Preise.md", "Grüße € Preise.md"),  # 0x80 is the euro sign in Windows-1252
    (b"\x81\xe9.md", "\x81é.md"),  # a byte Windows-1252 leaves undefined: Latin-1
    ("café 报销.pdf".encode(), "café 报销.pdf"),  # UTF-8 stays as it is
])
def test_a_download_of_a_file_whose_name_is_not_utf8_keeps_its_letters(raw, shown):
    from assistant.api.routes.documents import attachment_disposition, download_name

    name = raw.decode("utf-8", "surrogateescape")  # as Path.name reads it from disk
    assert download_name(name) == shown
    assert attachment_disposition(name) == f"attachment; filename*=utf-8''{quote(shown, safe='')}"
