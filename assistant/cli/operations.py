"""`assistant doctor | backup | restore | migrate`: what an operator runs beside the service."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.consoles import cli_console
from assistant.cli.errors import fail
from assistant.core.errors import AssistantError, ConfigError

console = cli_console(stderr=True)


def doctor(as_json: bool = typer.Option(False, "--json", help="one JSON object: {ok, checks: [...]}")) -> None:
    """Check the configuration and every part this deployment uses; exit 1 when something is wrong.

    Checks: settings, the database and its migrations, the vector store, each Redis, the LLM server
    or the chat model file, the embedding model files, free disk space under the data folder.
    """
    from assistant.core.settings import get_settings
    from assistant.operations.doctor import Check, run_checks

    try:
        settings = get_settings()
    except AssistantError as exc:
        checks = [Check("configuration", False, exc.message, "correct the ASSISTANT_* variables named above")]
    else:
        checks = [Check("configuration", True, f"{settings.server.environment}; data folder {settings.storage.data_dir.resolve()}"),
                  *run_checks(settings)]
    healthy = all(c.ok for c in checks)
    if as_json:
        print(json.dumps({"ok": healthy, "checks": [c.to_dict() for c in checks]}, ensure_ascii=False, indent=1))
    else:
        table = Table("check", "", "found", "to fix", show_lines=False)
        for c in checks:
            table.add_row(c.name, "[green]ok[/green]" if c.ok else "[red]FAIL[/red]", escape(c.detail), escape(c.fix))
        cli_console().print(table)
    if not healthy:
        raise typer.Exit(code=1)


def _server_backup(settings, url: str | None) -> Path:
    """Ask the running server (it owns the embedded store) to back up; returns the folder it wrote."""
    import httpx

    from assistant.auth.operator_token import operator_token
    from assistant.cli.local_server import server_url, unreachable_server

    base = url or server_url(settings)
    try:
        response = httpx.post(f"{base.rstrip('/')}/api/admin/backup",
                              headers={"Authorization": f"Bearer {operator_token(settings)}"}, timeout=None)
    except httpx.TransportError as exc:
        raise unreachable_server(
            base, exc, context="another process holds the embedded vector store, so the backup was asked of the server",
            otherwise="or name the server with --server-url URL",
        ) from exc
    if response.status_code != 200:
        raise ConfigError(f"the server at {base} refused the backup (HTTP {response.status_code}): {response.text[:300]}")
    return Path(response.json()["path"])


def backup(
    path: Path = typer.Argument(..., help="a new or empty folder"),
    server_url: str = typer.Option(None, "--server-url", help="the running server (default: ASSISTANT_HOST:ASSISTANT_PORT)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Back up the SQL data, the vector collection and the files they refer to (uploads, helpdesk
    resolutions, finetune datasets and adapters) into PATH, while the service runs.

    With the embedded vector store held by a running `assistant serve`, the server takes the backup
    (its writes held while the folder is copied) and it is moved to PATH.
    """
    from assistant.cli.opening import open_resources
    from assistant.core.settings import get_settings
    from assistant.operations.backup import take_backup

    try:
        if path.exists() and any(path.iterdir()):
            raise ConfigError(f"backup folder {path} is not empty: choose a new folder")
        try:
            with open_resources(migrate=False, as_json=as_json) as resources:
                manifest = take_backup(resources, path)
        except ConfigError as exc:
            if exc.code != "store_locked":
                raise
            taken = _server_backup(get_settings(), server_url)
            if path.exists():
                path.rmdir()
            shutil.move(str(taken), str(path))
            manifest = json.loads((path / "manifest.json").read_text())
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print(json.dumps({"path": str(path), "manifest": manifest}, indent=1))
    else:
        console.print(f"backup written to [bold]{escape(str(path))}[/bold] in {manifest['seconds']} s "
                      f"(database {manifest['database']}, vectors {manifest['vectors']['kind']})")


def restore(
    path: Path = typer.Argument(..., help="a folder `assistant backup` wrote"),
    force: bool = typer.Option(False, "--force", help="replace the data already in the target"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Restore a backup into the configured (stopped) deployment; refuses a non-empty target unless --force.

    The schema is migrated to this release afterwards, so a backup of an older release upgrades; files
    restored into other folders than the backup's have their paths and document IDs moved with them.
    """
    from assistant.core.settings import get_settings
    from assistant.operations.backup import restore_backup

    try:
        manifest = restore_backup(path, get_settings(), force=force)
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print(json.dumps({"restored": str(path), "manifest": manifest}, indent=1))
    else:
        console.print(f"restored the backup of {manifest['created_at']} from [bold]{escape(str(path))}[/bold]")


def migrate(as_json: bool = typer.Option(False, "--json")) -> None:
    """Bring the database schema to this release's head (the server also does this when it starts)."""
    from assistant.cli.opening import open_database
    from assistant.core.db.schema import database_revisions, script_heads

    with open_database(migrate=False, as_json=as_json) as db:
        before = sorted(database_revisions(db))
        db.migrate()
    result = {"from": before, "to": sorted(script_heads())}
    if as_json:
        print(json.dumps(result))
    else:
        console.print(f"schema at {', '.join(result['to'])} (was {', '.join(before) or 'empty'})")


def prepare_multiprocess_metrics(settings) -> None:
    """Before several API processes start: point prometheus-client's multiprocess mode at an emptied
    `DATA_DIR/prometheus` (unless PROMETHEUS_MULTIPROC_DIR names another folder), so that `/metrics`
    sums every process's counters. The variable is set for the processes this one starts."""
    import os

    folder = settings.observability.prometheus_multiproc_dir or settings.storage.data_dir / "prometheus"
    if folder.exists():
        shutil.rmtree(folder)  # files of processes from a previous run would be summed in
    folder.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder.resolve())


def register(app: typer.Typer) -> None:
    """Add `doctor`, `backup`, `restore` and `migrate` to the CLI `app`."""
    for command in (doctor, backup, restore, migrate):
        app.command(command.__name__)(command)
