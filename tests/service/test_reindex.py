"""Changing the embedding model: `reindex` fills a new collection, switches the alias, and search
keeps answering from the old collection until then (Qdrant Edge and qdrant-client local mode)."""

from __future__ import annotations

import pytest

from assistant.auth.acl_manifest import AclManifest
from assistant.core.embedding.embedder import BUILTIN_E5, BUILTIN_MINILM, Embedder
from assistant.core.errors import ConfigError, ConflictError
from assistant.core.resources import Resources
from assistant.core.vectorstore import ChunkPoint, SparseEmbedding, open_catalog, open_vector_store
from assistant.core.vectorstore.edge import EdgeVectorStore
from ingest.pipeline import Ingestor
from ingest.reindex import reindex
from tests.conftest import copy_subset, make_settings, open_resources, shared_embedder
from tests.corpus import HANDBOOK

FILES = [
    "company-info-and-process/personal-pronouns.md",
    "company-info-and-process/equality-of-opportunity.md",
    "company-info-and-process/queer.md",
]
QUESTION = "How do I share my pronouns on my Slack profile?"
PRONOUNS = "company-info-and-process/personal-pronouns.md"
# The pronouns page is for HR only: the re-index must carry the stored ACL manifest over.
MANIFEST = {"default": ["everyone"], "rules": [{"path": PRONOUNS, "allow": ["group:hr"]}]}


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return Embedder(BUILTIN_E5)


def _settings(tmp_path, kind: str, model: str):
    server = {"vector_store": "qdrant", "qdrant_path": tmp_path / "qdrant"} if kind == "qdrant" else {}
    return make_settings(tmp_path / "var", embedding_model=model, **server)


def _ingest_with_minilm(tmp_path, kind: str) -> Resources:
    folder = copy_subset(HANDBOOK, tmp_path / "docs", FILES)
    res = open_resources(_settings(tmp_path, kind, BUILTIN_MINILM))
    ingestor = Ingestor(res)
    try:
        outcomes = ingestor.sync(folder, acl=AclManifest.from_dict(MANIFEST))
    finally:
        ingestor.close()
    assert {o.status for o in outcomes} == {"done"}
    return res


def _search(store, embedder, principals=("group:hr",)):
    vector = embedder.embed_query(QUESTION).tolist()
    return store.query(dense=vector, sparse=None, acl_any=list(principals), mode="dense", limit=3, with_dense=True)


def _check_new_collection(store, e5: Embedder, res_old_count: int) -> None:
    assert store.model == BUILTIN_E5
    assert store.count() == res_old_count  # the same chunks, embedded again
    hits = _search(store, e5)
    assert hits[0].payload["source"] == PRONOUNS
    assert len(hits[0].dense) == e5.dim
    assert PRONOUNS not in {h.payload["source"] for h in _search(store, e5, ["everyone"])}
    with pytest.raises(ConflictError, match="dimensional"):
        store.ensure_collection(e5.dim + 16)


def test_edge_reindex_beside_a_serving_process(tmp_path, e5):
    serving = _ingest_with_minilm(tmp_path, "edge")  # stands for `assistant serve`, open throughout
    old, old_count = serving.store.collection, serving.store.count()
    assert old.startswith("chunks-all-minilm-l6-v2-")
    assert _search(serving.store, serving.embedder)[0].payload["source"] == PRONOUNS
    new_settings = _settings(tmp_path, "edge", BUILTIN_E5)
    with pytest.raises(ConfigError, match="assistant reindex"):
        open_vector_store(new_settings)
    catalog = open_catalog(new_settings)
    during = {}

    def before_switch(new: str) -> None:
        during["alias"] = catalog.resolve("chunks")
        during["hits"] = _search(serving.store, serving.embedder)

    result = reindex(new_settings, before_switch=before_switch)

    assert during["alias"] == old and during["hits"][0].payload["source"] == PRONOUNS
    assert (result.old, result.model, result.dim, result.sources) == (old, BUILTIN_E5, e5.dim, 1)
    assert result.files == {"done": len(FILES)} and not result.old_dropped  # the server still holds it
    assert catalog.resolve("chunks") == result.new != old
    assert catalog.record(result.new).model == BUILTIN_E5
    assert _search(serving.store, serving.embedder)[0].payload["source"] == PRONOUNS  # pinned until restart
    serving.close()
    assert catalog.drop(old) and old not in catalog.names()

    restarted = Resources.open(new_settings)
    try:
        assert restarted.store.collection == result.new
        _check_new_collection(restarted.store, e5, old_count)
    finally:
        restarted.close()
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2"):  # a server left on the old model refuses
        open_vector_store(_settings(tmp_path, "edge", BUILTIN_MINILM))
    same_dim_other_model = EdgeVectorStore(new_settings.edge_path, result.new, model=BUILTIN_MINILM)
    try:
        with pytest.raises(ConflictError, match="reindex"):
            same_dim_other_model.ensure_collection(shared_embedder().dim)
    finally:
        same_dim_other_model.close()


def test_server_store_reindex_switches_a_real_alias(tmp_path, e5):
    res = _ingest_with_minilm(tmp_path, "qdrant")
    old, old_count = res.store.collection, res.store.count()
    res.close()  # local mode: one client per folder, so the reader below shares the catalog's client
    new_settings = _settings(tmp_path, "qdrant", BUILTIN_E5)
    catalog = open_catalog(new_settings)
    try:
        during = {}

        def before_switch(new: str) -> None:
            reader = catalog.open(catalog.resolve("chunks"), model=BUILTIN_MINILM)
            during["collection"], during["hits"] = reader.collection, _search(reader, shared_embedder())
            reader.close()

        result = reindex(new_settings, catalog=catalog, before_switch=before_switch)

        assert during["collection"] == old and during["hits"][0].payload["source"] == PRONOUNS
        assert result.old == old and result.old_dropped and old not in catalog.names()
        aliases = {a.alias_name: a.collection_name for a in catalog.client.get_aliases().aliases}
        assert aliases == {"chunks": result.new}
        _check_new_collection(catalog.open(result.new, model=BUILTIN_E5), e5, old_count)
    finally:
        catalog.close()


def test_a_collection_made_before_aliases_keeps_working_until_reindexed(tmp_path):
    settings = make_settings(tmp_path / "var")
    legacy = EdgeVectorStore(settings.edge_path, "chunks")  # no alias record, no model recorded
    legacy.ensure_collection(384)
    legacy.upsert([ChunkPoint("00000000-0000-0000-0000-000000000001", [1.0] + [0.0] * 383,
                              SparseEmbedding([1], [1.0]), {"doc_id": "d", "acl": ["everyone"]})])
    legacy.close()
    store = open_vector_store(settings)
    assert (store.collection, store.count()) == ("chunks", 1)
    store.close()

    result = reindex(settings)  # no sources: an empty collection for the configured model

    assert (result.old, result.old_dropped, result.sources) == ("chunks", True, 0)
    catalog = open_catalog(settings)
    assert catalog.names() == [result.new] and catalog.resolve("chunks") == result.new
