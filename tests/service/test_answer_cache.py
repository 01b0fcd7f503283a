"""The answer cache against real SQL and Redis: per-scope keys, invalidation by document changes."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import yaml

from assistant.answering.cache import AnswerCache, MemoryStore, RedisStore, index_version, normalise_question
from assistant.answering.events import Done
from assistant.auth.acl_manifest import AclManifest
from assistant.core.db.documents import readable_versions
from assistant.core.principals import Principal
from ingest.pipeline import Ingestor, document_id
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import HANDBOOK

FILES = [
    "departments/tech-ops/process/internal-security/passwords.md",
    "departments/tech-ops/process/internal-security/computer-standards.md",
]
REDIS_URL = "redis://127.0.0.1:6379/15"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("answer-cache")
    docs = copy_subset(HANDBOOK, root / "docs", FILES)
    manifest = root / "acl.yaml"
    manifest.write_text(yaml.safe_dump({"default": ["group:it"], "rules": []}))
    res = open_resources(make_settings(root / "var"))
    outcomes = Ingestor(res).sync(docs, acl=AclManifest.load(manifest))
    ids = {o.source: document_id(o.uri) for o in outcomes}
    yield res, docs, manifest, ids
    res.close()


def make_cache(res, kind: str) -> AnswerCache:
    store = MemoryStore(100) if kind == "memory" else RedisStore(REDIS_URL)
    return AnswerCache(
        store, versions=lambda ids, p: readable_versions(res.db, ids, principal=p),
        index_version=index_version("test", uuid.uuid4().hex), ttl_s=60,
    )


def it_member() -> Principal:
    return Principal(name=f"u-{uuid.uuid4().hex[:6]}", groups=frozenset({"it"}))


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_entries_are_per_scope_and_survive_only_unchanged_documents(indexed, kind):
    res, docs, manifest, ids = indexed
    cache = make_cache(res, kind)
    alice, bob = it_member(), it_member()
    outsider = Principal(name=f"o-{uuid.uuid4().hex[:6]}")
    doc = ids[FILES[1]]
    assert cache.put("Which laptop do I get?", principal=alice, answer="A MacBook [1].", citations=[], doc_ids=[doc])
    assert cache.get("  which LAPTOP do i get ", principal=alice).answer == "A MacBook [1]."
    assert cache.get("Which laptop do I get?", principal=bob) is None  # same groups, another scope
    assert cache.get("Which laptop do I get?", principal=outsider) is None
    # An outsider cannot even store an answer resting on a document it may not read.
    assert not cache.put("Which laptop do I get?", principal=outsider, answer="x", citations=[], doc_ids=[doc])

    path = docs / FILES[1]
    original = path.read_text()
    path.write_text(original + "\n\nEvery laptop is replaced after three years.\n")
    try:
        Ingestor(res).sync(docs, acl=AclManifest.load(manifest))
        assert cache.get("Which laptop do I get?", principal=alice) is None  # stale: dropped
        assert cache.store.get(cache.key("Which laptop do I get?", alice)) is None
    finally:
        path.write_text(original)
        Ingestor(res).sync(docs, acl=AclManifest.load(manifest))


def test_a_narrowed_acl_makes_the_entry_stale(indexed, tmp_path):
    res, docs, _manifest, ids = indexed
    cache = make_cache(res, "memory")
    alice = it_member()
    doc = ids[FILES[0]]
    assert cache.put("password length?", principal=alice, answer="15 [1]", citations=[], doc_ids=[doc])
    narrowed = tmp_path / "acl.yaml"
    narrowed.write_text(yaml.safe_dump({"default": ["group:it"], "rules": [{"path": FILES[0], "allow": ["group:sec"]}]}))
    try:
        Ingestor(res).sync(docs, acl=AclManifest.load(narrowed))
        assert cache.get("password length?", principal=alice) is None
    finally:
        Ingestor(res).sync(docs, acl=AclManifest.load(_manifest))


def test_an_unreachable_redis_is_a_miss_not_an_error(indexed):
    res, *_ = indexed
    cache = AnswerCache(
        RedisStore("redis://127.0.0.1:1/0"), versions=lambda ids, p: readable_versions(res.db, ids, principal=p),
        index_version="v", ttl_s=60,
    )
    assert cache.get("anything", principal=it_member()) is None


def test_normalisation_keeps_meaning():
    assert normalise_question("  How   long?? ") == normalise_question("how long") == "how long"
    assert normalise_question("密码多长？") == "密码多长"
    assert normalise_question("C++ or C#?") != normalise_question("C or C?")


def _done(answerer, question: str, principal: Principal) -> tuple[Done, str | None]:
    """The `done` event of `answerer.stream`, and the adapter it names as the one that wrote the answer."""

    async def go():
        events = [e async for e in answerer.stream(question, principal=principal)]
        return events[-1], events[-1].adapter

    return asyncio.run(go())


def test_an_answer_is_reused_only_for_readers_of_the_adapter_that_wrote_it(indexed):
    """The product's composition (adapter router over the registry, answer cache): an answer the canary
    wrote is a miss once the reader is routed to live, and a retired adapter's answers are never served."""
    from assistant.adapters import store as registry_db
    from assistant.composition import Assistant

    res, _docs, _manifest, ids = indexed
    answerer = Assistant.build(res).answerer
    router = answerer.llm
    name = f"cache-canary-{uuid.uuid4().hex[:6]}"
    canary = registry_db.add_adapter(res.db, name=name, audience="everyone", base_model="b", snapshot_id=None,
                                     job_id=None, hyperparameters={})
    registry_db.promote(res.db, canary.id, by="test", to="canary")
    try:
        router.refresh()
        alice = it_member()
        # A question no document answers: a miss ends in an abstention, without loading the model.
        question = f"Qwix {uuid.uuid4().hex[:8]} florbate zennik?"
        router.canary_share = 1.0
        assert answerer.serving_adapter(alice) == name
        assert answerer.cache.put(question, principal=alice, answer="Canary says 7 [1].", citations=[],
                                  doc_ids=[ids[FILES[0]]], adapter=answerer.serving_adapter(alice))
        done, recorded = _done(answerer, question, alice)
        assert done.cached and done.answer == "Canary says 7 [1]." and recorded == name
        router.canary_share = 0.0  # the same reader, now answered by the live side (the base model)
        done, recorded = _done(answerer, question, alice)
        assert not done.cached and done.answer != "Canary says 7 [1]." and recorded is None
        # Promoted to live, the adapter answers alice again, and its answer is hers again.
        registry_db.promote(res.db, canary.id, by="test", to="live")
        router.refresh()
        assert _done(answerer, question, alice)[0].cached
        # Rolled back (retired, unloaded): its answers are never served again.
        registry_db.rollback(res.db, audience="everyone", by="test")
        router.refresh()
        assert answerer.serving_adapter(alice) is None
        assert not _done(answerer, question, alice)[0].cached
    finally:
        if registry_db.get_adapter(res.db, canary.id).status in ("canary", "live"):
            registry_db.set_status(res.db, canary.id, "retired", by="test")
