"""A ticket reply's confidence in [0, 1], from the retrieval evidence and the grounding of the reply.

    confidence = supported_share * (EVIDENCE_FLOOR + (1 - EVIDENCE_FLOOR) * evidence)

`supported_share` is the share of the generated sentences that the grounding check found supported by
the source they cite (`Answerer`'s `done` event, `grounding`); unsupported sentences are dropped from
the reply and lower the confidence. `evidence` is how well the best cited chunk matches the ticket: the
share of the ticket's index terms it contains (`RetrievedChunk.coverage`), or, where the embedding model's
cosine means something and was calibrated (`AbstentionRule.confident_relevance` finite), the cosine
scaled between the abstention floor and the confident cosine, whichever is larger; it is then lowered
by the share of the ticket's terms that no readable document contains (`Retrieval.unknown_terms`).
A reply without a citation, or declined, has confidence 0. The figures behind the threshold are in
docs/helpdesk.md and `bench/bench_helpdesk.py` (reliability table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from assistant.retrieval import RetrievedChunk
from assistant.retrieval.abstention import AbstentionRule
from assistant.retrieval.retriever import Retrieval

# A fully supported reply resting on weak lexical evidence still gets this much: the grounding check
# has already verified every sentence against its passage.
EVIDENCE_FLOOR = 0.4
# How much a ticket's unknown terms (found in no readable document) weigh against the evidence.
UNKNOWN_TERMS_WEIGHT = 0.5


@dataclass(frozen=True)
class Evidence:
    """What a confidence was computed from: `evidence` in [0, 1] (best cited chunk), the chunk it came
    from, the ticket's `unknown_share` of terms found nowhere, and the grounding `supported_share`."""

    evidence: float
    chunk_id: str | None
    coverage: float
    relevance: float
    unknown_share: float
    supported_share: float

    def to_dict(self) -> dict:
        return {
            "evidence": round(self.evidence, 4), "chunk_id": self.chunk_id, "coverage": round(self.coverage, 4),
            "relevance": round(self.relevance, 4), "unknown_share": round(self.unknown_share, 4),
            "supported_share": round(self.supported_share, 4),
        }


def chunk_evidence(chunk: RetrievedChunk, rule: AbstentionRule) -> float:
    """How well one chunk matches the question, in [0, 1]: its term coverage, or its cosine scaled
    from `rule.min_relevance` (0) to `rule.confident_relevance` (1) when that is larger and the cosine
    is calibrated for the model (finite `confident_relevance`, a semantic match)."""
    score = chunk.coverage
    if chunk.semantic and math.isfinite(rule.confident_relevance) and rule.confident_relevance > rule.min_relevance:
        scaled = (chunk.relevance - rule.min_relevance) / (rule.confident_relevance - rule.min_relevance)
        score = max(score, scaled)
    return min(1.0, max(0.0, score))


def reply_evidence(
    retrieval: Retrieval, cited_chunk_ids: Sequence[str], rule: AbstentionRule, *, supported_share: float
) -> Evidence:
    """The evidence behind a reply: the best of the cited chunks found in `retrieval` (all of its first
    `rule.top_n` chunks when none of them is, e.g. a merged source), penalised by unknown terms.

    Args:
        retrieval: the ticket's retrieval as the requester.
        cited_chunk_ids: the chunk IDs the reply's citations name.
        supported_share: the grounding check's share of supported sentences, in [0, 1].
    """
    cited = [c for c in retrieval.chunks if c.chunk_id in set(cited_chunk_ids)] or retrieval.chunks[: rule.top_n]
    unknown = len(retrieval.unknown_terms) / retrieval.query_terms if retrieval.query_terms else 0.0
    if not cited:
        return Evidence(0.0, None, 0.0, 0.0, unknown, supported_share)
    best = max(cited, key=lambda c: chunk_evidence(c, rule))
    score = chunk_evidence(best, rule) * (1.0 - UNKNOWN_TERMS_WEIGHT * min(1.0, unknown))
    return Evidence(score, best.chunk_id, best.coverage, best.relevance, unknown, supported_share)


def confidence(evidence: Evidence) -> float:
    """`supported_share * (EVIDENCE_FLOOR + (1 - EVIDENCE_FLOOR) * evidence)`, in [0, 1]."""
    value = evidence.supported_share * (EVIDENCE_FLOOR + (1.0 - EVIDENCE_FLOOR) * evidence.evidence)
    return round(min(1.0, max(0.0, value)), 4)
