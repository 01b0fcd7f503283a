"""Results list distinct documents: a document's chunks grouped at its best chunk's place
(`retriever.group_by_document`)."""

from __future__ import annotations

from assistant.retrieval.retriever import RetrievedChunk, group_by_document


def _chunks(spec: str) -> list[RetrievedChunk]:
    # "a1 a2 b1": chunk IDs whose first letter is the document; scores fall with the position.
    return [
        RetrievedChunk(chunk_id=c, doc_id=c[0], chunk_index=int(c[1:]), text="", source=f"{c[0]}.md", uri="",
                       title="", heading="", page=None, lang="en", score=1.0 - n * 0.1, relevance=0.5)
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
