"""Chunks never exceed the embedding model's limit and keep Markdown structure and Chinese sentences."""

import pytest

from ingest.chunking import MAX_CHARS_PER_TOKEN, Chunker
from ingest.readers import ParsedDocument, Section
from tests.conftest import shared_embedder


@pytest.fixture(scope="module")
def chunker():
    e = shared_embedder()
    return Chunker(lambda t: e.tokenizer.encode(t, add_special_tokens=False), max_tokens=e.max_text_tokens)


def test_markdown_sections_and_headings(chunker):
    doc = ParsedDocument("Guide", "text/markdown", [Section("# Guide\n\nIntro.\n\n## Setup\n\nInstall it.\n\n## Use\n\nRun it.\n")], markdown=True)
    chunks = chunker.chunk(doc)
    assert [c.heading for c in chunks] == ["Guide", "Guide > Setup", "Guide > Use"]
    assert chunks[1].embed_text.startswith("Guide — Guide > Setup\n") or chunks[1].embed_text.startswith("Guide > Setup\n")
    assert [c.position for c in chunks] == [0, 1, 2]


@pytest.mark.parametrize(
    "text",
    [
        "Sentence number one is here. " * 400,
        "这是一个很长的中文句子，用来测试分块是否尊重句子边界。" * 200,
        "x" * 5000,  # one unbreakable token run
        "https://example.com/" + "a/" * 3000,
    ],
    ids=["english", "chinese", "unbreakable", "url"],
)
def test_no_chunk_exceeds_the_model_limit(chunker, text):
    chunks = chunker.chunk(ParsedDocument("T", "text/plain", [Section(text)]))
    e = shared_embedder()
    assert chunks
    for c in chunks:
        assert e.count_tokens(c.embed_text) <= e.max_text_tokens


def test_chinese_chunks_end_at_sentence_boundaries(chunker):
    text = "".join(f"第{i}条规定：员工必须在离开座位时锁定屏幕。" for i in range(300))
    chunks = chunker.chunk(ParsedDocument("T", "text/plain", [Section(text)]))
    assert len(chunks) > 1
    assert all(c.text.rstrip().endswith("。") for c in chunks[:-1])


def test_a_megabyte_without_spaces_is_cut_and_kept_whole(chunker):
    # WordPiece reads any word over 100 characters as one [UNK] token: a token count alone would pass it.
    word = "q" * 1_000_000
    chunks = chunker.chunk(ParsedDocument("T", "text/plain", [Section(word)]))
    assert len(chunks) > 100
    assert max(len(c.text) for c in chunks) <= chunker.max_tokens * MAX_CHARS_PER_TOKEN
    assert sum(len(c.text) for c in chunks) == len(word)
