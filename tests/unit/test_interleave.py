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
