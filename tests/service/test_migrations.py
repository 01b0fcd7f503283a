"""Upgrades keep data, and the migrations build exactly the models' schema, on SQLite and PostgreSQL.

Generic over the migrations that exist: whatever revisions follow the previous release's head, the
upgrade goes to `head` and the schema comparison is Alembic's own (autogenerate's `compare_metadata`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from assistant.core.db.models import Base
from assistant.core.db.schema import database_revisions, script_heads
from assistant.core.db.session import MIGRATIONS_DIR, Database

# The head revision of the release before this one (0.1.0 shipped migrations 0001-0004).
PREVIOUS_RELEASE = "0004"


def _upgrade(db: Database, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with db.engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)


def _value(column: sa.Column, table: str):
    """A plain value of the column's type (unique per table, so unique constraints hold)."""
    kind = column.type
    if isinstance(kind, sa.Boolean):
        return True
    if isinstance(kind, sa.Integer):
        return 7
    if isinstance(kind, (sa.Float, sa.Numeric)):
        return 0.5
    if isinstance(kind, sa.DateTime):
        return datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    if isinstance(kind, sa.JSON):
        return {"kept": table}
    if isinstance(kind, sa.String):
        text = f"{table}.{column.name}"
        return text[-kind.length:] if kind.length else text
    raise AssertionError(f"no test value for {table}.{column.name} of type {kind!r}")


def _fill_every_table(engine: sa.Engine) -> dict[str, dict]:
    """One row in every table of the current schema, foreign keys pointing at the rows made before
    (tables in dependency order); returns each table's row as read back."""
    metadata = sa.MetaData()
    metadata.reflect(engine)
    rows: dict[str, dict] = {}
    with engine.begin() as connection:
        for table in metadata.sorted_tables:
            if table.name == "alembic_version":
                continue
            row = {}
            for column in table.columns:
                target = next(iter(column.foreign_keys), None)
                if target is not None:
                    row[column.name] = rows[target.column.table.name][target.column.name]
                elif column.primary_key and isinstance(column.type, sa.Integer):
                    row[column.name] = 1
                else:
                    row[column.name] = _value(column, table.name)
            connection.execute(table.insert().values(**row))
            rows[table.name] = dict(connection.execute(sa.select(table)).mappings().one())
    return rows


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'upgrade.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    db = Database(url)
    yield db
    db.dispose()


def test_upgrading_a_previous_release_database_keeps_every_row(empty_db):
    _upgrade(empty_db, PREVIOUS_RELEASE)
    before = _fill_every_table(empty_db.engine)
    assert {"users", "audit_events", "documents", "helpdesk_tickets"} <= set(before)

    empty_db.migrate()  # what the server does as it starts

    assert database_revisions(empty_db) == script_heads()
    metadata = sa.MetaData()
    metadata.reflect(empty_db.engine)
    with empty_db.engine.connect() as connection:
        for name, row in before.items():
            after = connection.execute(sa.select(metadata.tables[name])).mappings().all()
            assert len(after) == 1, name
            assert {k: after[0][k] for k in row} == row, name


def test_migrations_build_exactly_the_models_schema(empty_db):
    empty_db.migrate()
    with empty_db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == [], differences


def test_migrating_twice_changes_nothing(tmp_path):
    db = Database(f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}")
    try:
        db.migrate()
        first = database_revisions(db)
        db.migrate()
        assert database_revisions(db) == first == script_heads()
    finally:
        db.dispose()
