"""Where a database stands: whether it answers, and its schema against the Alembic revisions that ship
with this release (`assistant doctor`, `assistant migrate`, backups and restores read these)."""

from __future__ import annotations

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from assistant.core.db.session import MIGRATIONS_DIR, Database


def ping(db: Database) -> None:
    """Run `SELECT 1` on a new connection.

    Raises:
        Whatever the driver raises when the database does not answer (`sqlalchemy.exc.OperationalError`).
    """
    with db.engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def script_heads() -> set[str]:
    """The head revision(s) of the migrations shipped with this code (one, unless branches are unmerged)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return set(ScriptDirectory.from_config(cfg).get_heads())


def database_revisions(db: Database) -> set[str]:
    """The revision(s) recorded in the database's `alembic_version` table (empty: never migrated)."""
    with db.engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())
