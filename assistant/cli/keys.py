"""`assistant keys create|revoke|list|limits|webhook`: API keys for service principals, shown once and stored hashed."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from assistant.cli.consoles import cli_console
from assistant.cli.opening import open_database

keys_app = typer.Typer(no_args_is_help=True, help="API keys (Authorization: Bearer KEY) for service accounts.")
out = cli_console()
err = cli_console(stderr=True)


@keys_app.command("create")
def create(
    name: str,
    group: list[str] | None = typer.Option(None, "--group", "-g", help="a group of the key's service account"),
    as_json: bool = typer.Option(False, "--json", help='print {"name", "key"} as JSON'),
) -> None:
    """Create key NAME for service account NAME; prints the key once (only its hash is stored)."""
    from assistant.auth.api_keys import create_api_key

    with open_database() as db:
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
    from assistant.auth.api_keys import revoke_api_key

    with open_database() as db:
        revoke_api_key(db, name)
    out.print(f"key {name} revoked")


@keys_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every key's name, prefix, owner and dates (never the key)."""
    from assistant.auth.api_keys import list_api_keys

    with open_database() as db:
        rows = list_api_keys(db)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table("name", "prefix", "principal", "created", "last used", "revoked")
    for r in rows:
        table.add_row(r["name"], r["prefix"], r["principal"], r["created_at"] or "", r["last_used_at"] or "", r["revoked_at"] or "")
    out.print(table)


@keys_app.command("limits")
def limits(
    name: str,
    rpm: int | None = typer.Option(None, "--rpm", min=0, help="requests per minute (0 = unlimited)"),
    tpm: int | None = typer.Option(None, "--tpm", min=0, help="answer tokens per minute (0 = unlimited)"),
    default: bool = typer.Option(False, "--default", help="forget both: the ASSISTANT_RATE_LIMIT_* settings apply"),
) -> None:
    """Set key NAME's own rate limits on /v1 and the helpdesk routes (they replace the settings' values)."""
    from assistant.auth.api_keys import configure_api_key

    changes: dict = {"requests_per_minute": None, "tokens_per_minute": None} if default else {}
    if rpm is not None:
        changes["requests_per_minute"] = rpm
    if tpm is not None:
        changes["tokens_per_minute"] = tpm
    with open_database() as db:
        options = configure_api_key(db, name, **changes)
    out.print(f"key {name}: requests/min {options.requests_per_minute if options.requests_per_minute is not None else 'default'}, "
              f"tokens/min {options.tokens_per_minute if options.tokens_per_minute is not None else 'default'}")


@keys_app.command("webhook")
def webhook(
    name: str,
    url: str = typer.Argument("", help="http(s) URL on ASSISTANT_WEBHOOK_ALLOWED_HOSTS; empty: remove the webhook"),
) -> None:
    """POST key NAME's helpdesk results to URL; prints the new signing secret once (docs/helpdesk.md)."""
    from assistant.auth.api_keys import configure_api_key
    from assistant.core.settings import get_settings
    from assistant.helpdesk.delivery import check_url

    with open_database() as db:  # a URL off the allow-list exits with status 2, as other refusals do
        target = check_url(url, get_settings().webhooks.allowed_hosts) if url else None
        options = configure_api_key(db, name, webhook_url=target)
    if options.webhook_secret:
        print(options.webhook_secret)
        err.print(f"key {name} posts helpdesk results to {target}; the signing secret above is shown only this once")
    else:
        out.print(f"key {name} has no webhook")
