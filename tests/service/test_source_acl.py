"""Ingesting part of a restricted source keeps the source's ACL; overlapping sources are resolved safely."""

from __future__ import annotations

import pytest

from assistant.auth.acl_manifest import AclManifest
from assistant.composition import Assistant
from assistant.core.db.models import Document
from assistant.core.errors import InvalidRequestError
from assistant.core.principals import ANONYMOUS, Principal
from ingest.pipeline import Ingestor, document_id
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

SECRET = "departments/tech-ops/process/internal-security/passwords.md"
OPEN = "departments/tech-ops/process/application_access_request.md"
MANIFEST = {"default": ["everyone"], "rules": [{"path": "departments/tech-ops/process/internal-security/**", "allow": ["group:security"]}]}


def _acl_of(res, path):
    with res.db.session() as session:
        return sorted(session.get(Document, document_id(path.resolve().as_uri())).acl)


@pytest.fixture
def restricted(tmp_path):
    folder = copy_subset(HANDBOOK, tmp_path / "share" / "docs", [SECRET, OPEN])
    res = open_resources(make_settings(tmp_path / "var"))
    ingestor = Ingestor(res)
    ingestor.sync(folder, acl=AclManifest.from_dict(MANIFEST))
    yield res, ingestor, folder
    ingestor.close()
    res.close()


def test_a_file_or_subfolder_of_a_restricted_source_keeps_its_acl(restricted):
    res, ingestor, folder = restricted
    secret = folder / SECRET
    assert _acl_of(res, secret) == ["group:security"]
    secret.write_text(secret.read_text() + "\n\nRotate the vault master key every 90 days.\n")
    [outcome] = ingestor.sync(secret)  # the file alone, no manifest given
    assert outcome.status == "done" and outcome.source == SECRET  # relative to the source, not the file name
    assert _acl_of(res, secret) == ["group:security"]
    outcomes = ingestor.sync(secret.parent)  # its folder alone: nothing else of the source is deleted
    assert [o.status for o in outcomes] == ["skipped"]
    assert _acl_of(res, secret) == ["group:security"]
    assert res.store.count(doc_id=document_id((folder / OPEN).resolve().as_uri())) > 0
    retriever = Assistant.build(res).retriever
    hits = retriever.retrieve("vault master key rotation", principal=ANONYMOUS, top_k=10)
    assert all(not h.source.endswith("passwords.md") for h in hits)
    member = Principal(name="sam", groups=frozenset({"security"}))
    assert any(h.source == SECRET for h in retriever.retrieve("vault master key rotation", principal=member, top_k=10))


def test_overlapping_sources_never_widen_an_acl_silently(restricted, tmp_path):
    res, ingestor, folder = restricted
    with pytest.raises(InvalidRequestError, match="lies inside the source"):
        ingestor.sync(folder / SECRET, acl=AclManifest.from_dict({"default": ["everyone"]}))
    with pytest.raises(InvalidRequestError, match="restrict who may read"):
        ingestor.sync(tmp_path / "share")  # a parent folder with the default ACL would open the restricted files
    assert _acl_of(res, folder / SECRET) == ["group:security"]
    outer = {"default": ["group:staff"], "rules": [{"path": "docs/" + MANIFEST["rules"][0]["path"], "allow": ["group:security"]}]}
    outcomes = ingestor.sync(tmp_path / "share", acl=AclManifest.from_dict(outer))  # explicit: takes the inner source over
    by_source = {o.source: o for o in outcomes}
    assert by_source["docs/" + SECRET].status in ("done", "skipped")
    assert _acl_of(res, folder / SECRET) == ["group:security"]
    assert _acl_of(res, folder / OPEN) == ["group:staff"]
    assert res.store.count() == sum(res.store.count(doc_id=document_id(p.resolve().as_uri())) for p in (folder / SECRET, folder / OPEN))
