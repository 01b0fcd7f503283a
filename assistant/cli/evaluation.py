"""`assistant eval QUESTIONS.jsonl`: retrieval and answer quality on judged questions, as a table or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from assistant.cli.consoles import cli_console
from assistant.cli.errors import fail
from assistant.core.errors import AssistantError, InvalidRequestError

if TYPE_CHECKING:  # the heavy imports wait until the command runs, so other commands start fast
    from assistant.evaluation.runner import EvalReport

MODES = ("hybrid", "dense", "sparse")
MAX_WARNINGS_SHOWN = 10
_ROWS = (
    ("recall@1", "recall@1"), ("recall@5", "recall@5"), ("recall@10", "recall@10"), ("MRR@10", "mrr@10"),
    ("nDCG@10", "ndcg@10"), ("answer rate (gate)", "gate_answer_rate"),
    ("abstention on no-answer (gate)", "gate_abstention_rate"), ("answer rate", "answer_rate"),
    ("abstention on no-answer", "abstention_rate"), ("cites an answer file", "cites_answer_file"),
    ("contains a key fact", "has_key_fact"), ("answer in the question's language", "same_language"),
    ("search p50 (ms)", "latency_p50_ms"),
    ("search p95 (ms)", "latency_p95_ms"),
)


def eval_command(
    questions: Path = typer.Argument(..., help="JSONL file of judged questions (format: README.md, 'Using it')"),
    as_user: str | None = typer.Option(None, "--as", help="act as this user (default: sees only 'everyone' documents)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    mode: str | None = typer.Option(None, "--mode", help="hybrid | dense | sparse (default: hybrid, the product's search)"),
    no_answers: bool = typer.Option(False, "--no-answers", help="skip generation (slow on CPU): retrieval and abstention only"),
) -> None:
    """Measure retrieval (recall@1/5/10, MRR@10, nDCG@10, latency) and answers (citations, key facts,
    abstention, the question's language) on QUESTIONS, per language and overall."""
    from assistant.cli.opening import open_resources
    from assistant.composition import Assistant
    from assistant.core.db.documents import readable_sources
    from assistant.core.errors import NotFoundError
    from assistant.core.principals import ANONYMOUS
    from assistant.evaluation.dataset import load_questions
    from assistant.evaluation.runner import run_eval, unfound_answer_files

    try:
        if mode is not None and mode not in MODES:
            raise InvalidRequestError(f"--mode {mode!r} is not one of {', '.join(MODES)}")
        items = load_questions(questions)
        with open_resources(as_json=as_json) as res:
            if res.store.count() == 0:
                raise NotFoundError(
                    f"the index in {res.settings.storage.data_dir} holds no chunks: ingest documents first "
                    "(`assistant ingest FOLDER`) or set ASSISTANT_DATA_DIR to the data folder of an index"
                )
            principal = ANONYMOUS
            if as_user is not None:
                from assistant.core.db.identity import load_principal

                principal = load_principal(res.db, as_user)
            res.prepare_query_runtime()  # latency as the server measures it (ONNX Runtime when configured)
            assistant = Assistant.build(res)
            if mode:
                assistant.retriever.mode = mode  # type: ignore[assignment]
            report = run_eval(
                items, retriever=assistant.retriever, answerer=assistant.answerer, principal=principal,
                answers=not no_answers,
            )
            answer_files = {path for q in items for path in q.answer_files}
            report.warnings = unfound_answer_files(items, readable_sources(res.db, answer_files, principal=principal))
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
        return
    console = cli_console()
    console.print(render_table(report, title=f"{questions.name}: {report.config['mode']}, {report.config['embedding_model']}"))
    for warning in report.warnings[:MAX_WARNINGS_SHOWN]:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if len(report.warnings) > MAX_WARNINGS_SHOWN:
        console.print(f"[yellow]warning:[/yellow] ... and {len(report.warnings) - MAX_WARNINGS_SHOWN} more (--json lists all)")


def render_table(report: EvalReport, *, title: str = "") -> Table:
    """A Rich table: one row per metric, one column per group (en, zh, all); rates shown as 0-1."""
    table = Table(title=title)
    table.add_column("metric")
    for group in report.groups:
        g = report.groups[group]
        table.add_column(f"{group} ({g['answerable']}+{g['no_answer']})", justify="right")
    for label, key in _ROWS:
        values = [report.groups[g].get(key) for g in report.groups]
        if all(v is None for v in values):
            continue
        table.add_row(label, *("-" if v is None else f"{v:.3f}" if "ms" not in key else f"{v:.1f}" for v in values))
    return table
