"""`assistant sources list | remove`: the folders and files that `assistant ingest` registered."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.admin_audit import audit_source_change
from assistant.cli.consoles import cli_console, counted
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
    cli_console().print(table)


@sources_app.command("remove")
def remove(
    path: Path = typer.Argument(..., help="the folder or file given to `assistant ingest` (it may be gone from disk)"),
    as_json: bool = typer.Option(False, "--json", help='print {"path", "documents", "chunks"}'),
) -> None:
    """Remove source PATH: its chunks leave the index and its documents the database, so no answer
    cites them any more. Your files are not touched; an upload's copy kept in the data folder goes with
    its upload. While `assistant serve` holds the embedded store, the server removes it."""
    from assistant.operations.sources import remove_source

    try:
        try:
            with open_resources() as res:
                result = remove_source(res, path).to_dict()
                audit_source_change(res.db, "remove", path, None)
        except AssistantError as exc:
            if exc.code != "store_locked":
                raise
            result = _remove_through_server(path, exc)
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
        return
    cli_console().print(
        f"removed source {escape(result['path'])}: {counted(result['documents'], 'document')}, "
        f"{counted(result['chunks'], 'chunk')}", soft_wrap=True
    )


def _remove_through_server(path: Path, locked: AssistantError) -> dict:
    """Have the running `assistant serve` of this data folder remove the source (`POST
    /api/local/sources/remove`); `locked` is raised again when no server of this folder answers."""
    from assistant.cli.admin_audit import cli_principal
    from assistant.cli.server_queries import LocalServer, NoServer, remove_through_server
    from assistant.core.settings import get_settings

    try:
        return remove_through_server(LocalServer.of(get_settings()), str(path.expanduser().resolve()), by=cli_principal().name)
    except NoServer:
        raise locked from None
