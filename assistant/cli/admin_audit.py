"""Admin changes made on the command line, written to the audit trail as `admin.*` rows.

`install_admin_audit` wraps every command of the account, group, key, source and adapter command
groups: once a command that changes something has succeeded, the wrapper records it (`audit_command`),
naming the command and its arguments (passwords are read from stdin and never among them).
"""

from __future__ import annotations

import functools
import getpass
from typing import TYPE_CHECKING, Any

import typer

from assistant.cli.opening import open_database
from assistant.core.principals import Principal

if TYPE_CHECKING:  # the audit trail's modules load the answering package: only when a row is written,
    # so that `assistant search` handed to the server starts in well under a second
    from assistant.core.db.session import Database

# Command group -> audit action; commands of other groups record their own rows (or change nothing).
ACTIONS = {
    "users": "admin.user", "groups": "admin.group", "keys": "admin.key", "sources": "admin.source",
    "finetune": "admin.adapter",
}
READ_ONLY = {"list", "show"}
# Changes that are not recorded as the command: those writing rows of their own, and the refresh, which
# its job and adapter rows record.
NOT_RECORDED = {"users unlock", "users export", "users erase", "sources remove", "finetune run"}


def install_admin_audit(groups: dict[str, typer.Typer]) -> None:
    """Wrap each command of `groups` (group name -> Typer app) so that, when it changes something and
    succeeds, `audit_command` records it."""
    for group, app in groups.items():
        for info in app.registered_commands:
            name = info.name or info.callback.__name__.replace("_", "-")
            if group in ACTIONS and name not in READ_ONLY and f"{group} {name}" not in NOT_RECORDED:
                info.callback = _recorded(info.callback, group, name)


def _recorded(fn, group: str, name: str):
    @functools.wraps(fn)  # Typer reads the parameters through __wrapped__
    def command(*args, **kwargs):
        result = fn(*args, **kwargs)
        with open_database(migrate=False) as db:  # the command opened (and migrated) it already
            audit_command(db, group, name, kwargs)
        return result

    return command


def cli_principal() -> Principal:
    """Who acts on the command line: the operating-system user running it (`cli:NAME`)."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        who = "unknown"
    return Principal(name=f"cli:{who}")


def audit_command(db: Database, group: str, name: str, arguments: dict[str, Any]) -> None:
    """Record the command `group name` (e.g. `users add`), run with `arguments` (parameter name -> value;
    values other than numbers, booleans, lists and None as text), as an `admin.*` row of the CLI's user."""
    from assistant.compliance.audit import record_event

    params = {k: v if isinstance(v, (bool, int, float, list, tuple, type(None))) else str(v) for k, v in arguments.items()}
    record_event(
        db, principal=cli_principal(), action=ACTIONS[group], auth_method="cli",
        details={"command": f"{group} {name}", "params": params},
    )


def audit_source_change(db: Database, change: str, path, acl: dict | None) -> None:
    """Record a source change made on the command line (`ingest`, `remove`): `admin.acl_manifest` when
    a manifest was given (who may read it changed), else `admin.source`."""
    from assistant.compliance.audit import record_event

    record_event(
        db, principal=cli_principal(), action="admin.acl_manifest" if acl else "admin.source", auth_method="cli",
        details={"change": change, "path": str(path), **({"acl": acl} if acl else {})},
    )
