"""A PostgreSQL server of a test's own (``bench.private_pg.PrivatePostgres``), so that the test
can stop and start it without touching the server other tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.private_pg import PrivatePostgres, pg_bin

__all__ = ["PrivatePostgres", "pg_bin", "private_pg"]


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A started ``PrivatePostgres``, closed after the test (import it into a test module to use it)."""
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.close()
