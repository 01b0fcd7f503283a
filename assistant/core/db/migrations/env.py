"""Alembic environment: runs migrations on the connection handed over by `Database.migrate`."""

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from assistant.core.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        url = config.get_main_option("sqlalchemy.url")
        if url is None:
            raise RuntimeError("alembic: neither a connection nor sqlalchemy.url was given")
        engine = create_engine(url)
        with engine.begin() as connection:
            _run(connection)
    else:
        _run(connection)


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
