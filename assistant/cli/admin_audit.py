"""Admin changes made on the command line, written to the audit trail as `admin.*` rows.

Every command that changes accounts, groups, keys or sources opens the SQL database through
`assistant.cli.users.account_db`, which calls `audit_command` once the command succeeded: the row names
the command and its arguments (passwords are read from stdin and never among them).
"""

from __future__ import annotations

import getpass

import click

from assistant.core.auth.audit import record_event
from assistant.core.db.session import Database
from assistant.core.principals import Principal

# Command group -> audit action; commands of other groups record their own rows (or change nothing).
ACTIONS = {"users": "admin.user", "groups": "admin.group", "keys": "admin.key", "sources": "admin.source"}
READ_ONLY = {"list", "export", "unlock"}  # `export` and `unlock` write rows of their own


def cli_principal() -> Principal:
    """Who acts on the command line: the operating-system user running it (`cli:NAME`)."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        who = "unknown"
    return Principal(name=f"cli:{who}")


def audit_command(db: Database) -> None:
    """Record the running Typer command as an `admin.*` row when it is a change (not `list`)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.parent is None or ctx.info_name in READ_ONLY:
        return
    action = ACTIONS.get(ctx.parent.info_name or "")
    if action is None:
        return
    params = {k: (str(v) if not isinstance(v, (bool, int, list, tuple, type(None))) else v) for k, v in ctx.params.items()}
    record_event(
        db, principal=cli_principal(), action=action, auth_method="cli",
        details={"command": ctx.command_path, "params": params},
    )


def audit_source_change(db: Database, change: str, path, acl: dict | None) -> None:
    """Record a source change made on the command line (`ingest`, `remove`): `admin.acl_manifest` when
    a manifest was given (who may read it changed), else `admin.source`."""
    record_event(
        db, principal=cli_principal(), action="admin.acl_manifest" if acl else "admin.source", auth_method="cli",
        details={"change": change, "path": str(path), **({"acl": acl} if acl else {})},
    )
