"""What every part of the store shares: the engine, write connections, dialect-aware
``INSERT .. ON CONFLICT`` and the clock.

The store's table groups (transcript, deltas, effect ledger, usage receipts) are mixins
over this base, so ``Store`` is one object with one engine whatever part a caller uses.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.dialects import postgresql, sqlite


def utc(value: datetime | None) -> datetime | None:
    """``value`` as a timezone-aware UTC time: SQLite returns naive datetimes, and
    everything stored is UTC, so say so. None stays None."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


class StoreBase:
    """Holds the engine; subclasses add the queries of their tables."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name

    @property
    def engine(self) -> Engine:
        return self._engine

    @staticmethod
    def _now() -> datetime:
        """The current time, timezone-aware UTC: every timestamp the store writes."""
        return datetime.now(timezone.utc)

    def _write(self) -> Connection:
        """A connection whose transactions take the write lock up front (SQLite ``BEGIN IMMEDIATE``)."""
        return self._engine.connect().execution_options(agentrt_write=True)

    def _insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        """The dialect's ``INSERT`` for ``table``, which offers ``ON CONFLICT`` clauses."""
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(table)

    def _insert_ignore(self, table: Table, index_elements: list[str]) -> postgresql.Insert | sqlite.Insert:
        """``INSERT .. ON CONFLICT (index_elements) DO NOTHING`` into ``table``."""
        return self._insert(table).on_conflict_do_nothing(index_elements=index_elements)
