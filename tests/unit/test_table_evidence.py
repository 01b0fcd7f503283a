"""Which questions the table path takes: a card best for the question itself, not one found through
earlier turns; and the documents that can answer instead when its query fails (issue 40, fresh-user trial)."""

from __future__ import annotations

from assistant.answering.table_answers import cards_for_question, document_evidence, table_cards
from assistant.retrieval import RetrievedChunk
from assistant.retrieval.abstention import BUILTIN_MINILM, CALIBRATED


def _chunk(chunk_id: str, heading: str, *, relevance: float = 0.5, coverage: float = 0.5) -> RetrievedChunk:
    source = "assets.xlsx" if "table" in heading else "security.md"
    return RetrievedChunk(chunk_id, f"doc-{source}", 0, "text", source, f"file:///{source}", source, heading, None,
                          "en", 1.0, relevance, coverage)


CARD = _chunk("card", "Register — table assets")
POLICY = _chunk("policy", "Password policy", relevance=0.6, coverage=0.6)
UNRELATED = _chunk("other", "Cafeteria hours", relevance=0.1, coverage=0.0)


def test_a_card_found_only_through_earlier_turns_is_not_the_questions():
    condensed = table_cards([CARD, POLICY])  # asset count + password question, searched together
    assert list(condensed) == ["assets"]
    assert cards_for_question(condensed, [POLICY, CARD]) == {}  # the password question alone: the policy first
    assert cards_for_question(condensed, [CARD, POLICY]) == condensed  # a follow-up about the table itself


def test_documents_that_support_the_question_can_answer_when_the_query_fails():
    supports = CALIBRATED[BUILTIN_MINILM].supports
    assert document_evidence([CARD, POLICY, UNRELATED]) == [POLICY, UNRELATED]
    assert document_evidence([CARD, POLICY, UNRELATED], supports=supports) == [POLICY]
    assert document_evidence([CARD, UNRELATED], supports=supports) == []  # the table alone: "not found" naming it
