"""Where a database's schema stands against the Alembic revisions that ship with this release."""

from __future__ import annotations

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from assistant.core.db.session import MIGRATIONS_DIR, Database


def script_heads() -> set[str]:
    """The head revision(s) of the migrations shipped with this code (one, unless branches are unmerged)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return set(ScriptDirectory.from_config(cfg).get_heads())


def database_revisions(db: Database) -> set[str]:
    """The revision(s) recorded in the database's `alembic_version` table (empty: never migrated)."""
    with db.engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())
