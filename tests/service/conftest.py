"""Fixtures of the service tier (functions called directly against real services)."""

from collections.abc import Iterator

import pytest

from assistant.core.db.session import Database
from assistant.core.settings import get_settings
from tests.conftest_llm_server import llm_server, llm_server_factory  # noqa: F401


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> Iterator[Database]:
    """A migrated SQL database: a SQLite file, then a fresh PostgreSQL database."""
    url = f"sqlite:///{tmp_path / 'meta.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    database = Database(url)
    database.migrate()
    yield database
    database.dispose()


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """The CLI's settings confined to `tmp_path / "var"` (read afresh for the test)."""
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(tmp_path / "var"))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()
