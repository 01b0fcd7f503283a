"""`assistant reindex`: rebuild the collection with the configured embedding model, then switch the alias.

It opens only SQL and a new collection, so it runs beside `assistant serve`, which keeps answering
from the old collection until it is restarted.
"""

from __future__ import annotations

import json

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from assistant.cli.consoles import cli_console
from assistant.cli.errors import fail
from assistant.core.errors import AssistantError

err = cli_console(stderr=True)


def reindex_command(
    keep_old: bool = typer.Option(False, "--keep-old", help="keep the old collection after the switch"),
    as_json: bool = typer.Option(False, "--json", help="print the result as one JSON object on stdout"),
) -> None:
    """Re-embed every source with ASSISTANT_EMBEDDING_MODEL into a new collection, then switch the alias."""
    from assistant.core.settings import get_settings
    from ingest.reindex import reindex

    settings = get_settings()
    try:
        with Progress(
            TextColumn("[bold]reindex[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.description}"), console=err, disable=as_json or not err.is_terminal,
        ) as progress:
            task = progress.add_task("", total=None)

            def on_source(path) -> None:
                progress.reset(task, total=None, description=escape(str(path)[-60:]))

            result = reindex(
                settings,
                keep_old=keep_old,
                on_source=on_source,
                on_total=lambda n: progress.update(task, total=n),
                on_file=lambda o: progress.update(task, advance=0 if o.status == "deleted" else 1),
            )
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=1))
        return
    table = Table(title=f"alias {result.alias} -> {result.new}", show_header=False)
    table.add_row("embedding model", f"{result.model} ({result.dim}-d)")
    table.add_row("sources", str(result.sources))
    for status, n in sorted(result.files.items()):
        table.add_row(f"files {status}", str(n))
    table.add_row("chunks", str(result.chunks))
    old = result.old or "-"
    if result.old and not result.old_dropped:
        old += " (kept" + ("" if keep_old else ": still open in another process; delete it after restarting that") + ")"
    table.add_row("old collection", old + (" (dropped)" if result.old_dropped else ""))
    cli_console().print(table)
    err.print("restart `assistant serve` and the workers so that they search the new collection")
