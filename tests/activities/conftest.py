"""Activity fixtures: ``db_store``, a store on SQLite and on PostgreSQL, for activities and tools
whose behaviour depends on the backend (memories: bounds, locks, text the database refuses).

PostgreSQL uses one fresh database for the test session (memory and session rows emptied after
each test); when the server is unreachable the PostgreSQL cases skip, or fail if ``CI`` is set.
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


@pytest.fixture(scope="session")
def activities_pg_url() -> Iterator[str]:
    try:
        url = create_temp_database()
    except psycopg.OperationalError as e:
        reason = f"PostgreSQL unavailable: {str(e).strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield url
    drop_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store with no rows: a new SQLite file, or the session's PostgreSQL database."""
    if request.param == "sqlite":
        with Store.open(f"sqlite:///{tmp_path / 'agentrt.db'}") as store:
            yield store
        return
    with Store.open(request.getfixturevalue("activities_pg_url")) as store:
        yield store
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE sessions, messages, events, effects, usage_receipts, memories"))
