"""The evaluation gate: a candidate adapter is scored on its held-out rows and on the product's evaluation
questions against the live adapter (or the base model), and passes only within the tolerance."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.core.db.adapters import AdapterRecord
from assistant.core.llm.peft_serving import PeftServing
from finetune.dataset import Row


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict: `passed`, the reason when not, and the scores (mean answer-token loss in nats,
    lower is better: `heldout_candidate`, `heldout_live`, `eval_candidate`, `eval_live`, `tolerance`)."""

    passed: bool
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)


def eval_pairs(questions_path: Path | None) -> list[tuple[str, str]]:
    """`(question, key fact)` of each answerable question of an `assistant eval` question file (its first
    `must_contain_any`); [] when there is no file. The key fact's likelihood given the question is what
    the gate compares: an adapter that made the model forget the product's facts scores worse."""
    if questions_path is None:
        return []
    from assistant.evaluation.dataset import load_questions

    return [(q.question, q.must_contain_any[0]) for q in load_questions(questions_path) if q.answerable and q.must_contain_any]


def regressed(candidate: float | None, live: float | None, tolerance: float) -> bool:
    """True when the candidate's loss exceeds live's by more than `tolerance` of live's (None: no data)."""
    return candidate is not None and live is not None and candidate > live * (1 + tolerance)


def run_gate(candidate: AdapterRecord, live: AdapterRecord | None, *, rows: list[Row],
             questions: list[tuple[str, str]], tolerance: float, threads: int = 0) -> GateResult:
    """Score `candidate` and `live` (None: the base model) on the held-out rows and the evaluation pairs.

    Args:
        rows: the candidate's snapshot (its `heldout` rows are scored).
        questions: `eval_pairs` of the evaluation question file.
        tolerance: allowed regression, a share of live's loss (0.05: 5 % worse at most).

    Returns:
        The verdict with both scores of both sets.
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
    for part in ("heldout", "eval"):
        if regressed(metrics[f"{part}_candidate"], metrics[f"{part}_live"], tolerance):
            return GateResult(False, (
                f"{part} loss {metrics[f'{part}_candidate']:.4f} is worse than {metrics['against']}'s "
                f"{metrics[f'{part}_live']:.4f} by more than the tolerance {tolerance:.0%}"
            ), metrics)
    return GateResult(True, "", metrics)
