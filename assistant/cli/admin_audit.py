"""Admin changes made on the command line, written to the audit trail as `admin.*` rows.

`install_admin_audit` wraps every command of the account, group, key and source command groups so
that the running command and its arguments are known; those commands open the SQL database through
`assistant.cli.users.account_db`, which calls `audit_command` once the command succeeded. The row
names the command and its arguments (passwords are read from stdin and never among them).
"""

from __future__ import annotations

import functools
import getpass
from contextvars import ContextVar
from typing import Any

import typer

from assistant.compliance.audit import record_event
from assistant.core.db.session import Database
from assistant.core.principals import Principal

# Command group -> audit action; commands of other groups record their own rows (or change nothing).
ACTIONS = {
    "users": "admin.user", "groups": "admin.group", "keys": "admin.key", "sources": "admin.source",
    "finetune": "admin.adapter",
}
READ_ONLY = {"list", "show", "export", "unlock"}  # `export` and `unlock` write rows of their own
_running: ContextVar[tuple[str, str, dict[str, Any]] | None] = ContextVar("assistant_cli_command", default=None)


def install_admin_audit(groups: dict[str, typer.Typer]) -> None:
    """Wrap each command of `groups` (group name -> Typer app) so that `audit_command` knows it."""
    for group, app in groups.items():
        for info in app.registered_commands:
            name = info.name or info.callback.__name__.replace("_", "-")
            info.callback = _remembering(info.callback, group, name)


def _remembering(fn, group: str, name: str):
    @functools.wraps(fn)  # Typer reads the parameters through __wrapped__
    def command(*args, **kwargs):
        token = _running.set((group, name, kwargs))
        try:
            return fn(*args, **kwargs)
        finally:
            _running.reset(token)

    return command


def cli_principal() -> Principal:
    """Who acts on the command line: the operating-system user running it (`cli:NAME`)."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        who = "unknown"
    return Principal(name=f"cli:{who}")


def audit_command(db: Database) -> None:
    """Record the running command as an `admin.*` row when it is a change (not `list`)."""
    running = _running.get()
    if running is None or running[1] in READ_ONLY or running[0] not in ACTIONS:
        return
    group, name, kwargs = running
    params = {k: v if isinstance(v, (bool, int, float, list, tuple, type(None))) else str(v) for k, v in kwargs.items()}
    record_event(
        db, principal=cli_principal(), action=ACTIONS[group], auth_method="cli",
        details={"command": f"{group} {name}", "params": params},
    )


def audit_source_change(db: Database, change: str, path, acl: dict | None) -> None:
    """Record a source change made on the command line (`ingest`, `remove`): `admin.acl_manifest` when
    a manifest was given (who may read it changed), else `admin.source`."""
    record_event(
        db, principal=cli_principal(), action="admin.acl_manifest" if acl else "admin.source", auth_method="cli",
        details={"change": change, "path": str(path), **({"acl": acl} if acl else {})},
    )
