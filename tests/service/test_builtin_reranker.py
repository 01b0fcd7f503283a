"""The built-in English cross-encoder (`BuiltinReranker`, ms-marco-MiniLM-L-12-v2 int8 ONNX) on a
small Qdrant Edge collection of real corpus pages, chunked and embedded by the product's own code with
the default embedder: it moves the answering page of a paraphrased English question to the first
place where the hybrid order put another page, and leaves Chinese questions in the hybrid order when
routed to English only (issue 42)."""

from __future__ import annotations

import pytest

from assistant.core.embedding.embedder import BUILTIN_E5
from assistant.core.index.payload import ChunkPayload, chunk_point, document_id
from assistant.core.language import document_language
from assistant.core.principals import ANONYMOUS
from assistant.core.vectorstore.edge import EdgeVectorStore
from assistant.retrieval import Retriever
from assistant.retrieval.crosslingual import translate
from assistant.retrieval.reranker import BUILTIN_RERANKER_LANGUAGES, BuiltinReranker, OnnxCrossEncoder
from tests.conftest import shared_embedder
from tests.corpus import DOCS_ZH, HANDBOOK

# A development-split question (tests/data/dev_questions.jsonl, en-13) whose words match a page about
# demo days ("who", "tell", "want") and whose answering page says "legal name change" and "marriage
# certificate"; the other pages are those the hybrid ranking put near it in the bench's index.
QUESTION = "I got married and took my spouse's surname: who must I tell and what proof do they want?"
ANSWER = "departments/people-talent/people-ops/process/name-changes.md"
PAGES = [
    (HANDBOOK, ANSWER),
    (HANDBOOK, "departments/engineering/demo-day.md"),
    (HANDBOOK, "company-info-and-process/communication/content_guidelines/voice_and_tone.md"),
    (HANDBOOK, "departments/tech-ops/process/buyback.md"),
    (DOCS_ZH, "log-redaction.md"),
    (DOCS_ZH, "user-account-management.md"),
]
CHINESE_QUESTION = "忘记了 root 密码怎么办？"


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from ingest.chunking import Chunker
    from ingest.readers import parse_file

    embedder = shared_embedder(BUILTIN_E5)
    chunker = Chunker(lambda t: embedder.tokenizer.encode(t, add_special_tokens=False),
                      max_tokens=embedder.max_text_tokens, chunk_tokens=embedder.chunk_tokens)
    store = EdgeVectorStore(tmp_path_factory.mktemp("reranker"), "chunks", model=BUILTIN_E5)
    store.ensure_collection(embedder.dim)
    for root, source in PAGES:
        parsed = parse_file(root / source)
        chunks = chunker.chunk(parsed)
        lang = document_language(" ".join(c.text for c in chunks[:5]))
        vectors = embedder.embed_passages([c.embed_text for c in chunks])
        uri = (root / source).as_uri()
        store.upsert([
            chunk_point(ChunkPayload(doc_id=document_id(uri), chunk_index=c.position, text=c.text, title=parsed.title,
                                     heading=c.heading, page=c.page, source=source, uri=uri, acl=["everyone"], lang=lang),
                        dense=v.tolist(), passage=c.embed_text)
            for c, v in zip(chunks, vectors)
        ])
    yield embedder, store
    store.close()


@pytest.fixture(scope="module")
def model():
    return OnnxCrossEncoder()


def _sources(embedder, store, question, reranker=None) -> list[str]:
    retriever = Retriever(store=store, embedder=embedder, translate=translate, interleave_depth=0, reranker=reranker)
    return [c.source for c in retriever.retrieve(question, principal=ANONYMOUS, top_k=len(PAGES))]


def test_the_reranker_puts_the_answering_page_first_where_the_hybrid_order_did_not(index, model):
    embedder, store = index
    hybrid = _sources(embedder, store, QUESTION)
    assert hybrid[0] != ANSWER and ANSWER in hybrid, hybrid
    reranked = _sources(embedder, store, QUESTION, BuiltinReranker(model, languages=BUILTIN_RERANKER_LANGUAGES["builtin-en"]))
    assert reranked[0] == ANSWER, reranked
    assert set(hybrid) <= set(reranked)  # reordered (and fetched deeper), nothing lost


def test_chinese_questions_keep_the_hybrid_order_when_the_reranker_is_routed_to_english(index):
    embedder, store = index
    english_only = BuiltinReranker(OnnxCrossEncoder(), languages=BUILTIN_RERANKER_LANGUAGES["builtin-en"])
    hybrid = _sources(embedder, store, CHINESE_QUESTION)
    routed = _sources(embedder, store, CHINESE_QUESTION, english_only)  # fetched deeper: it may list more pages
    assert len(hybrid) >= 2 and routed[: len(hybrid)] == hybrid, (hybrid, routed)
    assert english_only.model.pairs == 0  # the model never read a pair
    # Routed to every language, the same model does read them (and may reorder them).
    everyone = BuiltinReranker(english_only.model, languages=BUILTIN_RERANKER_LANGUAGES["builtin-all"])
    _sources(embedder, store, CHINESE_QUESTION, everyone)
    assert english_only.model.pairs >= len(hybrid)


@pytest.mark.parametrize("value, languages", [("builtin-en", {"en"}), ("builtin-all", {"en", "zh"}), ("off", None)])
def test_the_setting_composes_the_reranker_of_its_languages(tmp_path, value, languages):
    from assistant.composition import Assistant
    from tests.conftest import make_settings, open_resources

    resources = open_resources(make_settings(tmp_path / "var", reranker=value))
    try:
        reranker = Assistant.build(resources).retriever.reranker
    finally:
        resources.close()
    assert (reranker.languages if reranker else None) == languages
