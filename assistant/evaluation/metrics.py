"""Ranking metrics (computed by trec_eval through `pytrec_eval`) and answer metrics for judged questions.

Judgements are at document level: a retrieved chunk is a hit when its document is one of the question's
answer files. The chunk ranking is first turned into a document ranking (each document at the rank of
its best chunk), as in passage-to-document "MaxP" evaluation (Dai & Callan, SIGIR 2019).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pytrec_eval

CUTOFFS = (1, 5, 10)
# trec_eval measure -> our name. `success@k` (any answer file in the top k) is reported as recall@k:
# the answer files of one question are alternatives, each of which answers it alone.
_MEASURES = {
    **{f"success_{k}": f"recall@{k}" for k in CUTOFFS},
    "recip_rank": "mrr@10",
    "ndcg_cut_10": "ndcg@10",
}
RANKING_METRICS = tuple(_MEASURES.values())


def document_ranking(sources: Iterable[str], depth: int = 10) -> list[str]:
    """Distinct documents in order of their first (best) chunk, at most `depth`."""
    out: list[str] = []
    for source in sources:
        if source not in out:
            out.append(source)
            if len(out) == depth:
                break
    return out


def ranking_metrics(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]]
) -> dict[str, dict[str, float]]:
    """Per-question recall@1/5/10, MRR@10 and nDCG@10 (binary relevance), computed by trec_eval.

    Args:
        rankings: question ID -> document IDs, best first (cut at 10 for MRR and nDCG).
        qrels: question ID -> relevant document IDs; questions with none are skipped.

    Returns:
        question ID -> metric name -> value in [0, 1]. A question with no retrieved document scores 0.
    """
    judged = {qid: {doc: 1 for doc in docs} for qid, docs in qrels.items() if docs}
    run = {
        qid: {doc: float(len(docs) - i) for i, doc in enumerate(list(docs)[:10])}
        for qid, docs in rankings.items()
        if qid in judged and docs
    }
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"success.1,5,10", "recip_rank", "ndcg_cut.10"})
    scores = evaluator.evaluate(run) if run else {}
    out: dict[str, dict[str, float]] = {}
    for qid in judged:
        row = scores.get(qid, {})
        out[qid] = {ours: float(row.get(theirs, 0.0)) for theirs, ours in _MEASURES.items()}
    return out


def contains_key_fact(answer: str, facts: Sequence[str]) -> bool:
    """True when `answer` contains any of `facts`, ignoring case and runs of white space."""
    text = " ".join(answer.lower().split())
    return any(" ".join(f.lower().split()) in text for f in facts if f.strip())


# What an answer may hold that is in neither language's words: code (fenced or inline), links and
# URLs, file paths, citation markers.
# (ASCII only: Chinese prose has no spaces to end a path or URL at.)
def mean(values: Iterable[float]) -> float | None:
    """Arithmetic mean, or None for no values."""
    values = list(values)
    return float(np.mean(values)) if values else None


def percentile_ms(seconds: Sequence[float], q: float) -> float | None:
    """The `q`-th percentile (0-100, linear interpolation) of durations in seconds, in milliseconds."""
    return float(np.percentile(np.asarray(seconds) * 1000.0, q)) if len(seconds) else None
