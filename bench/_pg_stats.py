"""What a benchmark's PostgreSQL store wrote: row and WAL counters read before and after a burst.

``pg_counters(url)`` reads ``pg_stat_database`` for the store's database (rows inserted, updated
and deleted; transactions committed, reads included) the server's WAL position (bytes; the
whole cluster's, so run nothing else on it meanwhile) and the database's size on disk (bytes). PostgreSQL publishes a backend's counts
when its transaction ends (at most once a second) and when it exits, so read the "after"
counters once the worker's connections have closed. None for a SQLite store.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from sqlalchemy.engine import make_url


@dataclass(frozen=True)
class PgCounters:
    commits: int
    rows_written: int
    wal_bytes: int
    database_bytes: int

    def __sub__(self, other: PgCounters) -> PgCounters:
        return PgCounters(
            self.commits - other.commits, self.rows_written - other.rows_written, self.wal_bytes - other.wal_bytes,
            self.database_bytes - other.database_bytes,
        )


def pg_counters(url: str) -> PgCounters | None:
    """The counters of the store at SQLAlchemy ``url`` now, or None when it is not PostgreSQL."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return None
    with psycopg.connect(parsed.set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, pg_current_wal_lsn() - '0/0'::pg_lsn, "
            "pg_database_size(current_database()) FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return PgCounters(int(row[0]), int(row[1]), int(row[2]), int(row[3]))
