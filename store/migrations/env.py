"""Alembic environment: runs migrations on the connection ``Store.open`` passes in.

``Store.open`` builds the Alembic ``Config`` in code and puts an open connection, already
inside a locked transaction, in ``config.attributes["connection"]``. Run from the
``alembic`` command line instead, ``sqlalchemy.url`` (or ``AGENTRT_DATABASE_URL``) is used.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from agentrt.store._models import metadata

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from agentrt.store._engine import database_url

    engine = create_engine(database_url(config.get_main_option("sqlalchemy.url") or None))
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
