"""`assistant sources list | remove`: the folders and files that `assistant ingest` registered."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from assistant.cli.admin_audit import audit_source_change
from assistant.cli.errors import fail
from assistant.cli.opening import open_database, open_resources
from assistant.core.errors import AssistantError

sources_app = typer.Typer(no_args_is_help=True, help="Sources: the folders and files that `ingest` registered.")


@sources_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="one JSON array")) -> None:
    """Every source with its documents and chunks (reads the SQL database only, so it works while
    the server runs)."""
    from assistant.core.db.sources import source_summaries

    with open_database() as db:
        rows = [row.to_dict() for row in source_summaries(db)]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    table = Table("path", "kind", "documents", "chunks", "last synced")
    for r in rows:
        table.add_row(escape(r["path"]), r["kind"], str(r["documents"]), str(r["chunks"]), r["last_synced_at"] or "-")
    Console().print(table)


@sources_app.command("remove")
def remove(
    path: Path = typer.Argument(..., help="the folder or file given to `assistant ingest` (it may be gone from disk)"),
    as_json: bool = typer.Option(False, "--json", help='print {"path", "documents", "chunks"}'),
) -> None:
    """Remove source PATH: its chunks leave the index and its documents the database, so no answer
    cites them any more. The files themselves are not touched."""
    from ingest.sources import remove_source

    try:
        with open_resources() as res:
            removed = remove_source(res, path)
            audit_source_change(res.db, "remove", path, None)
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print(json.dumps(removed.to_dict(), ensure_ascii=False))
        return
    Console().print(
        f"removed source {escape(removed.path)}: {removed.documents} documents, {removed.chunks} chunks", soft_wrap=True
    )
