"""The evaluation gate: a candidate adapter is judged by the answers of the served model (base or live
against base + candidate, on held-aside evaluation questions answered through the product's answering):
it is refused when it lowers the share of questions answered right (a key fact, or a decline where the
documents hold no answer) or the share of answers citing their answer file. Without answers to judge it
is judged by its held-out rows' likelihood. The likelihood of each evaluation question's bare key fact is
reported, never a reason to refuse (an adapter that learnt its rows' phrasing scores a one-word answer
worse while answering as well).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.adapters.gguf_lora import ensure_gguf_lora
from assistant.adapters.llama_lora import LlamaLoraLLM
from assistant.adapters.store import AdapterRecord
from assistant.answering import Answerer
from assistant.answering.request import GenerationParams
from assistant.core.llm.base import LLM
from assistant.core.llm.llama_cpp import LlamaCppLLM
from assistant.core.principals import Principal
from assistant.evaluation.dataset import Question, load_questions
from assistant.evaluation.runner import EvalReport, run_eval
from finetune.dataset import Row
from finetune.peft_model import PeftAdapterLLM, PeftServing


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict: `passed`, the reason when not, and the scores.

    Metrics: `decided_on` (`answers` when answers were judged, else `heldout`); mean answer-token loss in
    nats, lower is better (`heldout_candidate`, `heldout_live`, `eval_candidate`, `eval_live`; `tolerance`
    applies to the held-out loss when no answers are judged); and, when answers are scored, the share of
    evaluation questions answered right and of answerable ones whose answer cites an answer file, higher
    is better (`answer_candidate`, `answer_live`, `cited_candidate`, `cited_live`, `answer_tolerance`,
    `answer_questions`, and `answer_results`: per question, whether each side answered it right and
    cited its file)."""

    passed: bool
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerCheck:
    """The answer half of the gate.

    Attributes:
        answerer: the product's answerer (`assistant.composition.Assistant`): its retrieval,
            abstention rule, prompt and grounding answer for each adapter in turn (`Answerer.with_model`).
        questions: the evaluation questions answered (`answer_questions`).
        max_tokens: the longest answer per question, in tokens (greedy decoding).
        tolerance: the largest drop allowed in the share answered right and in the share of cited
            answers, in [0, 1] (absolute).
    """

    answerer: Answerer
    questions: list[Question]
    max_tokens: int = 96
    tolerance: float = 0.1


def eval_pairs(questions_path: Path | None) -> list[tuple[str, str]]:
    """`(question, key fact)` of each answerable question of an `assistant eval` question file (its first
    `must_contain_any`); [] when there is no file. The key fact's likelihood given the question is a
    figure the gate reports (`eval_*`), not one it refuses on: a bare fact ("four") as the whole answer
    grows less likely as an adapter learns its rows' phrasing, however well it answers."""
    if questions_path is None:
        return []
    return [(q.question, q.must_contain_any[0]) for q in load_questions(questions_path) if q.answerable and q.must_contain_any]


def answer_questions(questions_path: Path | None, limit: int) -> list[Question]:
    """The first `limit` questions of an `assistant eval` question file (answerable and no-answer ones
    alike, in file order, so that every gate answers the same ones); [] without a file or with 0.

    Raises:
        InvalidRequestError: the file cannot be read as a question file (`load_questions`).
    """
    if questions_path is None or limit <= 0:
        return []
    return load_questions(questions_path)[:limit]


def audience_principal(audience: str) -> Principal:
    """A reader holding exactly the ACL tokens every member of `audience` holds (`everyone`, and the group
    of `group:NAME`): the gate answers only from what the whole audience may read."""
    groups = frozenset({audience.split(":", 1)[1]}) if audience.startswith("group:") else frozenset()
    return Principal(name="anonymous", groups=groups)  # a reserved name: no `user:` token of its own


def answered_right(report: EvalReport) -> tuple[float | None, dict[str, bool]]:
    """The share of questions of an `assistant eval` report (run with answers) answered right, and each
    question's outcome by ID: an answerable question's answer holds one of its key facts
    (`has_key_fact`), a no-answer question's answer declines (`abstained`). Answerable questions
    without key facts are not judged. The share is None when no question was judged."""
    right: dict[str, bool] = {}
    for r in report.questions:
        if r.answerable and r.has_key_fact is not None:
            right[r.id] = bool(r.has_key_fact)
        elif not r.answerable and r.abstained is not None:
            right[r.id] = bool(r.abstained)
    return (sum(right.values()) / len(right) if right else None), right


def cited_right(report: EvalReport) -> tuple[float | None, dict[str, bool]]:
    """The share of answerable questions (those naming answer files) of an `assistant eval` report run
    with answers whose answer cites one of its answer files with a [n] marker (`cites_answer_file`), and
    each one's outcome by ID. The share is None when no question was judged."""
    cited = {r.id: bool(r.cites_answer_file) for r in report.questions
             if r.answerable and r.cites_answer_file is not None}
    return (sum(cited.values()) / len(cited) if cited else None), cited


def score_answers(llm: Any, check: AnswerCheck, *, principal: Principal) -> EvalReport:
    """Answer `check.questions` as `principal` with the product's answering over model `llm` (greedy,
    `check.max_tokens`), scored by the product's evaluation (`assistant.evaluation.runner.run_eval`,
    answers included). Returns the report (`answered_right`, `cited_right` read it).

    Must not run inside an event loop (the evaluation runs each answer with `asyncio.run`).
    """
    answerer = check.answerer.with_model(llm, params=GenerationParams(max_tokens=check.max_tokens, temperature=0.0))
    return run_eval(check.questions, retriever=answerer.retriever, answerer=answerer, principal=principal, answers=True)


def regressed(candidate: float | None, live: float | None, tolerance: float) -> bool:
    """True when the candidate's loss exceeds live's by more than `tolerance` of live's (None: no data)."""
    return candidate is not None and live is not None and candidate > live * (1 + tolerance)


def answers_regressed(candidate: float | None, live: float | None, tolerance: float) -> bool:
    """True when the candidate answered a share of questions right lower than live's by more than
    `tolerance` (an absolute share: 0.1 = ten questions in a hundred; None: no data)."""
    return candidate is not None and live is not None and candidate < live - tolerance - 1e-9


def run_gate(candidate: AdapterRecord, live: AdapterRecord | None, *, rows: list[Row],
             questions: list[tuple[str, str]], tolerance: float, threads: int = 0, served: LLM | None = None,
             answers: AnswerCheck | None = None) -> GateResult:
    """Score `candidate` and `live` (None: the base model) on the held-out rows, the evaluation pairs and,
    with `answers`, the evaluation questions answered through the product's answering, and decide.

    The decision rests on the answers when any were judged: refused when the candidate's share answered
    right, or its share of answers citing their answer file, is below live's by more than
    `answers.tolerance`. Without judged answers it rests on the held-out rows: refused when their loss is
    worse than live's by more than `tolerance`. The evaluation pairs' likelihoods are only reported.

    Args:
        rows: the candidate's snapshot (its `heldout` rows are scored).
        questions: `eval_pairs` of the evaluation question file (reported as `eval_*`).
        tolerance: allowed regression of the held-out loss when no answers are judged, a share of live's
            loss (0.05: 5 % worse at most).
        answers: the answer check (None or no questions: held-out loss only). Must not be given inside an
            event loop (see `score_answers`).
        served: the model that answers readers. A llama.cpp model (the embedded default) answers
            itself: base (or base + live's GGUF LoRA) against base + the candidate's, exported first
            when missing (`ensure_gguf_lora`), so that the answers judged are those readers would get.
            Otherwise (vLLM: the candidate is not loaded there before it is published; or none) the
            answers are those of the transformers copy of the base the likelihoods are scored on
            (`answer_model` in the metrics says which).

    Returns:
        The verdict with every score of both sides.

    Raises:
        ConfigError: a llama.cpp `served` and an adapter whose GGUF LoRA cannot be written.
    """
    heldout = [(r.question, r.answer) for r in rows if r.split == "heldout"]
    serving = PeftServing(candidate.base_model, threads=threads)
    serving.load(candidate.name, candidate.path)
    live_name = None
    if live is not None and live.base_model == candidate.base_model:
        serving.load(live.name, live.path)
        live_name = live.name
    metrics: dict[str, Any] = {
        "tolerance": tolerance, "against": live_name or "base", "heldout_rows": len(heldout), "eval_questions": len(questions),
        "heldout_candidate": serving.answer_loss(candidate.name, heldout),
        "heldout_live": serving.answer_loss(live_name, heldout),
        "eval_candidate": serving.answer_loss(candidate.name, questions),
        "eval_live": serving.answer_loss(live_name, questions),
    }
    if answers is not None and answers.questions:
        reader = audience_principal(candidate.audience)
        served = getattr(served, "backend", served)  # a DeferredLLM (the Celery task's) opens its backend here
        on_llama = isinstance(served, LlamaCppLLM)
        if on_llama:
            live_llm: LLM = served
            if live_name is not None and live is not None:
                ensure_gguf_lora(live.path, live.base_model)
                live_llm = LlamaLoraLLM(served, live.path, name=live.name)
            ensure_gguf_lora(candidate.path, candidate.base_model)
            sides: tuple[LLM, LLM] = (LlamaLoraLLM(served, candidate.path, name=candidate.name), live_llm)
        else:
            sides = (PeftAdapterLLM(serving, candidate.name), PeftAdapterLLM(serving, live_name))
        mine, theirs = (score_answers(side, answers, principal=reader) for side in sides)
        (mine_share, mine_right), (theirs_share, theirs_right) = answered_right(mine), answered_right(theirs)
        (mine_cited, mine_cites), (theirs_cited, theirs_cites) = cited_right(mine), cited_right(theirs)
        metrics.update({
            "answer_questions": len(answers.questions), "answer_tolerance": answers.tolerance,
            "answer_max_tokens": answers.max_tokens, "answer_model": "llama.cpp" if on_llama else "transformers",
            "answer_candidate": mine_share, "answer_live": theirs_share,
            "cited_candidate": mine_cited, "cited_live": theirs_cited,
            "answer_results": [{"id": q, "candidate": mine_right[q], "live": theirs_right.get(q),
                                "cited_candidate": mine_cites.get(q), "cited_live": theirs_cites.get(q)}
                               for q in mine_right],
        })
    return decide(metrics)


def decide(metrics: dict[str, Any]) -> GateResult:
    """The gate's verdict from its scores (`run_gate`'s metrics: `against`, `tolerance`, `heldout_*`, and
    with judged answers `answer_tolerance`, `answer_*` and `cited_*`), which it returns with
    `decided_on` added.

    With both sides' share answered right known, the answers decide: refused when the candidate's
    share answered right, or its share of answers citing their answer file, is below live's by more
    than `answer_tolerance`. Otherwise the held-out loss decides: refused when it is worse than live's
    by more than `tolerance` of it. The evaluation pairs' likelihoods (`eval_*`) never refuse.
    """
    judged = metrics.get("answer_candidate") is not None and metrics.get("answer_live") is not None
    metrics = {**metrics, "decided_on": "answers" if judged else "heldout"}
    if not judged:
        if regressed(metrics.get("heldout_candidate"), metrics.get("heldout_live"), metrics["tolerance"]):
            return GateResult(False, (
                f"held-out loss {metrics['heldout_candidate']:.4f} is worse than {metrics['against']}'s "
                f"{metrics['heldout_live']:.4f} by more than the tolerance {metrics['tolerance']:.0%}"
            ), metrics)
        return GateResult(True, "", metrics)
    for key, what in (("answer", "answered right"), ("cited", "answers citing their file")):
        if answers_regressed(metrics.get(f"{key}_candidate"), metrics.get(f"{key}_live"), metrics["answer_tolerance"]):
            return GateResult(False, (
                f"evaluation answers: {metrics[f'{key}_candidate']:.0%} {what}, {metrics['against']} "
                f"{metrics[f'{key}_live']:.0%}: a drop beyond the tolerance of {metrics['answer_tolerance']:.0%}"
            ), metrics)
    return GateResult(True, "", metrics)
