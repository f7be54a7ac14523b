"""Store fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL uses one fresh database for the test session (tables emptied between tests);
when the server is unreachable the PostgreSQL cases skip, or fail if ``CI`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from agentrt.store import Store
from tests._pg import create_temp_database, drop_database


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required in CI: {reason}")
    pytest.skip(f"PostgreSQL unavailable: {reason}")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the whole test session, dropped at the end."""
    try:
        url = create_temp_database()
    except psycopg.OperationalError as e:
        _unavailable(str(e).strip())
    yield url
    drop_database(url)


@pytest.fixture
def fresh_pg_url() -> Iterator[str]:
    """A PostgreSQL database of its own, not yet migrated, dropped after the test."""
    try:
        url = create_temp_database()
    except psycopg.OperationalError as e:
        _unavailable(str(e).strip())
    yield url
    drop_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL with no application rows in it: a new SQLite file, or the session's PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agentrt.db'}"
        return
    url = request.getfixturevalue("pg_url")
    yield url
    with Store.open(url) as store, store.engine.begin() as conn:
        conn.execute(text("TRUNCATE sessions, messages, events, token_deltas, effects, usage_receipts, memories, workflow_owners RESTART IDENTITY"))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    with Store.open(db_url) as s:
        yield s
