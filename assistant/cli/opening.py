"""How every CLI command opens what it works on: `open_database` (SQL only) or `open_resources` (SQL,
the vector store, models on first use), both from the process's settings (`ASSISTANT_*`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.markup import escape

from assistant.cli.consoles import cli_console
from assistant.cli.errors import fail
from assistant.core.errors import AssistantError
from assistant.core.settings import Settings, get_settings

if TYPE_CHECKING:  # opening the resources loads the vector store's client: only when a command does
    from assistant.core.db.session import Database
    from assistant.core.resources import Resources

_err = cli_console(stderr=True)


def note_new_data_dir(settings: Settings, *, quiet: bool = False) -> None:
    """Create the data folder; say so on stderr when it did not exist (a command run from another
    folder than usual would otherwise work silently on a new, empty database), unless `quiet` (a
    `--json` command, whose stderr is one JSON line when it fails)."""
    if settings.ensure_dirs() and not quiet:
        _err.print(
            f"[yellow]note[/yellow]: created a new, empty data folder {escape(str(settings.storage.data_dir.resolve()))}; "
            "set ASSISTANT_DATA_DIR to use an existing one", soft_wrap=True,
        )


@contextmanager
def open_database(*, migrate: bool = True, as_json: bool = False) -> Iterator[Database]:
    """The configured SQL database, for the commands that need nothing else (they work while `assistant
    serve` holds the embedded vector store); disposed of at the end.

    Args:
        migrate: bring the schema to this release's head first.
        as_json: report errors as one JSON line (`fail`).

    An `AssistantError` raised opening it or inside the block exits with status 2 and its message.
    """
    from assistant.core.db.session import Database

    db = None
    try:
        settings = get_settings()
        note_new_data_dir(settings)
        db = Database(settings.resolved_database_url)
        if migrate:
            db.migrate()
        yield db
    except AssistantError as exc:
        fail(exc, as_json=as_json)
    finally:
        if db is not None:
            db.dispose()


@contextmanager
def open_resources(*, migrate: bool = True, as_json: bool = False) -> Iterator[Resources]:
    """This process's resources (SQL, migrated unless `migrate` is False, and the vector store), made the
    process's current ones (`assistant.core.resources.set_current`: tasks run in process use them) and
    closed at the end. `as_json`: a `--json` command (no note on stderr about a new data folder).

    Raises:
        AssistantError: as `Resources.open` (e.g. `store_locked` while `assistant serve` holds the
            embedded vector store), or from the block; each command reports it its own way.
    """
    from assistant.core import resources as resources_mod

    settings = get_settings()
    note_new_data_dir(settings, quiet=as_json)
    res = resources_mod.Resources.open(settings, migrate=migrate)
    resources_mod.set_current(res)
    try:
        yield res
    finally:
        resources_mod.set_current(None)
        res.close()
