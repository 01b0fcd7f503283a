"""The engine, sessions and schema migrations (Alembic) for SQLite and PostgreSQL alike."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.base import Executable

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:  # pragma: no cover - driver hook
    cursor = dbapi_connection.cursor()
    # WAL lets the API read while an ingestion job writes; foreign keys are off by default in SQLite.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def changed_rows(session: Session, statement: Executable) -> int:
    """Run an UPDATE or DELETE `statement` in `session`; the rows it changed (0 when the driver does not say)."""
    # A DML statement's result is a CursorResult, which Session.execute's annotation does not narrow to.
    return cast(CursorResult[Any], session.execute(statement)).rowcount or 0


class Database:
    """Owns one engine and its session factory. Build once per process and pass it down.

    Args:
        url: SQLAlchemy URL (`sqlite:///path` or `postgresql+psycopg://...`).
    """

    def __init__(self, url: str):
        self.url = url
        kwargs: dict[str, Any] = {"future": True, "pool_pre_ping": True}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine: Engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._factory = sessionmaker(self.engine, expire_on_commit=False)

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (idempotent)."""
        if self.url.startswith("sqlite:///"):
            Path(self.url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        cfg.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        sqlite = self.engine.dialect.name == "sqlite"
        with self.engine.connect() as connection:
            if sqlite:
                # SQLite alters a table by copying it into a new one and dropping the old: with foreign
                # keys on, that drop deletes every row that references it (ON DELETE CASCADE), e.g. all
                # API keys when `users` gains a column. The pragma is ignored inside a transaction, so it
                # is set before the migration's transaction begins (Alembic's batch mode documents this).
                connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
                connection.commit()
            try:
                with connection.begin():
                    cfg.attributes["connection"] = connection
                    command.upgrade(cfg, "head")
            finally:
                if sqlite:
                    connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                    connection.commit()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on error."""
        session = self._factory()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def transactional(query: Callable[Concatenate[Session, P], R]) -> Callable[Concatenate[Database, P], R]:
    """Make `query(session, ...)` callable as `query(db, ...)`, run in one transaction of `db`.

    This is how the feature packages' stores (`assistant/<feature>/store.py`) reach the database:
    they write queries against a `Session` and never open one; the session is opened here, committed
    when `query` returns and rolled back when it raises (the exception propagates unchanged).
    """

    @functools.wraps(query)
    def run(db: Database, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with db.session() as session:
            return query(session, *args, **kwargs)

    return run


def transactional_iter(
    query: Callable[Concatenate[Session, P], Iterator[T]],
) -> Callable[Concatenate[Database, P], Iterator[T]]:
    """`transactional` for a query that yields (e.g. rows in batches): `query(db, ...)` is an iterator
    whose one session of `db` is opened when the first item is asked for and stays open while the
    caller iterates; committed when `query` is exhausted, rolled back when it raises or the caller
    stops early (the exception propagates unchanged)."""

    @functools.wraps(query)
    def run(db: Database, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        with db.session() as session:
            yield from query(session, *args, **kwargs)

    return run
