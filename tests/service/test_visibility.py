"""The one rule for stored text (`assistant.core.visibility`), on SQLite and PostgreSQL: shown only to a
viewer who may read every document it cited; a deleted document counts for its asker alone."""

from __future__ import annotations

import uuid

from assistant.core.db.models import Document, Source, utcnow
from assistant.core.principals import Principal
from assistant.core.visibility import Cited, Visibility


def _document(db, acl: list[str], *, deleted: bool = False) -> str:
    doc_id = str(uuid.uuid4())
    with db.session() as session:
        source = Source(uri=f"file:///visibility-{doc_id}")
        session.add(source)
        session.flush()
        session.add(Document(id=doc_id, source_id=source.id, path=f"{doc_id}.md", uri=f"file:///v/{doc_id}.md",
                             acl=acl, status="done", deleted_at=utcnow() if deleted else None))
    return doc_id


MEMBER = Principal(name="mira", groups=frozenset({"vault"}), user_id=1)
ADMIN = Principal(name="adam", is_admin=True, user_id=2)
AUDITOR = Principal(name="audrey", is_auditor=True, user_id=3)


def test_text_is_shown_only_to_readers_of_every_cited_document(db):
    open_doc, vault_doc = _document(db, ["everyone"]), _document(db, ["group:vault"])
    for viewer, expected in ((MEMBER, True), (ADMIN, False), (AUDITOR, False)):
        rule = Visibility(db, viewer)
        assert rule.may_see(Cited()) is True  # it cited nothing
        assert rule.may_see(Cited(doc_ids=(open_doc,))) is True
        assert rule.may_see(Cited(doc_ids=(open_doc, vault_doc)), asked_by=1) is expected, viewer.name
    assert Visibility(db, AUDITOR, full=True).may_see(Cited(doc_ids=(vault_doc,)))
    assert Visibility(db, MEMBER).may_see(Cited.of_citations([{"source": f"{vault_doc}.md"}]))
    assert not Visibility(db, ADMIN).may_see(Cited.of_citations([{"source": f"{vault_doc}.md"}]))


def test_a_deleted_or_unknown_document_counts_only_for_the_asker(db):
    gone, never = _document(db, ["everyone"], deleted=True), str(uuid.uuid4())
    for cited in (Cited(doc_ids=(gone,)), Cited(doc_ids=(never,)), Cited(unresolved=True)):
        assert Visibility(db, MEMBER).may_see(cited, asked_by=1)
        assert Visibility(db, MEMBER).may_see(cited, asked_by="mira")
        assert not Visibility(db, ADMIN).may_see(cited, asked_by=1)


def test_a_private_upload_is_named_for_its_owner_only(db):
    assert Visibility(db, MEMBER).may_see_upload("user:mira", owner_id=1)
    assert not Visibility(db, ADMIN).may_see_upload("user:mira", owner_id=1)
    assert Visibility(db, MEMBER).may_see_upload("group:vault", owner_id=9)
    assert not Visibility(db, ADMIN).may_see_upload("group:vault", owner_id=9)
    assert Visibility(db, ADMIN).may_see_upload("everyone", owner_id=9)
