"""`assistant audit list|export|verify`, `assistant retention run`, and `assistant users
unlock|auditor|hold|export|erase`: what a compliance review asks of the command line."""

from __future__ import annotations

import csv
import json
import sys
from datetime import datetime
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.admin_audit import cli_principal
from assistant.cli.consoles import cli_console
from assistant.cli.errors import fail, through_the_api
from assistant.cli.opening import open_database, open_resources
from assistant.cli.users import users_app
from assistant.core.db.models import utc
from assistant.core.errors import AssistantError, InvalidRequestError

audit_app = typer.Typer(no_args_is_help=True, help="The audit trail: who did what, to which documents, from where.")
retention_app = typer.Typer(no_args_is_help=True, help="Retention: delete what is older than its kind's setting.")
out = cli_console()
err = cli_console(stderr=True)
CSV_FIELDS = ("id", "at", "principal", "auth_method", "action", "query", "doc_ids", "chunk_ids", "address",
              "request_id", "details", "erased", "row_hash")


def _when(value: str | None, option: str) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        fail(InvalidRequestError(f"{option} {value!r} is not an ISO date or time (2026-01-31 or 2026-01-31T08:00)"))
    return utc(moment)  # a date or time without an offset is read as UTC


def _events(db, *, since, until, user, action, document, limit: int):
    """Every matching row, oldest first, fetched a page at a time."""
    from assistant.compliance.audit import AuditQuery, list_events

    after, left = 0, limit
    while left > 0:
        page = list_events(db, AuditQuery(
            user=user, action=action, doc_id=document, since=_when(since, "--since"), until=_when(until, "--until"),
            after_id=after, limit=min(left, 1000),
        ))
        if not page:
            return
        yield from page
        after, left = page[-1]["id"], left - len(page)


_SINCE = typer.Option(None, "--since", help="from this UTC date or time (ISO 8601)")
_UNTIL = typer.Option(None, "--until", help="before this UTC date or time (ISO 8601)")
_USER = typer.Option(None, "--user", help="rows of this principal only")
_ACTION = typer.Option(None, "--action", help="rows of this action only (chat, search, document.read, auth.login_failed, admin.user...)")
_DOCUMENT = typer.Option(None, "--document", help="rows that name this document ID")


def _write_rows(rows, fmt: str, stream) -> int:
    """Write audit rows to `stream` as CSV (lists and details as JSON text) or JSON lines; returns how many."""
    writer = csv.DictWriter(stream, fieldnames=CSV_FIELDS) if fmt == "csv" else None
    if writer:
        writer.writeheader()
    count = 0
    for row in rows:
        if writer:
            writer.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v
                             for k, v in row.items() if k in CSV_FIELDS})
        else:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    return count


def _check_format(fmt: str, allowed: tuple[str, ...]) -> None:
    if fmt not in allowed:
        fail(InvalidRequestError(f"--format {fmt!r} is not one of {', '.join(allowed)}"))


@audit_app.command("list")
def list_(
    since: str | None = _SINCE, until: str | None = _UNTIL, user: str | None = _USER,
    action: str | None = _ACTION, document: str | None = _DOCUMENT,
    limit: int = typer.Option(100, "--limit", min=1),
    fmt: str = typer.Option("table", "--format", help="table, csv or jsonl"),
) -> None:
    """The rows of the trail matching the filters, oldest first (at most --limit)."""
    _check_format(fmt, ("table", "csv", "jsonl"))
    with open_database() as db:
        rows = list(_events(db, since=since, until=until, user=user, action=action, document=document, limit=limit))
    if fmt != "table":
        _write_rows(rows, fmt, sys.stdout)
        return
    table = Table("id", "at", "principal", "auth", "action", "query", "documents", "address")
    for r in rows:
        table.add_row(str(r["id"]), r["at"][:19], escape(r["principal"]), r["auth_method"], r["action"],
                      escape(r["query"][:60]), str(len(r["doc_ids"])), r["address"])
    out.print(table)


@audit_app.command("export")
def export(
    since: str | None = _SINCE, until: str | None = _UNTIL, user: str | None = _USER,
    action: str | None = _ACTION, document: str | None = _DOCUMENT,
    fmt: str = typer.Option("jsonl", "--format", help="csv or jsonl"),
    output: Path | None = typer.Option(None, "--output", "-o", help="file to write; default: stdout"),
) -> None:
    """Every matching row, as CSV (lists and details as JSON text) or JSON lines."""
    _check_format(fmt, ("csv", "jsonl"))
    stream = output.open("w", encoding="utf-8", newline="") if output else sys.stdout
    try:
        with open_database() as db:
            rows = _events(db, since=since, until=until, user=user, action=action, document=document, limit=10**12)
            count = _write_rows(rows, fmt, stream)
    finally:
        if output:
            stream.close()
    err.print(f"{count} audit rows exported")


@audit_app.command("verify")
def verify(as_json: bool = typer.Option(False, "--json")) -> None:
    """Recompute the hash chain; exit status 1 (and the first broken row) when a row was edited,
    inserted or removed other than by retention."""
    from assistant.compliance.audit_chain import verify_chain

    with open_database() as db:
        report = verify_chain(db)
    if as_json:
        print(json.dumps(report.to_dict()))
    elif report.ok:
        out.print(f"audit trail intact: {report.checked} chained rows (ids {report.first_id}-{report.last_id})")
        for note in report.notes:
            out.print(f"note: {note}")
    else:
        err.print(f"[red]audit trail broken[/red] at row {report.broken_id}: {report.problem}")
    if not report.ok:
        raise typer.Exit(code=1)


@retention_app.command("run")
def retention_run(as_json: bool = typer.Option(False, "--json")) -> None:
    """Apply the retention settings now (as the scheduled job does) and print what was deleted."""
    from assistant.compliance.retention import apply_retention

    try:
        with open_resources() as res:
            report = apply_retention(res.db, settings=res.settings, store=res.store)
    except AssistantError as exc:
        fail(through_the_api(exc, "POST /api/retention/run"), as_json=as_json)
    if as_json:
        print(json.dumps(report.to_dict()))
        return
    out.print(f"deleted: {report.deleted or 'nothing (no retention enabled)'}; on legal hold: {report.held_users or '-'}")


@users_app.command("unlock")
def unlock(name: str) -> None:
    """Clear user NAME's sign-in throttling from every address (the owner may sign in at once)."""
    from assistant.auth.accounts import unlock_account
    from assistant.compliance.audit import record_event

    with open_database() as db:
        cleared = unlock_account(db, name)
        record_event(db, principal=cli_principal(), action="auth.unlock", auth_method="cli", details={"target": name})
    out.print(f"{escape(name)}: sign-in throttling cleared ({cleared} addresses)")


@users_app.command("auditor")
def auditor(name: str, off: bool = typer.Option(False, "--off", help="withdraw the role")) -> None:
    """Grant user NAME the auditor role: reads the audit trail (API and CLI), documents only through its ACLs."""
    from assistant.auth.accounts import set_flags

    with open_database() as db:
        user = set_flags(db, name, is_auditor=not off)
    out.print(f"{escape(user.name)}: auditor {user.is_auditor}")


@users_app.command("hold")
def hold(name: str, off: bool = typer.Option(False, "--off", help="lift the hold")) -> None:
    """Place user NAME under legal hold: retention deletes none of their rows until it is lifted."""
    from assistant.auth.accounts import set_flags

    with open_database() as db:
        user = set_flags(db, name, legal_hold=not off)
    out.print(f"{escape(user.name)}: legal hold {user.legal_hold}")


@users_app.command("export")
def export_user_(name: str, output: Path = typer.Option(..., "--output", "-o", help="the zip file to write")) -> None:
    """Write user NAME's conversations, feedback, keys and uploads (with the files) to a zip of JSON."""
    from assistant.compliance.audit import record_event
    from assistant.compliance.erasure import export_user

    with open_database() as db:
        counts = export_user(db, name, output)
        record_event(db, principal=cli_principal(), action="admin.export", auth_method="cli",
                     details={"target": name, "counts": counts})
    out.print(f"{escape(name)} exported to {escape(str(output))}: {counts}")


@users_app.command("erase")
def erase(name: str, yes: bool = typer.Option(False, "--yes", help="do not ask for confirmation")) -> None:
    """Erase user NAME: conversations, feedback, uploads with their chunks, keys, sessions and the
    account; audit rows stay, their query text replaced per ASSISTANT_ERASURE_AUDIT_CONTENT."""
    from assistant.compliance.erasure import erase_user

    if not yes:
        typer.confirm(f"erase user {name} and everything they own? This cannot be undone", abort=True)
    try:
        with open_resources() as res:
            report = erase_user(
                res.db, name, store=res.store, tables_dir=res.settings.tables_dir, redact_audit=res.settings.retention.erasure_audit_content == "redact",
                actor=cli_principal(), origin={"auth_method": "cli"},
            )
    except AssistantError as exc:
        fail(through_the_api(exc, f"POST /api/users/{name}/erase"))
    out.print(f"{escape(name)} erased: {report.deleted}")
