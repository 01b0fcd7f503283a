"""The evaluation gate: a candidate adapter is scored on its held-out rows and on the product's evaluation
questions (their key facts' likelihood, and answers generated through the product's answering) against
the live adapter (or the base model), and passes only within the tolerances."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.adapters.llama_lora import GGUF_ADAPTER_FILE, LlamaLoraLLM
from assistant.adapters.peft_serving import PeftAdapterLLM, PeftServing
from assistant.adapters.store import AdapterRecord
from assistant.answering import Answerer
from assistant.answering.request import GenerationParams
from assistant.core.llm.base import LLM
from assistant.core.llm.llama_cpp import LlamaCppLLM
from assistant.core.principals import Principal
from assistant.evaluation.dataset import Question, load_questions
from assistant.evaluation.runner import EvalReport, run_eval
from finetune.dataset import Row


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict: `passed`, the reason when not, and the scores: mean answer-token loss in nats,
    lower is better (`heldout_candidate`, `heldout_live`, `eval_candidate`, `eval_live`, `tolerance`),
    and, when answers are scored, the share of evaluation questions answered right, higher is better
    (`answer_candidate`, `answer_live`, `answer_tolerance`, `answer_questions`, and `answer_results`:
    per question, whether each side answered it right)."""

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
        tolerance: the largest drop allowed in the share answered right, in [0, 1] (absolute).
    """

    answerer: Answerer
    questions: list[Question]
    max_tokens: int = 96
    tolerance: float = 0.1


def eval_pairs(questions_path: Path | None) -> list[tuple[str, str]]:
    """`(question, key fact)` of each answerable question of an `assistant eval` question file (its first
    `must_contain_any`); [] when there is no file. The key fact's likelihood given the question is what
    the gate compares: an adapter that made the model forget the product's facts scores worse."""
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


def score_answers(llm: Any, check: AnswerCheck, *, principal: Principal) -> tuple[float | None, dict[str, bool]]:
    """Answer `check.questions` as `principal` with the product's answering over model `llm` (greedy,
    `check.max_tokens`), scored by the product's evaluation (`assistant.evaluation.runner.run_eval`,
    answers included). Returns `answered_right` of the report.

    Must not run inside an event loop (the evaluation runs each answer with `asyncio.run`).
    """
    answerer = check.answerer.with_model(llm, params=GenerationParams(max_tokens=check.max_tokens, temperature=0.0))
    report = run_eval(check.questions, retriever=answerer.retriever, answerer=answerer, principal=principal, answers=True)
    return answered_right(report)


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
    with `answers`, the evaluation questions answered through the product's answering.

    Args:
        rows: the candidate's snapshot (its `heldout` rows are scored).
        questions: `eval_pairs` of the evaluation question file.
        tolerance: allowed regression of the losses, a share of live's loss (0.05: 5 % worse at most).
        answers: the answer check (None or no questions: losses only). Must not be given inside an
            event loop (see `score_answers`).
        served: the llama.cpp model that answers readers: when given and the candidate has a GGUF LoRA,
            the answers are those of the served model itself (base, or base + live's adapter, against
            base + the candidate's), not of the transformers copy the likelihoods are scored on.

    Returns:
        The verdict with every score of both sides.
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
        on_llama = isinstance(served, LlamaCppLLM) and (Path(candidate.path) / GGUF_ADAPTER_FILE).is_file()
        if on_llama:
            live_llm: LLM = served if live_name is None or live is None else LlamaLoraLLM(served, live.path, name=live.name)
            sides: tuple[LLM, LLM] = (LlamaLoraLLM(served, candidate.path, name=candidate.name), live_llm)
        else:
            sides = (PeftAdapterLLM(serving, candidate.name), PeftAdapterLLM(serving, live_name))
        mine, mine_right = score_answers(sides[0], answers, principal=reader)
        theirs, theirs_right = score_answers(sides[1], answers, principal=reader)
        metrics.update({
            "answer_questions": len(answers.questions), "answer_tolerance": answers.tolerance,
            "answer_max_tokens": answers.max_tokens, "answer_model": "llama.cpp" if on_llama else "transformers",
            "answer_candidate": mine, "answer_live": theirs,
            "answer_results": [{"id": q, "candidate": mine_right[q], "live": theirs_right.get(q)} for q in mine_right],
        })
    for part in ("heldout", "eval"):
        if regressed(metrics[f"{part}_candidate"], metrics[f"{part}_live"], tolerance):
            return GateResult(False, (
                f"{part} loss {metrics[f'{part}_candidate']:.4f} is worse than {metrics['against']}'s "
                f"{metrics[f'{part}_live']:.4f} by more than the tolerance {tolerance:.0%}"
            ), metrics)
    if answers is not None and answers_regressed(metrics.get("answer_candidate"), metrics.get("answer_live"), answers.tolerance):
        return GateResult(False, (
            f"evaluation answers: {metrics['answer_candidate']:.0%} answered right, {metrics['against']} "
            f"{metrics['answer_live']:.0%}: a drop beyond the tolerance of {answers.tolerance:.0%}"
        ), metrics)
    return GateResult(True, "", metrics)
