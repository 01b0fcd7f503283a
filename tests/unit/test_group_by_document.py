"""Results list distinct documents: a document's chunks grouped at its best chunk's place
(`retriever.group_by_document`)."""

from __future__ import annotations

from assistant.retrieval.retriever import RetrievedChunk, group_by_document


def _chunks(spec: str) -> list[RetrievedChunk]:
    # "a1 a2 b1": chunk IDs whose first letter is the document; scores fall with the position.
    return [
        RetrievedChunk(
            chunk_id=c,
            doc_id=c[0],
            chunk_index=int(c[1:]),
            text="",
            source=f"{c[0]}.md",
            uri="",
            title="",
            heading="",
            page=None,
            lang="en",
            score=1.0 - n * 0.1,
            relevance=0.5,
        )
        for n, c in enumerate(spec.split())
    ]


def test_one_page_does_not_fill_the_top_k():
    ranked = _chunks("a1 a2 a3 b1 a4 c1 d1 e1")
    out = group_by_document(ranked, 3)
    assert [c.chunk_id for c in out] == ["a1", "b1", "c1"]
    # Scores are the positions' own, still falling with the rank.
    assert [c.score for c in out] == [c.score for c in ranked[:3]]


def test_a_documents_next_chunks_follow_its_best_one_and_top_k_counts_documents():
    out = group_by_document(_chunks("a1 b1 a2 a3 c1 b2 d1"), 3, per_document=2)
    assert [c.chunk_id for c in out] == ["a1", "a2", "b1", "b2", "c1"]
    assert len({c.doc_id for c in out}) == 3


def test_fewer_documents_than_asked_returns_them_all():
    assert [c.chunk_id for c in group_by_document(_chunks("a1 a2"), 5)] == ["a1"]
    assert group_by_document([], 5) == []


def test_a_page_with_several_matching_chunks_outranks_one_with_a_single_equal_chunk():
    # b1 is a hair behind a1, but b's second chunk matches too and a's other chunks are far down.
    ranked = _chunks("a1 b1 b2 c1 d1 a2")
    assert [c.chunk_id for c in group_by_document(ranked, 3)] == ["a1", "b1", "c1"]  # best chunk alone (MaxP)
    out = group_by_document(ranked, 3, next_chunk_weight=0.5)
    assert [c.doc_id for c in out] == ["b", "a", "c"]
    assert [c.score for c in out] == [c.score for c in ranked[:3]]  # scores still fall with the rank


def test_the_second_chunk_only_breaks_near_ties():
    # a leads b by more than half of b's second chunk: a stays first.
    ranked = _chunks("a1 c1 d1 e1 b1 b2")
    out = group_by_document(ranked, 2, next_chunk_weight=0.5)
    assert [c.doc_id for c in out] == ["a", "c"]


def test_a_documents_further_chunks_are_kept_only_within_the_tie_margin():
    # Scores fall by 0.1 a position from 1.0: a2 is 10 % behind a1, a3 50 % behind it, b2 (0.4) 50 % behind b1 (0.8).
    ranked = _chunks("a1 a2 b1 c1 d1 a3 b2")
    assert [c.chunk_id for c in group_by_document(ranked, 2, per_document=3)] == ["a1", "a2", "a3", "b1", "b2"]
    out = group_by_document(ranked, 2, per_document=3, tie_margin=0.15)
    assert [c.chunk_id for c in out] == ["a1", "a2", "b1"]  # a3 and b2 (50 % behind) left out
    # No margin: a document's next chunk only when it ties its best.
    assert [c.chunk_id for c in group_by_document(ranked, 2, per_document=3, tie_margin=0.0)] == ["a1", "b1"]
