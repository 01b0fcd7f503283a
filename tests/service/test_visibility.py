"""The one rule for stored text (`assistant.core.visibility`), on SQLite and PostgreSQL: shown only to a
viewer who may read every document it cited; a deleted document counts for its asker alone."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from assistant.auth.accounts import create_user
from assistant.core.db.models import Document, Source, User, utcnow
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


def test_a_members_words_on_an_answer_that_cited_nothing_need_the_members_groups(db):
    # Fresh-user trial (6 December): a finance member rated a "not found" down with a correction that
    # states a finance-only figure; as "it cited nothing", the admin outside finance read it.
    author = create_user(db, f"fin-{uuid.uuid4().hex[:6]}", groups=["vault", "ops"])
    with db.session() as session:
        author_id = session.scalar(select(User.id).where(User.name == author.name))
    viewers = {
        "outside": Principal(name="adam", is_admin=True, user_id=2),
        "one of two groups": Principal(name="vera", groups=frozenset({"vault"}), user_id=4),
        "both groups": Principal(name="bo", groups=frozenset({"vault", "ops", "x"}), user_id=5),
        "the author": Principal(name=author.name, groups=frozenset({"vault", "ops"}), user_id=author_id),
    }
    expected = {"outside": False, "one of two groups": False, "both groups": True, "the author": True}
    for who, viewer in viewers.items():
        assert Visibility(db, viewer).may_see_authored(Cited(), author_id=author_id) is expected[who], who
    open_doc = _document(db, ["everyone"])
    assert Visibility(db, viewers["outside"]).may_see_authored(Cited(doc_ids=(open_doc,)), author_id=author_id)
    assert Visibility(db, AUDITOR, full=True).may_see_authored(Cited(), author_id=author_id)
