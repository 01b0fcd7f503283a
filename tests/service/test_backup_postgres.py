"""Backup and restore with PostgreSQL: pg_dump's archive goes into the backup, pg_restore puts it back."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, select, text

from assistant.auth.accounts import create_user
from assistant.core.db.models import User
from assistant.core.errors import ConfigError
from assistant.core.resources import Resources
from assistant.operations.backup import restore_backup, take_backup
from tests.conftest import PG_ADMIN_URL, make_settings


@pytest.fixture
def second_pg_url():
    name = f"assistant_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _names(res: Resources) -> list[str]:
    with res.db.session() as session:
        return sorted(session.scalars(select(User.name)))


def test_a_postgresql_backup_restores_into_an_empty_database_and_refuses_a_full_one(tmp_path, pg_url, second_pg_url):
    res = Resources.open(make_settings(tmp_path / "a", database_url=pg_url))
    try:
        create_user(res.db, "backup-ada", password="correct horse battery staple")
        manifest = take_backup(res, tmp_path / "backup")
        assert manifest["database"] == "database.pgdump" and manifest["schema_revisions"]
        before = _names(res)
    finally:
        res.close()

    target = make_settings(tmp_path / "b", database_url=second_pg_url)
    restore_backup(tmp_path / "backup", target)
    restored = Resources.open(target)
    try:
        assert _names(restored) == before and "backup-ada" in before
    finally:
        restored.close()
    # An empty data folder but the database just restored: the database's schema is what refuses it.
    with pytest.raises(ConfigError, match="already holds a schema"):
        restore_backup(tmp_path / "backup", make_settings(tmp_path / "c", database_url=second_pg_url))
