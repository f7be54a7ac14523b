"""What every part of the store shares: the engine, write connections, dialect-aware
``INSERT .. ON CONFLICT`` and the clock.

The store's table groups (transcript, deltas, effect ledger, usage receipts) are mixins
over this base, so ``Store`` is one object with one engine whatever part a caller uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timezone
from typing import Any, overload

from sqlalchemy import ColumnElement, Connection, Engine, Table, func
from sqlalchemy.dialects import postgresql, sqlite

from agentrt.store._changes import NOTIFY, StreamChanges, stream_changes
from agentrt.store._cipher import StoreCipher, open_text, seal_text
from agentrt.store._parsed_messages import ParsedMessages

# ``Connection.info`` key: the sessions whose streams the connection's transaction wrote to.
_CHANGED = "agentrt_stream_changes"


@overload
def utc(value: datetime) -> datetime: ...


@overload
def utc(value: None) -> None: ...


def utc(value: datetime | None) -> datetime | None:
    """``value`` as a timezone-aware UTC time: SQLite returns naive datetimes, and
    everything stored is UTC, so say so. None stays None."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


class StoreBase:
    """Holds the engine; subclasses add the queries of their tables."""

    def __init__(self, engine: Engine, cipher: StoreCipher | None = None) -> None:
        self._engine = engine
        self._cipher = cipher
        # Connections whose transactions take the write lock up front, from an option engine
        # made once: setting the option on each connection costs more than the write it begins.
        self._write_engine = engine.execution_options(agentrt_write=True)
        self._dialect = engine.dialect.name
        # Statements built once per store: building an upsert (its ``excluded`` columns) costs
        # more CPU than running it; execute them with parameters.
        self._statements: dict[str, Any] = {}
        self._changes = stream_changes(engine)
        # The transcript's messages, each parsed once (_transcript.py, ParsedMessages).
        self._parsed_messages = ParsedMessages()

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def cipher(self) -> StoreCipher | None:
        """The cipher that seals this store's content at rest (``agentrt.store.StoreCipher``), or None."""
        return self._cipher

    def encrypt_with(self, cipher: StoreCipher) -> None:
        """Seal what this store writes from now on with ``cipher`` (and open what it sealed)."""
        self._cipher = cipher

    def _seal(self, text: str, context: str) -> str:
        """``text`` as a content column stores it: sealed for ``context`` when the store has a cipher."""
        return seal_text(self._cipher, text, context)

    def _open(self, value: str, context: str) -> str:
        """A content column's value as clear text (``open_text``)."""
        return open_text(self._cipher, value, context)

    @staticmethod
    def _now() -> datetime:
        """The current time, timezone-aware UTC: every timestamp the store writes."""
        return datetime.now(timezone.utc)

    def _write(self) -> Connection:
        """A connection whose transactions take the write lock up front (SQLite ``BEGIN IMMEDIATE``)."""
        return self._write_engine.connect()

    @property
    def changes(self) -> StreamChanges:
        """Who is told when a session's stream (events, token deltas) grows in this database."""
        return self._changes

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction: pass the connection as ``conn=`` to the store's write methods
        (``append``, ``put_message``, ``record_usage``, ``append_deltas``) to commit them together,
        one lock and one commit instead of one each, and to its reads (``messages``,
        ``messages_in``, ``summary``) to see those writes. Rolls back when the block raises.
        After the commit, ``changes`` tells its listeners of the sessions whose streams grew."""
        with self._write() as conn:
            conn.info[_CHANGED] = set()
            try:
                with conn.begin():
                    yield conn
                changed = conn.info.pop(_CHANGED, None)
            finally:
                conn.info.pop(_CHANGED, None)
        if changed:
            self._changes.publish(changed)

    def _stream_grew(self, conn: Connection, session_id: str) -> None:
        """Mark ``session_id``'s stream as grown by ``conn``'s transaction: its listeners in this
        process hear it once a ``transaction()`` commits, and every process's on PostgreSQL
        (``NOTIFY``, delivered at commit). A connection from elsewhere gets the ``NOTIFY`` only."""
        changed: set[str] | None = conn.info.get(_CHANGED)
        if changed is None or session_id not in changed:
            if changed is not None:
                changed.add(session_id)
            if self._dialect == "postgresql":  # the payload, a session id of at most 255 characters, fits NOTIFY's 8,000 bytes
                conn.execute(NOTIFY, {"session_id": session_id})

    def _writing(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        """``conn`` when the caller holds a ``transaction()``, else a transaction of its own."""
        return nullcontext(conn) if conn is not None else self.transaction()

    def _reading(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        """``conn`` when the caller holds a ``transaction()`` (a read that sees its writes), else a connection of its own."""
        return nullcontext(conn) if conn is not None else self._engine.connect()

    def _insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        """The dialect's ``INSERT`` for ``table``, which offers ``ON CONFLICT`` clauses."""
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(table)

    def _insert_ignore(self, table: Table, index_elements: list[str]) -> postgresql.Insert | sqlite.Insert:
        """``INSERT .. ON CONFLICT (index_elements) DO NOTHING`` into ``table`` (built once;
        values come as execute parameters)."""
        return self._statement(
            f"ignore {table.name} {index_elements}",
            lambda: self._insert(table).on_conflict_do_nothing(index_elements=index_elements),
        )

    def _upsert(
        self,
        table: Table,
        index_elements: list[str],
        update_columns: list[str],
        where: ColumnElement[bool] | None = None,
        where_name: str = "",
    ) -> postgresql.Insert | sqlite.Insert:
        """``INSERT .. ON CONFLICT (index_elements) DO UPDATE SET`` each of ``update_columns`` to
        the new row's value (``WHERE where``), built once per table, columns and ``where_name``
        (the name of ``where``: a condition is known by it, not compiled on every call); values
        come as execute parameters. Raises ``ValueError`` for a ``where`` without a name."""
        if (where is None) != (not where_name):
            raise ValueError("an upsert's where condition needs a where_name, and only a where has one")

        def build() -> postgresql.Insert | sqlite.Insert:
            stmt = self._insert(table)
            return stmt.on_conflict_do_update(
                index_elements=index_elements, set_={k: stmt.excluded[k] for k in update_columns}, where=where
            )

        return self._statement(f"upsert {table.name} {index_elements} {update_columns} {where_name}", build)

    def _work_upsert(self, table: Table, key: str) -> Any:
        """``INSERT INTO table .. ON CONFLICT (key) DO UPDATE`` for a task's or a graph's row: every
        column but ``created_at``, and ``workspace`` only when the new one is not empty (built once)."""

        def build() -> Any:
            stmt = self._insert(table)
            new = stmt.excluded
            return stmt.on_conflict_do_update(
                index_elements=[key],
                set_={
                    "owner": new.owner,
                    "goal": new.goal,
                    "status": new.status,
                    "workspace": func.coalesce(func.nullif(new.workspace, ""), table.c.workspace),
                    "spend_json": new.spend_json,
                    "updated_at": new.updated_at,
                },
            )

        return self._statement(f"upsert {table.name}", build)

    def _statement(self, key: str, build: Callable[[], Any]) -> Any:
        """The statement cached under ``key``, built by ``build`` the first time."""
        if key not in self._statements:
            self._statements[key] = build()
        return self._statements[key]


def text_column(text: str) -> str:
    """``text`` as a text column of every backend takes it: a NUL character (which PostgreSQL's
    text type refuses: "text fields cannot contain NUL (0x00) bytes") and a lone surrogate (a
    file name that is not UTF-8, which no UTF-8 encoder takes) become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text
