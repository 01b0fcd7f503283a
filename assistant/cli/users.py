"""`assistant users add|list|set-password` and `assistant groups add|remove`: accounts and memberships.

These commands open only the SQL database, so they work while `assistant serve` holds the vector store.
"""

from __future__ import annotations

import json
import sys

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.consoles import cli_console
from assistant.cli.opening import open_database

users_app = typer.Typer(no_args_is_help=True, help="People's accounts (local passwords or single sign-on).")
groups_app = typer.Typer(no_args_is_help=True, help="Group memberships; changes apply to the next request.")
out = cli_console()
err = cli_console(stderr=True)


def _read_password() -> str:
    # One line from stdin, so that a password never appears in the shell history or the process list.
    return sys.stdin.readline().rstrip("\r\n")


@users_app.command("add")
def add(
    name: str,
    group: list[str] | None = typer.Option(None, "--group", "-g", help="a group to join (repeatable)"),
    admin: bool = typer.Option(False, "--admin", help="may manage users, sources and models (reads through ACLs)"),
    password_stdin: bool = typer.Option(
        False, "--password-stdin", help="read a local password from stdin; without it only single sign-on works"
    ),
) -> None:
    """Create user NAME, optionally with groups, the admin role and a local password."""
    from assistant.auth.accounts import create_user

    password = _read_password() if password_stdin else None
    with open_database() as db:
        user = create_user(db, name, groups=group or [], password=password, is_admin=admin)
    out.print(f"user {user.name} created; groups: {', '.join(user.groups) or '-'}; admin: {user.is_admin}")


@users_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every account, its groups and roles."""
    from assistant.auth.accounts import list_users

    with open_database() as db:
        users = list_users(db)
    if as_json:
        print(json.dumps([u.to_dict() for u in users], indent=1))
        return
    table = Table("name", "groups", "admin", "service", "sso", "disabled")
    for u in users:
        table.add_row(u.name, ", ".join(u.groups), str(u.is_admin), str(u.is_service), str(u.sso), str(u.disabled))
    out.print(table)


@users_app.command("set-password")
def set_password_(name: str) -> None:
    """Replace user NAME's local password with one line read from stdin."""
    from assistant.auth.accounts import set_password

    password = _read_password()
    with open_database() as db:
        set_password(db, name, password)
    out.print(f"password of {name} changed")


@users_app.command("disable")
def disable(name: str) -> None:
    """Disable user NAME: its sessions end now, its sign-in and API keys stop working."""
    from assistant.auth.accounts import set_disabled

    with open_database() as db:
        set_disabled(db, name, True)
    out.print(f"user {escape(name)} disabled; its sessions were ended")


@users_app.command("enable")
def enable(name: str) -> None:
    """Enable user NAME again."""
    from assistant.auth.accounts import set_disabled

    with open_database() as db:
        set_disabled(db, name, False)
    out.print(f"user {escape(name)} enabled")


@users_app.command("remove")
def remove(name: str, yes: bool = typer.Option(False, "--yes", help="do not ask for confirmation")) -> None:
    """Delete user NAME with its groups memberships, sessions, API keys and conversations."""
    from assistant.auth.accounts import remove_user

    if not yes:
        typer.confirm(f"delete user {name} and its conversations?", abort=True)
    with open_database() as db:
        remove_user(db, name)
    out.print(f"user {escape(name)} removed")


@groups_app.command("add")
def group_add(user: str, group: str) -> None:
    """Add USER to GROUP (created when missing)."""
    from assistant.auth.accounts import add_member

    with open_database() as db:
        account = add_member(db, user, group)
    out.print(f"{account.name} groups: {', '.join(account.groups) or '-'}")


@groups_app.command("remove")
def group_remove(user: str, group: str) -> None:
    """Remove USER from GROUP."""
    from assistant.auth.accounts import remove_member

    with open_database() as db:
        account = remove_member(db, user, group)
    out.print(f"{account.name} groups: {', '.join(account.groups) or '-'}")
