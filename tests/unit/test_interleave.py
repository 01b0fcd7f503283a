"""Interleaving a fused ranking with the single rankings it came from (`retriever.interleave`)."""

from __future__ import annotations

from assistant.core.vectorstore import ScoredChunk
from assistant.retrieval.retriever import interleave


def _hits(spec: str, score: float) -> list[ScoredChunk]:
    # "a1 b1 a2": chunk IDs whose first letter is the document.
    return [ScoredChunk(id=c, score=score - n * 0.01, payload={"doc_id": c[0]}) for n, c in enumerate(spec.split())]


def _ids(hits: list[ScoredChunk]) -> list[str]:
    return [h.id for h in hits]


def test_the_fused_leader_then_the_rankings_in_turn_from_new_documents():
    fused = _hits("a1 b1 a2 c1 d1", 2.0)
    keyword = _hits("a3 e1 e2 f1 h1", 30.0)  # a3: document a is already placed
    dense = _hits("b2 g1 b3", 0.6)
    # Default turns: keyword, dense, keyword, keyword, dense...
    out = interleave(fused, [keyword, dense], depth=5)
    assert _ids(out[:5]) == ["a1", "e1", "b2", "f1", "h1"]
    # Then the fused order, without repeating a placed chunk.
    assert _ids(out[5:]) == ["b1", "a2", "c1", "d1"]
    # Scores are the fused ranking's, position by position: one scale, falling with the rank.
    assert [h.score for h in out] == [h.score for h in fused] + [fused[-1].score] * 4
    assert [h.id for h in fused] == ["a1", "b1", "a2", "c1", "d1"]  # inputs untouched
    # Strict alternation when asked for.
    assert _ids(interleave(fused, [keyword, dense], depth=5, turns=(0, 1))[:5]) == ["a1", "e1", "b2", "f1", "g1"]


def test_a_ranking_that_runs_out_passes_its_turns_to_the_other():
    out = interleave(_hits("a1 b1", 2.0), [_hits("a2", 9.0), _hits("c1 d1 e1", 0.5)], depth=4)
    assert _ids(out) == ["a1", "c1", "d1", "e1", "b1"]


def test_depth_one_is_the_fused_order():
    fused = _hits("a1 b1 c1", 2.0)
    assert _ids(interleave(fused, [_hits("z1", 9.0)], depth=1)) == ["a1", "b1", "c1"]


def _chunks(spec: str):
    # "zh:a en:b": chunks in order, language then document.
    from assistant.retrieval.retriever import RetrievedChunk

    return [
        RetrievedChunk(chunk_id=f"{doc}{n}", doc_id=doc, chunk_index=n, text="", source=f"{doc}.md", uri="", title="",
                       heading="", page=None, lang=lang, score=1.0 - n * 0.1, relevance=0.5)
        for n, (lang, doc) in enumerate(item.split(":") for item in spec.split())
    ]


def test_the_best_chunk_in_the_translations_language_takes_the_second_place_from_a_crowding_page():
    from assistant.retrieval.retriever import other_language_at

    chunks = _chunks("zh:a zh:a zh:c en:d zh:e en:f")
    out = other_language_at(chunks, 2, "zh")
    assert [c.doc_id for c in out] == ["a", "d", "a", "c", "e", "f"]
    assert [c.score for c in out] == [c.score for c in chunks]  # scores stay those of the positions
    # An English chunk already there or ahead, no other language, or the first place asked: unchanged.
    assert [c.doc_id for c in other_language_at(_chunks("zh:a en:b zh:c"), 2, "zh")] == ["a", "b", "c"]
    assert [c.doc_id for c in other_language_at(_chunks("zh:a zh:a zh:c"), 2, "zh")] == ["a", "a", "c"]
    assert [c.doc_id for c in other_language_at(chunks, 1, "zh")] == [c.doc_id for c in chunks]
    # Two Chinese pages lead: the second may be the answer, and keeps its place.
    assert [c.doc_id for c in other_language_at(_chunks("zh:a zh:b en:c"), 2, "zh")] == ["a", "b", "c"]
    # Only the question's own language gives up a place: an English leader keeps the Chinese question's
    # English second.
    assert [c.doc_id for c in other_language_at(_chunks("en:a en:a zh:c"), 2, "zh")] == ["a", "a", "c"]
    # An English question's page makes room for a Chinese one; an unset language reads as English.
    assert [c.doc_id for c in other_language_at(_chunks("en:a :a en:a zh:d"), 3, "en")] == ["a", "a", "d", "a"]
