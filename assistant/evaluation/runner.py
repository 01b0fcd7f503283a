"""Run judged questions through retrieval (and optionally answering) and aggregate the metrics."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from assistant.answering import Answerer
from assistant.core.language import answer_language
from assistant.core.principals import Principal
from assistant.evaluation.dataset import Question
from assistant.evaluation.metrics import (
    RANKING_METRICS,
    contains_key_fact,
    document_ranking,
    mean,
    percentile_ms,
    ranking_metrics,
)
from assistant.retrieval import Retriever

# Documents retrieved per question for the ranking metrics (the retriever returns distinct documents,
# `retriever.group_by_document`; before it did, 30 chunks held fewer than 10 documents when one page's
# chunks filled the dense ranking, and recall@10 could not grow past recall@5).
DEPTH_DOCUMENTS = 10
# How an answer declines in its own words (the system prompt asks the model to say that it could not
# find the answer in the documents): a failure to find followed, within the sentence, by what was not
# found. "If you cannot find the Okta Verify app, reinstall it" is an answer, not a decline.
_DECLINES = re.compile(
    r"\b(?:could not|couldn't|cannot|can't|can not|did not|didn't|was unable to|am unable to) find\b"
    r"[^.!?\n]{0,60}?\b(?:documents?|information|answer|context|sources?|mention)"
    r"|(?:没有|未能|未)找到[^。！？\n]{0,20}?(?:相关|文档|信息|答案|内容|资料)"
    r"|找不到[^。！？\n]{0,20}?(?:相关|文档|信息|答案|内容|资料)",
    re.IGNORECASE,
)


@dataclass
class QuestionResult:
    """What happened to one question.

    Attributes:
        documents: distinct documents retrieved, best first (at most 10).
        latency_s: wall-clock seconds of the retrieval an answer makes: question embedding, fused
            query of `answerer.top_k` chunks, abstention evidence.
        gate_abstained: the abstention rule refused before generation.
        answer / cited / abstained: the generated answer, the sources its citations name (each
            once, in order) and whether the final answer declined (None when answers were skipped).
        cites_answer_file: an answer file is among the sources the answer cites with a [n] marker;
            the sources listed when the model wrote no marker do not count (they measure
            retrieval, which the ranking metrics already do).
        answer_lang / same_language: the language the answer is written in (`answer_language`;
            None for an empty answer) and whether it is the question's, declines included.
    """

    id: str
    lang: str
    answerable: bool
    documents: list[str]
    latency_s: float
    gate_abstained: bool
    metrics: dict[str, float] = field(default_factory=dict)
    answer: str | None = None
    cited: list[str] | None = None
    abstained: bool | None = None
    has_key_fact: bool | None = None
    cites_answer_file: bool | None = None
    answer_lang: str | None = None
    same_language: bool | None = None


@dataclass
class EvalReport:
    """Per-question results and aggregates per language and overall (`groups`: `en`, `zh`, `all`),
    and `warnings` about the question set (answer files the reader has no indexed document for)."""

    config: dict
    questions: list[QuestionResult]
    groups: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready form: `config`, `groups`, `warnings`, `questions`."""
        return {"config": self.config, "groups": self.groups, "warnings": self.warnings,
                "questions": [asdict(q) for q in self.questions]}


def unfound_answer_files(questions: Sequence[Question], readable: set[str]) -> list[str]:
    """One warning per answer file that names no document in `readable`.

    Such a file can never be retrieved, so its question scores 0 whatever the retriever does: the
    path is not relative to the ingested folder, the file was not ingested, or the reader may not
    open it (the warning does not say which, so it reveals nothing about unreadable documents).

    Args:
        questions: the question set.
        readable: the answer files that name an indexed document the reader may open
            (`access.readable_sources`).
    """
    return [
        f"{q.id}: answer file {path!r} is not an indexed document this reader may open; check that it is "
        "relative to the ingested folder"
        for q in questions for path in q.answer_files if path not in readable
    ]


def is_abstention(answer: str) -> bool:
    """True when an answer's text declines to answer (English or Chinese): it says, within one
    sentence, that it could not find the answer, information or documents (`_DECLINES`). A heuristic:
    a decline in other words ("the documents do not say") is not recognised."""
    return _DECLINES.search(answer) is not None


def run_eval(
    questions: Sequence[Question],
    *,
    retriever: Retriever,
    answerer: Answerer,
    principal: Principal,
    answers: bool = True,
    depth_documents: int = DEPTH_DOCUMENTS,
) -> EvalReport:
    """Evaluate `questions`: document ranking metrics, retrieval latency, abstention, and (when
    `answers`) the generated answers.

    Args:
        questions: judged questions.
        retriever: the retriever under test (its mode, weights and reranker as configured).
        answerer: decides abstention (its rule runs on the first `answerer.top_k` chunks) and, when
            `answers`, generates.
        principal: the reader; only documents they may open can be found.
        answers: generate answers (slow on CPU) besides the retrieval metrics.
        depth_documents: documents retrieved per question to rank them.

    Returns:
        The report; ranking metrics are averaged over answerable questions, abstention over
        no-answer ones, answer rates over answerable ones.
    """
    results: list[QuestionResult] = []
    # Untimed warm-up, one question per language: the first search of each loads what it needs (the
    # query runtime; jieba and the dictionary for Chinese), which is no question's latency.
    first_of_language: dict[str, Question] = {}
    for q in questions:
        first_of_language.setdefault(q.lang, q)
    # Questions the answerer searches with the chat model's translation (Chinese ones, when on) are
    # scored as they are answered: translated once each, untimed (the latency is the search's).
    translations = {
        q.question: asyncio.run(answerer.translation(q.question))
        for q in questions
        if answerer.translates(q.question)
    }
    for q in first_of_language.values():
        retriever.search(q.question, principal=principal, top_k=answerer.top_k, translation=translations.get(q.question))
    for q in questions:
        translation = translations.get(q.question)
        # Timed: the retrieval an answer makes (top_k chunks, abstention evidence, embedding included).
        started = time.perf_counter()
        retrieval = retriever.search(q.question, principal=principal, top_k=answerer.top_k, translation=translation)
        latency = time.perf_counter() - started
        chunks = retriever.search(
            q.question, principal=principal, top_k=depth_documents, evidence=False, translation=translation
        ).chunks
        results.append(
            QuestionResult(
                id=q.id, lang=q.lang, answerable=q.answerable,
                documents=document_ranking((c.source for c in chunks), depth=depth_documents),
                latency_s=latency,
                gate_abstained=answerer.abstention.abstains(retrieval),
            )
        )
    per_query = ranking_metrics({r.id: r.documents for r in results}, {q.id: q.answer_files for q in questions})
    for r in results:
        r.metrics = per_query.get(r.id, {})
    if answers:
        for q, r in zip(questions, results):
            answer = asyncio.run(answerer.answer(q.question, principal=principal))
            r.answer = answer.answer
            r.cited = list(dict.fromkeys(c.source for c in answer.citations))
            r.abstained = answer.abstained or is_abstention(answer.answer)
            r.answer_lang = answer_language(answer.answer)
            r.same_language = r.answer_lang == q.lang
            if q.answerable:
                inline = {c.source for c in answer.citations if c.inline}
                if q.must_contain_any:  # a question without key facts is not judged on them
                    r.has_key_fact = not r.abstained and contains_key_fact(answer.answer, q.must_contain_any)
                r.cites_answer_file = not r.abstained and bool(inline & set(q.answer_files))
    report = EvalReport(
        config={
            "mode": retriever.mode,
            "embedding_model": getattr(retriever.embedder, "name", ""),
            "rrf_weights": list(retriever.rrf_weights),
            "fusion": getattr(retriever, "fusion", "rrf"),
            # Interleaving applies to hybrid search only.
            "interleave_depth": getattr(retriever, "interleave_depth", 0) if retriever.mode == "hybrid" else 0,
            "prefetch_k": retriever.prefetch_k,
            "question_translation": answerer.translate_questions,
            "reranker": retriever.reranker is not None,
            "abstention": asdict(answerer.abstention),
            "answers": answers,
            "questions": len(questions),
        },
        questions=results,
    )
    for name, members in (("en", [r for r in results if r.lang == "en"]), ("zh", [r for r in results if r.lang == "zh"]), ("all", results)):
        report.groups[name] = aggregate(members)
    return report


def aggregate(results: Sequence[QuestionResult]) -> dict:
    """Means and rates over `results` (None where a rate has no question to count)."""
    judged = [r for r in results if r.answerable]
    unanswerable = [r for r in results if not r.answerable]
    out: dict = {"questions": len(results), "answerable": len(judged), "no_answer": len(unanswerable)}
    for metric in RANKING_METRICS:
        out[metric] = mean(r.metrics.get(metric, 0.0) for r in judged)
    out["latency_p50_ms"] = percentile_ms([r.latency_s for r in results], 50)
    out["latency_p95_ms"] = percentile_ms([r.latency_s for r in results], 95)
    out["gate_answer_rate"] = mean(float(not r.gate_abstained) for r in judged)
    out["gate_abstention_rate"] = mean(float(r.gate_abstained) for r in unanswerable)
    answered = [r for r in results if r.abstained is not None]
    if answered:
        out["answer_rate"] = mean(float(not r.abstained) for r in judged)
        out["abstention_rate"] = mean(float(bool(r.abstained)) for r in unanswerable)
        out["cites_answer_file"] = mean(float(bool(r.cites_answer_file)) for r in judged)
        out["has_key_fact"] = mean(float(r.has_key_fact) for r in judged if r.has_key_fact is not None)
        out["same_language"] = mean(float(bool(r.same_language)) for r in answered)
    return out
