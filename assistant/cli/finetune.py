"""`assistant finetune run|list|show|promote|rollback|export-dataset`: the monthly LoRA refresh by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from assistant.cli.consoles import cli_console
from assistant.cli.opening import open_database

finetune_app = typer.Typer(no_args_is_help=True, help="LoRA adapters: refresh, registry, promote and rollback.")
out = cli_console()


def _print(record, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record.to_dict(), indent=1, default=str))
        return
    for key, value in record.to_dict().items():
        out.print(f"[bold]{key}[/bold]: {json.dumps(value, default=str) if isinstance(value, (dict, list)) else value}")


@finetune_app.command("run")
def run(
    dry_run: bool = typer.Option(False, "--dry-run", help="build and record the dataset snapshot only"),
    audience: str = typer.Option("everyone", "--audience", help="'everyone' or 'group:NAME': who the adapter serves"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run one refresh now: dataset, training, gate against live, canary."""
    from assistant.cli.errors import fail, through_the_api
    from assistant.cli.opening import open_resources
    from assistant.core.errors import AssistantError
    from finetune.config import check_audience
    from finetune.tasks import refresh_now

    try:  # a wrong audience is named before the store is opened (which a running server holds)
        audience = check_audience(audience)
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    try:
        with open_resources() as res:
            try:
                with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[note]}"),
                              TimeElapsedColumn(), console=cli_console(stderr=True), disable=as_json) as bar:
                    task = bar.add_task("dataset", total=None, note="")

                    def progress(entry: dict) -> None:
                        total = entry.get("max_steps") or None
                        note = f"loss {entry['loss']:.3f}" if "loss" in entry else entry.get("adapter", "")
                        bar.update(task, description=entry.get("stage", ""), total=total, completed=entry.get("step", 0),
                                   note=note)

                    outcome = refresh_now(res, audience=audience, dry_run=dry_run, by="cli", progress=progress)
            except AssistantError as exc:
                fail(exc)
    except AssistantError as exc:  # opening them: most likely `assistant serve` holds the vector store
        fail(through_the_api(exc, "POST /api/admin/finetune/runs (or the admin page's Adapters tab)"), as_json=as_json)
    result = {"job_id": outcome.job_id, "status": outcome.status, "reason": outcome.reason,
              "snapshot": outcome.snapshot.__dict__ if outcome.snapshot else None,
              "adapter": outcome.adapter.to_dict() if outcome.adapter else None}
    if as_json:
        print(json.dumps(result, indent=1, default=str))
    else:
        out.print(f"job {outcome.job_id}: {outcome.status} {outcome.reason}")
        if outcome.snapshot:
            out.print(f"dataset snapshot {outcome.snapshot.id}: {json.dumps(outcome.snapshot.counts)}")
        if outcome.adapter:
            out.print(f"adapter {outcome.adapter.id} {outcome.adapter.name}: {outcome.adapter.status}")
    if outcome.status != "done":
        raise typer.Exit(1)


@finetune_app.command("list")
def list_(audience: str | None = typer.Option(None, "--audience"), as_json: bool = typer.Option(False, "--json")) -> None:
    """Adapters in the registry, newest first."""
    from assistant.adapters.store import list_adapters

    with open_database() as db:
        rows = list_adapters(db, audience=audience)
    if as_json:
        print(json.dumps([r.to_dict() for r in rows], indent=1, default=str))
        return
    table = Table("id", "name", "audience", "status", "by", "heldout", "eval", "created")
    for r in rows:
        m = r.metrics
        fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"  # noqa: E731
        table.add_row(str(r.id), r.name, r.audience, r.status, r.promoted_by or "-", fmt(m.get("heldout_candidate")),
                      fmt(m.get("eval_candidate")), r.created_at.isoformat(timespec="minutes"))
    out.print(table)


@finetune_app.command("show")
def show(adapter_id: int, as_json: bool = typer.Option(False, "--json")) -> None:
    """One adapter: base model, dataset, hyperparameters, metrics, files and hashes, status history."""
    from assistant.adapters.store import get_adapter

    with open_database() as db:
        _print(get_adapter(db, adapter_id), as_json)


@finetune_app.command("promote")
def promote(adapter_id: int, to: str | None = typer.Option(None, "--to", help="'canary' or 'live' (default: one step)"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Promote an adapter one step (candidate -> canary -> live) and publish it; no restart needed."""
    from assistant.adapters.release import promote_and_publish, publisher_for
    from assistant.adapters.store import get_adapter
    from assistant.core.settings import get_settings

    with open_database() as db:
        promote_and_publish(db, adapter_id, by="cli", publisher=publisher_for(get_settings()), to=to)
        _print(get_adapter(db, adapter_id), as_json)


@finetune_app.command("rollback")
def rollback(audience: str = typer.Option("everyone", "--audience"), as_json: bool = typer.Option(False, "--json")) -> None:
    """Retire the canary (or, without one, the live adapter, restoring the one before it) and unload it."""
    from assistant.adapters.release import publisher_for, rollback_and_publish
    from assistant.core.settings import get_settings

    with open_database() as db:
        release = rollback_and_publish(db, audience=audience, by="cli", publisher=publisher_for(get_settings()))
    result = {"loaded": [a.name for a in release.loaded], "unloaded": [a.name for a in release.unloaded]}
    print(json.dumps(result)) if as_json else out.print(f"unloaded {result['unloaded']}, live again {result['loaded']}")


@finetune_app.command("export-dataset")
def export_dataset(snapshot_id: int, to: Path = typer.Option(..., "--to", help="JSONL file to write")) -> None:
    """Copy dataset snapshot SNAPSHOT_ID (JSONL: origin, ref, question, answer, split) for review."""
    from assistant.adapters.store import get_snapshot

    with open_database() as db:
        snapshot = get_snapshot(db, snapshot_id)
    shutil.copyfile(snapshot.path, to)
    out.print(f"snapshot {snapshot.id} ({snapshot.content_hash[:12]}, {json.dumps(snapshot.counts)}) -> {to}")
