"""`assistant keys create|revoke|list`: API keys for service principals, shown once and stored hashed."""

from __future__ import annotations

import json
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from assistant.cli.users import account_db

keys_app = typer.Typer(no_args_is_help=True, help="API keys (Authorization: Bearer KEY) for service accounts.")
out = Console()
err = Console(stderr=True)


@keys_app.command("create")
def create(
    name: str,
    group: Optional[List[str]] = typer.Option(None, "--group", "-g", help="a group of the key's service account"),
    as_json: bool = typer.Option(False, "--json", help='print {"name", "key"} as JSON'),
) -> None:
    """Create key NAME for service account NAME; prints the key once (only its hash is stored)."""
    from assistant.core.auth.api_keys import create_api_key

    with account_db() as db:
        created = create_api_key(db, name, groups=group or [])
    if as_json:
        print(json.dumps({"name": created.name, "key": created.key}))
        return
    print(created.key)
    err.print(
        f"key {created.name} for service account {created.principal} (groups: {', '.join(created.groups) or '-'}); "
        "it is shown only this once"
    )


@keys_app.command("revoke")
def revoke(name: str) -> None:
    """Revoke key NAME; requests presenting it are refused from now on."""
    from assistant.core.auth.api_keys import revoke_api_key

    with account_db() as db:
        revoke_api_key(db, name)
    out.print(f"key {name} revoked")


@keys_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every key's name, prefix, owner and dates (never the key)."""
    from assistant.core.auth.api_keys import list_api_keys

    with account_db() as db:
        rows = list_api_keys(db)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table("name", "prefix", "principal", "created", "last used", "revoked")
    for r in rows:
        table.add_row(r["name"], r["prefix"], r["principal"], r["created_at"] or "", r["last_used_at"] or "", r["revoked_at"] or "")
    out.print(table)
