"""The application store: transcript, event projection, sessions and token deltas in SQL.

Activities write here (idempotently, so retries are harmless) and the client reads here,
so a session's content never has to travel through workflow history. SQLite under
``.agentrt/`` by default; PostgreSQL when ``AGENTRT_DATABASE_URL`` says so.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from schemas import EVENT_ADAPTER, Event, Message, SessionConfig, StoreAppendInput
from store._models import events, messages, sessions, token_deltas

__all__ = ["SessionSummary", "Store", "TokenDelta", "database_url"]

DATABASE_URL_ENV = "AGENTRT_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Arbitrary constant key for pg_advisory_xact_lock: serializes concurrent migrations.
_PG_MIGRATION_LOCK = 0x6167656E7472  # "agentr"
# Alembic's ``context``/``op`` are process-global proxies: one migration run per process at a time.
_ALEMBIC_LOCK = threading.Lock()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _utc(value: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; everything stored is UTC, so say so."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


def database_url(url: str | None = None) -> str:
    """The store's SQLAlchemy URL: ``url`` if given, else ``AGENTRT_DATABASE_URL``, else
    ``sqlite:///<cwd>/.agentrt/agentrt.db``.

    ``postgresql://`` and ``postgres://`` URLs are rewritten to use the installed psycopg 3
    driver (``postgresql+psycopg://``).
    """
    url = url or os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{Path.cwd() / '.agentrt' / 'agentrt.db'}"
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


@dataclass(frozen=True)
class SessionSummary:
    """One row of ``Store.list_sessions``; times are timezone-aware UTC."""

    session_id: str
    owner: str
    workspace: str
    profile: str
    title: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TokenDelta:
    """One streamed chunk of model text. ``id`` orders deltas within the store; ``idx`` orders
    them within one (turn, round, attempt)."""

    id: int
    turn_id: str
    round: int
    attempt: int
    idx: int
    text: str


def _create_engine(url: str) -> Engine:
    sa_url = make_url(url)
    if sa_url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)

    memory = sa_url.database in (None, "", ":memory:")
    if not memory:
        Path(sa_url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        **({"poolclass": StaticPool} if memory else {}),
    )

    # pysqlite's own transaction handling defers BEGIN and never wraps DDL; take it over
    # (SQLAlchemy docs, "Serializable isolation / Savepoints / Transactional DDL").
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not memory:
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    # Writers take the write lock up front (BEGIN IMMEDIATE) so busy_timeout applies,
    # instead of failing with SQLITE_BUSY when a read transaction is upgraded.
    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("agentrt_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


class Store:
    """Synchronous access to the application store; thread-safe (one pooled engine).

    Open with ``Store.open()``; close with ``close()`` or use it as a context manager.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name

    @property
    def engine(self) -> Engine:
        return self._engine

    @classmethod
    def open(cls, url: str | None = None) -> Store:
        """Connect to ``database_url(url)`` and bring the schema to the latest migration.

        Creates the SQLite file's directory when needed. Migrations run under a lock
        (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock), so
        several processes may open the same database at once; re-opening is a no-op.
        """
        engine = _create_engine(database_url(url))
        try:
            _upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def close(self) -> None:
        """Release every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self):
        return self._engine.connect().execution_options(agentrt_write=True)

    def _insert_ignore(self, table, index_elements: list[str]):
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        return dialect.insert(table).on_conflict_do_nothing(index_elements=index_elements)

    def append(self, data: StoreAppendInput) -> None:
        """Write one batch in one transaction; safe to repeat.

        ``data.config`` (when given) upserts the session row (``created_at`` is kept).
        Messages are inserted by (session_id, position) and events by (session_id, seq);
        rows that already exist are left as they are, so a retried append changes nothing.
        """
        now = _now()
        sid = data.session_id
        with self._write() as conn, conn.begin():
            if data.config is not None:
                cfg = data.config
                values = {
                    "session_id": sid,
                    "owner": cfg.owner,
                    "workspace": cfg.workspace,
                    "profile": cfg.profile,
                    "title": cfg.title,
                    "config_json": cfg.model_dump_json(),
                    "created_at": now,
                    "updated_at": now,
                }
                dialect = postgresql if self._dialect == "postgresql" else sqlite
                stmt = dialect.insert(sessions).values(values)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["session_id"],
                    set_={k: stmt.excluded[k] for k in ("owner", "workspace", "profile", "title", "config_json", "updated_at")},
                )
                conn.execute(stmt)
            inserted = 0
            if data.messages:
                rows = [
                    {
                        "session_id": sid,
                        "position": pm.position,
                        "turn_id": pm.turn_id,
                        "role": pm.message.role,
                        "content_json": pm.message.model_dump_json(),
                    }
                    for pm in data.messages
                ]
                inserted += _rowcount(conn.execute(self._insert_ignore(messages, ["session_id", "position"]), rows))
            if data.events:
                rows = [
                    {
                        "session_id": sid,
                        "seq": ev.seq,
                        "type": ev.type,
                        "turn_id": ev.turn_id,
                        "at": ev.at,
                        "body_json": ev.model_dump_json(),
                    }
                    for ev in data.events
                ]
                inserted += _rowcount(conn.execute(self._insert_ignore(events, ["session_id", "seq"]), rows))
            if inserted and data.config is None:
                conn.execute(update(sessions).where(sessions.c.session_id == sid).values(updated_at=now))

    def put_message(self, session_id: str, position: int, turn_id: str | None, message: Message) -> None:
        """Insert or replace the message at (session_id, position).

        Used for results written by an activity: a retried attempt replaces what an
        interrupted one wrote, so the store matches the result the workflow accepted.
        """
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        stmt = dialect.insert(messages).values(
            session_id=session_id,
            position=position,
            turn_id=turn_id,
            role=message.role,
            content_json=message.model_dump_json(),
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["session_id", "position"],
            set_={"turn_id": stmt.excluded.turn_id, "role": stmt.excluded.role, "content_json": stmt.excluded.content_json},
        )
        with self._write() as conn, conn.begin():
            conn.execute(stmt)

    def messages(self, session_id: str, upto_position: int | None = None) -> list[tuple[int, Message]]:
        """``(position, Message)`` pairs ordered by position; only positions < ``upto_position`` when given."""
        q = select(messages.c.position, messages.c.content_json).where(messages.c.session_id == session_id)
        if upto_position is not None:
            q = q.where(messages.c.position < upto_position)
        with self._engine.connect() as conn:
            rows = conn.execute(q.order_by(messages.c.position)).all()
        return [(pos, Message.model_validate_json(body)) for pos, body in rows]

    def events(self, session_id: str, since_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events with ``seq > since_seq``, ordered by seq, at most ``limit``."""
        q = (
            select(events.c.body_json)
            .where(events.c.session_id == session_id, events.c.seq > since_seq)
            .order_by(events.c.seq)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            bodies = conn.execute(q).scalars().all()
        return [EVENT_ADAPTER.validate_json(body) for body in bodies]

    def session_config(self, session_id: str) -> SessionConfig | None:
        """The session's latest ``SessionConfig``, or None when the session is unknown."""
        with self._engine.connect() as conn:
            body = conn.execute(
                select(sessions.c.config_json).where(sessions.c.session_id == session_id)
            ).scalar_one_or_none()
        return None if body is None else SessionConfig.model_validate_json(body)

    def list_sessions(self, limit: int = 50) -> list[SessionSummary]:
        """Up to ``limit`` sessions, newest (by ``created_at``) first."""
        q = (
            select(
                sessions.c.session_id, sessions.c.owner, sessions.c.workspace, sessions.c.profile,
                sessions.c.title, sessions.c.created_at, sessions.c.updated_at,
            )
            .order_by(sessions.c.created_at.desc(), sessions.c.session_id.desc())
            .limit(limit)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [
            SessionSummary(
                session_id=r.session_id, owner=r.owner, workspace=r.workspace, profile=r.profile,
                title=r.title, created_at=_utc(r.created_at), updated_at=_utc(r.updated_at),
            )
            for r in rows
        ]

    def append_deltas(
        self, session_id: str, turn_id: str, round: int, attempt: int, texts: list[str], start_idx: int
    ) -> None:
        """Store streamed text chunks ``texts`` as idx ``start_idx``, ``start_idx + 1``, ...

        Not deduplicated: a retried model call writes under its own ``attempt``.
        """
        if not texts:
            return
        now = _now()
        rows = [
            {
                "session_id": session_id, "turn_id": turn_id, "round": round, "attempt": attempt,
                "idx": start_idx + i, "text": chunk, "created_at": now,
            }
            for i, chunk in enumerate(texts)
        ]
        with self._write() as conn, conn.begin():
            conn.execute(insert(token_deltas), rows)

    def deltas(self, session_id: str, after_id: int = 0, limit: int = 1000) -> list[TokenDelta]:
        """The session's deltas with ``id > after_id``, in id order, at most ``limit``."""
        c = token_deltas.c
        q = (
            select(c.id, c.turn_id, c.round, c.attempt, c.idx, c.text)
            .where(c.session_id == session_id, c.id > after_id)
            .order_by(c.id)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [TokenDelta(id=r.id, turn_id=r.turn_id, round=r.round, attempt=r.attempt, idx=r.idx, text=r.text) for r in rows]


def _rowcount(result: Any) -> int:
    count = getattr(result, "rowcount", -1)
    return count if count and count > 0 else 0


def _upgrade(engine: Engine) -> None:
    """``alembic upgrade head`` on ``engine``, holding locks so concurrent openers take turns.

    The database lock orders processes; ``_ALEMBIC_LOCK`` orders threads, because
    Alembic's ``context`` and ``op`` proxies are module globals.
    """
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS_DIR))
    with _ALEMBIC_LOCK, engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(agentrt_write=True)
        with conn.begin():
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
