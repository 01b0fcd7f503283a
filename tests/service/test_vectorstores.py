"""Qdrant Edge (embedded) and qdrant-client (server API, local mode here) give the same results."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from assistant.auth.acl_manifest import AclManifest
from assistant.core.db.models import Document
from assistant.core.principals import ANONYMOUS, Principal
from assistant.retrieval import Retriever
from ingest.pipeline import Ingestor
from tests.conftest import make_settings, open_resources
from tests.corpus import HANDBOOK

SUBSET = "departments/tech-ops/process/internal-security"
QUERIES = [
    "How long should my passwords be?",
    "Which laptop settings are required before accessing company data?",
    "report a lost or stolen device",
    "密码长度",
]


@pytest.fixture(scope="module")
def both_stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    manifest = AclManifest.from_dict({"default": ["everyone"], "rules": [{"path": "passwords.md", "allow": ["group:it"]}]})
    stores = {}
    for name, overrides in (
        ("edge", {}),
        ("qdrant", {"vector_store": "qdrant", "qdrant_path": root / "qdrant-local"}),
    ):
        res = open_resources(make_settings(root / name, **overrides))
        Ingestor(res).sync(HANDBOOK / SUBSET, acl=manifest)
        stores[name] = res
    yield stores
    for res in stores.values():
        res.close()


@pytest.mark.parametrize("mode, fusion", [("hybrid", "dbsf"), ("hybrid", "rrf"), ("dense", "dbsf"), ("sparse", "dbsf")])
@pytest.mark.parametrize("query", QUERIES)
def test_same_results_in_both_engines(both_stores, mode, fusion, query):
    results = {}
    for name, res in both_stores.items():
        retriever = Retriever(store=res.store, embedder=res.embedder, mode=mode, fusion=fusion)
        hits = retriever.retrieve(query, principal=Principal("ann", frozenset({"it"})), top_k=5)
        results[name] = [(h.chunk_id, round(h.score, 3)) for h in hits]
    assert results["edge"] == results["qdrant"]
    assert results["edge"] or mode == "sparse"


@pytest.mark.parametrize("name", ["edge", "qdrant"])
def test_acl_filter_is_inside_the_query(both_stores, name):
    res = both_stores[name]
    retriever = Retriever(store=res.store, embedder=res.embedder)
    outsider = retriever.retrieve("How long should my passwords be?", principal=ANONYMOUS, top_k=50)
    member = retriever.retrieve("How long should my passwords be?", principal=Principal("ann", frozenset({"it"})), top_k=5)
    assert outsider and "passwords.md" not in {h.source for h in outsider}
    assert member[0].source == "passwords.md"


def test_scroll_payloads_gives_every_chunk_of_a_document_with_its_acl(both_stores):
    """What the finetune dataset reads (no ACL filter: it checks `acl` itself), the same in both engines."""
    payloads = {}
    for name, res in both_stores.items():
        with res.db.session() as session:
            doc_id = session.scalar(select(Document.id).where(Document.path.like("%passwords.md")))
        payloads[name] = res.store.scroll_payloads(doc_id=doc_id)
        assert set(payloads[name]) == res.store.scroll_ids(doc_id=doc_id) and payloads[name]
        assert all(p["acl"] == ["group:it"] and p["doc_id"] == doc_id for p in payloads[name].values())
    assert payloads["edge"] == payloads["qdrant"]


def test_a_chunk_without_acl_is_never_returned(tmp_path):
    from assistant.core.vectorstore import ChunkPoint, SparseEmbedding

    for overrides in ({}, {"vector_store": "qdrant", "qdrant_path": tmp_path / "q"}):
        res = open_resources(make_settings(tmp_path / f"v{len(overrides)}", **overrides))
        try:
            res.store.ensure_collection(3)
            res.store.upsert([
                ChunkPoint("00000000-0000-0000-0000-000000000001", [1, 0, 0], SparseEmbedding([1], [1.0]), {"doc_id": "d", "text": "no acl"}),
                ChunkPoint("00000000-0000-0000-0000-000000000002", [1, 0, 0], SparseEmbedding([1], [1.0]), {"doc_id": "d", "text": "empty", "acl": []}),
            ])
            assert res.store.query(dense=[1, 0, 0], sparse=SparseEmbedding([1], [1.0]), acl_any=["everyone"]) == []
        finally:
            res.close()
