"""The application store: transcript, event projection, sessions, token deltas, the effect
ledger and usage receipts in SQL.

Activities write here (idempotently, so retries are harmless) and the client reads here,
so a session's content never has to travel through workflow history. SQLite under
``$AGENTRT_HOME`` (default ``~/.agentrt``) by default; PostgreSQL when
``AGENTRT_DATABASE_URL`` says so.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Mapping

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, and_, func, or_, Engine, create_engine, event, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from agentrt.schemas import EVENT_ADAPTER, Event, Message, SessionConfig, StoreAppendInput
from agentrt.store._models import (
    USAGE_STATUSES,
    context_summaries,
    effects,
    events,
    messages,
    sessions,
    token_deltas,
    usage_receipts,
)

__all__ = ["EffectRecord", "SessionSummary", "Store", "TokenDelta", "UsageReceipt", "agentrt_home", "database_url"]

DATABASE_URL_ENV = "AGENTRT_DATABASE_URL"
HOME_ENV = "AGENTRT_HOME"
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


def agentrt_home(env: Mapping[str, str] | None = None) -> Path:
    """The directory that holds one machine's agentrt configuration and state: ``$AGENTRT_HOME``,
    else ``~/.agentrt`` (made absolute; not created here).

    It holds ``agentrt.toml``, the SQLite store ``agentrt.db``, the ``payloads/`` directory and
    the embedded dev server's ``temporal.db`` and logs, so the CLI, the Python client and a
    worker on one machine find the same files whatever their working directory. ``env``
    defaults to ``os.environ``.
    """
    env = os.environ if env is None else env
    return Path(env.get(HOME_ENV) or Path.home() / ".agentrt").expanduser().absolute()


def database_url(url: str | None = None) -> str:
    """The store's SQLAlchemy URL: ``url`` if given, else ``AGENTRT_DATABASE_URL``, else
    ``sqlite:///<agentrt_home()>/agentrt.db``.

    ``postgresql://`` and ``postgres://`` URLs are rewritten to use the installed psycopg 3
    driver (``postgresql+psycopg://``).
    """
    url = url or os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{agentrt_home() / 'agentrt.db'}"
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


@dataclass(frozen=True)
class EffectRecord:
    """One row of the effect ledger; times are timezone-aware UTC.

    ``state`` is one of:

    - ``claimed``: an attempt is about to perform (or performed) the effect; with no
      record after it, whether the effect happened is unknown.
    - ``applied`` / ``failed``: the effect's outcome was recorded (``result_text``), or an
      operator reconciled it as applied (``result_text`` None, ``note`` set if given).
    - ``not_applied``: an operator reconciled it as "did not happen"; it may be claimed again.
    """

    idempotency_key: str
    session_id: str
    tool: str
    state: str
    result_text: str | None
    note: str | None
    claimed_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class UsageReceipt:
    """Token usage of one model call attempt, keyed by (session_id, turn_id, round, attempt).

    ``status`` is ``started``, ``completed`` or ``interrupted``; times are timezone-aware UTC.
    """

    session_id: str
    turn_id: str
    round: int
    attempt: int
    status: str
    input_tokens: int
    output_tokens: int
    created_at: datetime
    updated_at: datetime


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
                conn.execute(self._insert_ignore(messages, ["session_id", "position"]), rows)
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
                conn.execute(self._insert_ignore(events, ["session_id", "seq"]), rows)
            # Row counts of multi-row INSERT .. ON CONFLICT are not reported on PostgreSQL (-1),
            # so any batch with content marks the session as updated.
            if (data.messages or data.events) and data.config is None:
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

    def messages_in(self, session_id: str, ranges: list[tuple[int, int]]) -> list[tuple[int, Message]]:
        """``(position, Message)`` pairs at positions in any of ``ranges`` (each ``[start, end)``), by position."""
        if not ranges:
            return []
        q = select(messages.c.position, messages.c.content_json).where(
            messages.c.session_id == session_id,
            or_(*(and_(messages.c.position >= start, messages.c.position < end) for start, end in ranges)),
        )
        with self._engine.connect() as conn:
            rows = conn.execute(q.order_by(messages.c.position)).all()
        return [(pos, Message.model_validate_json(body)) for pos, body in rows]

    def put_summary(self, session_id: str, summary_id: int, upto_position: int, profile: str, text_: str) -> None:
        """Insert or replace compaction summary ``summary_id`` (a retried compaction rewrites its own row)."""
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        stmt = dialect.insert(context_summaries).values(
            session_id=session_id,
            summary_id=summary_id,
            upto_position=upto_position,
            profile=profile,
            text=text_,
            created_at=_now(),
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["session_id", "summary_id"],
            set_={"upto_position": stmt.excluded.upto_position, "profile": stmt.excluded.profile, "text": stmt.excluded.text},
        )
        with self._write() as conn, conn.begin():
            conn.execute(stmt)

    def summary(self, session_id: str, summary_id: int) -> str | None:
        """The text of compaction summary ``summary_id``, or None when there is none."""
        q = select(context_summaries.c.text).where(
            context_summaries.c.session_id == session_id, context_summaries.c.summary_id == summary_id
        )
        with self._engine.connect() as conn:
            return conn.execute(q).scalar_one_or_none()

    def summaries(self, session_id: str) -> list[tuple[int, int, str]]:
        """Every compaction summary of the session as ``(summary_id, upto_position, text)``, oldest first."""
        q = (
            select(context_summaries.c.summary_id, context_summaries.c.upto_position, context_summaries.c.text)
            .where(context_summaries.c.session_id == session_id)
            .order_by(context_summaries.c.summary_id)
        )
        with self._engine.connect() as conn:
            return [(r[0], r[1], r[2]) for r in conn.execute(q).all()]

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

    def turn_events(self, session_id: str, turn_id: str) -> list[Event]:
        """The events of one turn, ordered by seq."""
        q = (
            select(events.c.body_json)
            .where(events.c.session_id == session_id, events.c.turn_id == turn_id)
            .order_by(events.c.seq)
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

    def last_delta_id(self, session_id: str) -> int:
        """The id of the session's newest delta, or 0: where a live stream starts reading."""
        with self._engine.connect() as conn:
            value = conn.execute(
                select(func.max(token_deltas.c.id)).where(token_deltas.c.session_id == session_id)
            ).scalar()
        return int(value or 0)

    # -- effect ledger -------------------------------------------------------------------

    def claim_effect(self, key: str, session_id: str, tool: str) -> tuple[bool, EffectRecord]:
        """Claim the effect ``key`` before performing it; at most one caller wins.

        Returns ``(True, record)`` (state ``claimed``) only to the caller whose claim took
        effect: the one that created the row, or the one that re-claimed a row in state
        ``not_applied`` (released by ``reconcile_effect``; its ``claimed_at`` is reset and
        its note kept). Every other caller gets ``(False, existing_record)``, whatever its
        state: ``applied``/``failed`` carry the recorded result, ``claimed`` means another
        attempt holds the claim and the outcome is unknown. The existing record's
        ``session_id`` and ``tool`` are the first claimer's, not the arguments.

        Atomic on both dialects: ``INSERT .. ON CONFLICT DO NOTHING``, then a conditional
        ``UPDATE .. WHERE state = 'not_applied'``, in one write transaction.
        """
        now = _now()
        c = effects.c
        with self._write() as conn, conn.begin():
            # RETURNING, not rowcount: psycopg reports rowcount -1 for these INSERTs.
            insert_stmt = (
                self._insert_ignore(effects, ["idempotency_key"])
                .values(
                    idempotency_key=key, session_id=session_id, tool=tool, state="claimed",
                    result_text=None, note=None, claimed_at=now, updated_at=now,
                )
                .returning(c.idempotency_key)
            )
            won = conn.execute(insert_stmt).first() is not None
            if not won:
                reclaim = (
                    update(effects)
                    .where(c.idempotency_key == key, c.state == "not_applied")
                    .values(state="claimed", result_text=None, claimed_at=now, updated_at=now)
                    .returning(c.idempotency_key)
                )
                won = conn.execute(reclaim).first() is not None
            record = self._effect_row(conn, key)
        assert record is not None  # inserted or already present, and never deleted
        return won, record

    def record_effect(self, key: str, state: Literal["applied", "failed"], result_text: str) -> EffectRecord:
        """Record the outcome of a claimed effect: ``claimed`` -> ``applied`` | ``failed``.

        Repeating the state the effect already has is a no-op returning the stored record
        (its ``result_text`` is not overwritten). Raises ``KeyError`` when ``key`` was never
        claimed, ``ValueError`` for ``state`` not ``applied``/``failed`` and for any other
        transition (e.g. ``applied`` -> ``failed``, or recording a ``not_applied`` effect).
        """
        if state not in ("applied", "failed"):
            raise ValueError(f"record_effect: state must be 'applied' or 'failed', not {state!r}")
        return self._close_claim(key, state, "recorded", result_text=result_text)

    def reconcile_effect(
        self, key: str, outcome: Literal["applied", "not_applied"], note: str | None = None
    ) -> EffectRecord:
        """An operator's answer for a ``claimed`` effect whose outcome is unknown.

        ``applied``: the state becomes ``applied`` (``result_text`` stays as it is, i.e. None;
        ``note`` is stored). ``not_applied``: the state becomes ``not_applied`` and the key may
        be claimed again (``note`` is stored). Repeating the outcome the effect already has is
        a no-op returning the stored record. Raises ``KeyError`` for an unknown key and
        ``ValueError`` for an unknown outcome or when the effect is in another final state
        (``applied``/``failed`` recorded by an attempt, or the opposite reconciliation).
        """
        if outcome not in ("applied", "not_applied"):
            raise ValueError(f"reconcile_effect: outcome must be 'applied' or 'not_applied', not {outcome!r}")
        return self._close_claim(key, outcome, "reconciled", note=note)

    def _close_claim(self, key: str, state: str, verb: str, **values: Any) -> EffectRecord:
        """Move a ``claimed`` effect to ``state`` (with ``values``) in one transaction; repeating is a no-op."""
        c = effects.c
        with self._write() as conn, conn.begin():
            current = self._effect_row(conn, key, for_update=True)
            if current is None:
                raise KeyError(key)
            if current.state == state:
                return current
            if current.state != "claimed":
                raise ValueError(
                    f"effect {key!r} is {current.state!r}; only a 'claimed' effect can be {verb} as {state!r}"
                )
            conn.execute(
                update(effects)
                .where(c.idempotency_key == key, c.state == "claimed")
                .values(state=state, updated_at=_now(), **values)
            )
            record = self._effect_row(conn, key)
        assert record is not None
        return record

    def effect(self, key: str) -> EffectRecord | None:
        """The ledger row for ``key``, or None when it was never claimed."""
        with self._engine.connect() as conn:
            return self._effect_row(conn, key)

    def effects(self, session_id: str) -> list[EffectRecord]:
        """The session's effects ordered by ``claimed_at``, then ``idempotency_key``."""
        c = effects.c
        q = select(effects).where(c.session_id == session_id).order_by(c.claimed_at, c.idempotency_key)
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [_effect_record(r) for r in rows]

    @staticmethod
    def _effect_row(conn: Connection, key: str, for_update: bool = False) -> EffectRecord | None:
        q = select(effects).where(effects.c.idempotency_key == key)
        if for_update:
            q = q.with_for_update()  # PostgreSQL row lock; SQLite already holds the write lock
        row = conn.execute(q).one_or_none()
        return None if row is None else _effect_record(row)

    # -- usage receipts ------------------------------------------------------------------

    def record_usage(
        self,
        session_id: str,
        turn_id: str,
        round: int,
        attempt: int,
        status: Literal["started", "completed", "interrupted"],
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        """Upsert the receipt at (session_id, turn_id, round, attempt).

        A new receipt is inserted; an existing one gets ``status`` and the token counts
        (``created_at`` is kept), unless it is already ``completed``: a completed receipt
        is never changed, so a late ``started``/``interrupted`` write cannot downgrade it.
        Raises ``ValueError`` for an unknown ``status``.
        """
        if status not in USAGE_STATUSES:
            raise ValueError(f"record_usage: status must be one of {USAGE_STATUSES}, not {status!r}")
        now = _now()
        dialect = postgresql if self._dialect == "postgresql" else sqlite
        stmt = dialect.insert(usage_receipts).values(
            session_id=session_id, turn_id=turn_id, round=round, attempt=attempt, status=status,
            input_tokens=input_tokens, output_tokens=output_tokens, created_at=now, updated_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["session_id", "turn_id", "round", "attempt"],
            set_={k: stmt.excluded[k] for k in ("status", "input_tokens", "output_tokens", "updated_at")},
            where=usage_receipts.c.status != "completed",
        )
        with self._write() as conn, conn.begin():
            conn.execute(stmt)

    def usage_receipts(self, session_id: str) -> list[UsageReceipt]:
        """The session's receipts ordered by ``turn_id``, ``round``, ``attempt``.

        ``turn_id`` orders as text; it is not turn chronology unless turn ids sort by time.
        """
        c = usage_receipts.c
        q = select(usage_receipts).where(c.session_id == session_id).order_by(c.turn_id, c.round, c.attempt)
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [
            UsageReceipt(
                session_id=r.session_id, turn_id=r.turn_id, round=r.round, attempt=r.attempt, status=r.status,
                input_tokens=r.input_tokens, output_tokens=r.output_tokens,
                created_at=_utc(r.created_at), updated_at=_utc(r.updated_at),
            )
            for r in rows
        ]


def _effect_record(r: Any) -> EffectRecord:
    return EffectRecord(
        idempotency_key=r.idempotency_key, session_id=r.session_id, tool=r.tool, state=r.state,
        result_text=r.result_text, note=r.note, claimed_at=_utc(r.claimed_at), updated_at=_utc(r.updated_at),
    )


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
