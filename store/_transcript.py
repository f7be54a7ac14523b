"""Sessions, the transcript, the event projection and compaction summaries: what a session
said and did, written by activities (idempotently) and read by the model activities and
the client, so a session's content never has to travel through workflow history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, Update, and_, bindparam, or_, select, update

from agentrt.schemas import EVENT_ADAPTER, Event, Message, SessionConfig, StoreAppendInput
from agentrt.store._audit import AuditTable
from agentrt.store._base import utc
from agentrt.store._models import context_summaries, events, messages, sessions

# messages_in queries for up to this many ranges are built once (a context plan has a few).
CACHED_RANGE_COUNTS = 8
# Session ids ``session_titles`` reads in one query.
TITLE_BATCH = 500


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


class TranscriptTables(AuditTable):
    """Tables ``sessions``, ``messages``, ``events`` and ``context_summaries``."""

    def append(self, data: StoreAppendInput, *, conn: Connection | None = None) -> None:
        """Write one batch in one transaction (``conn``'s, when given); safe to repeat.

        ``data.config`` (when given) upserts the session row (``created_at`` is kept).
        Messages are inserted by (session_id, position) and events by (session_id, seq);
        rows that already exist are left as they are, so a retried append changes nothing. The
        acts of principals among the events (an approval, a cancel ...) are written to the audit
        log, each once.
        """
        now = self._now()
        sid = data.session_id
        with self._writing(conn) as conn:
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
                stmt = self._upsert(
                    sessions, ["session_id"], ["owner", "workspace", "profile", "title", "config_json", "updated_at"]
                )
                conn.execute(stmt, values)
            if data.messages:
                rows = [
                    {
                        "session_id": sid,
                        "position": pm.position,
                        "turn_id": pm.turn_id,
                        "role": pm.message.role,
                        "content_json": self._seal(pm.message.model_dump_json(), f"messages/{sid}"),
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
                        "body_json": self._seal(ev.model_dump_json(), f"events/{sid}"),
                    }
                    for ev in data.events
                ]
                conn.execute(self._insert_ignore(events, ["session_id", "seq"]), rows)
                self._stream_grew(conn, sid)
                self._audit_session(conn, sid, data.config, data.events)
            # Row counts of multi-row INSERT .. ON CONFLICT are not reported on PostgreSQL (-1),
            # so any batch with content marks the session as updated.
            if (data.messages or data.events) and data.config is None:
                conn.execute(self._touch_session(), {"sid": sid, "now": now})

    def _touch_session(self) -> Update:
        """``UPDATE sessions SET updated_at = :now WHERE session_id = :sid`` (built once)."""
        return self._statement(
            "touch",
            lambda: update(sessions).where(sessions.c.session_id == bindparam("sid")).values(updated_at=bindparam("now")),
        )

    def put_message(
        self, session_id: str, position: int, turn_id: str | None, message: Message, *, conn: Connection | None = None
    ) -> None:
        """Insert or replace the message at (session_id, position).

        Used for results written by an activity: a retried attempt replaces what an
        interrupted one wrote, so the store matches the result the workflow accepted.
        """
        stmt = self._upsert(messages, ["session_id", "position"], ["turn_id", "role", "content_json"])
        values = dict(
            session_id=session_id,
            position=position,
            turn_id=turn_id,
            role=message.role,
            content_json=self._seal(message.model_dump_json(), f"messages/{session_id}"),
        )
        with self._writing(conn) as conn:
            conn.execute(stmt, values)

    def messages(
        self, session_id: str, upto_position: int | None = None, *, conn: Connection | None = None
    ) -> list[tuple[int, Message]]:
        """``(position, Message)`` pairs ordered by position; only positions < ``upto_position`` when given."""
        q = select(messages.c.position, messages.c.content_json).where(messages.c.session_id == session_id)
        if upto_position is not None:
            q = q.where(messages.c.position < upto_position)
        with self._reading(conn) as conn:
            rows = conn.execute(q.order_by(messages.c.position)).all()
        return self._parsed(session_id, rows)

    def messages_in(
        self, session_id: str, ranges: list[tuple[int, int]], *, conn: Connection | None = None
    ) -> list[tuple[int, Message]]:
        """``(position, Message)`` pairs at positions in any of ``ranges`` (each ``[start, end)``), by position."""
        if not ranges:
            return []
        values: dict[str, object] = {"sid": session_id}
        for i, (start, end) in enumerate(ranges):
            values[f"start{i}"], values[f"end{i}"] = start, end
        with self._reading(conn) as conn:
            rows = conn.execute(self._messages_in_statement(len(ranges)), values).all()
        return self._parsed(session_id, rows)

    def _parsed(self, session_id: str, rows: Sequence[Any]) -> list[tuple[int, Message]]:
        """``(position, Message)`` of ``(position, stored value)`` rows, each parsed once per process
        (``ParsedMessages``: the messages are shared, never to be changed in place)."""
        context = f"messages/{session_id}"
        return [
            (pos, self._parsed_messages.parse(session_id, pos, body, lambda value: self._open(value, context)))
            for pos, body in rows
        ]

    def _messages_in_statement(self, count: int) -> Select:
        """The ``messages_in`` query for ``count`` ranges (bound as ``start<i>``, ``end<i>``), built
        once per count up to ``CACHED_RANGE_COUNTS``."""

        def build() -> Select:
            within = (
                and_(messages.c.position >= bindparam(f"start{i}"), messages.c.position < bindparam(f"end{i}"))
                for i in range(count)
            )
            return (
                select(messages.c.position, messages.c.content_json)
                .where(messages.c.session_id == bindparam("sid"), or_(*within))
                .order_by(messages.c.position)
            )

        return self._statement(f"messages_in {count}", build) if count <= CACHED_RANGE_COUNTS else build()

    def put_summary(self, session_id: str, summary_id: int, upto_position: int, profile: str, text_: str) -> None:
        """Insert or replace compaction summary ``summary_id`` (a retried compaction rewrites its own row)."""
        stmt = self._upsert(context_summaries, ["session_id", "summary_id"], ["upto_position", "profile", "text"])
        values = dict(
            session_id=session_id,
            summary_id=summary_id,
            upto_position=upto_position,
            profile=profile,
            text=self._seal(text_, f"context_summaries/{session_id}"),
            created_at=self._now(),
        )
        with self.transaction() as conn:
            conn.execute(stmt, values)

    def summary(self, session_id: str, summary_id: int, *, conn: Connection | None = None) -> str | None:
        """The text of compaction summary ``summary_id``, or None when there is none."""
        q = select(context_summaries.c.text).where(
            context_summaries.c.session_id == session_id, context_summaries.c.summary_id == summary_id
        )
        with self._reading(conn) as conn:
            value = conn.execute(q).scalar_one_or_none()
        return None if value is None else self._open(value, f"context_summaries/{session_id}")

    def summaries(self, session_id: str) -> list[tuple[int, int, str]]:
        """Every compaction summary of the session as ``(summary_id, upto_position, text)``, oldest first."""
        q = (
            select(context_summaries.c.summary_id, context_summaries.c.upto_position, context_summaries.c.text)
            .where(context_summaries.c.session_id == session_id)
            .order_by(context_summaries.c.summary_id)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [(r[0], r[1], self._open(r[2], f"context_summaries/{session_id}")) for r in rows]

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
        return [EVENT_ADAPTER.validate_json(self._open(body, f"events/{session_id}")) for body in bodies]

    def turn_events(self, session_id: str, turn_id: str) -> list[Event]:
        """The events of one turn, ordered by seq."""
        q = (
            select(events.c.body_json)
            .where(events.c.session_id == session_id, events.c.turn_id == turn_id)
            .order_by(events.c.seq)
        )
        with self._engine.connect() as conn:
            bodies = conn.execute(q).scalars().all()
        return [EVENT_ADAPTER.validate_json(self._open(body, f"events/{session_id}")) for body in bodies]

    def session_config(self, session_id: str, *, conn: Connection | None = None) -> SessionConfig | None:
        """The session's latest ``SessionConfig``, or None when the session is unknown."""
        with self._reading(conn) as conn:
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
                title=r.title, created_at=utc(r.created_at), updated_at=utc(r.updated_at),
            )
            for r in rows
        ]

    def session_titles(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The title of each of ``session_ids`` that has one (``SessionConfig.title``, as update
        ``rename`` last set it), by session id; ids without a title or a row are left out. Reads
        ``TITLE_BATCH`` ids a query."""
        found: dict[str, str] = {}
        ids = list(dict.fromkeys(session_ids))
        with self._engine.connect() as conn:
            for start in range(0, len(ids), TITLE_BATCH):
                q = select(sessions.c.session_id, sessions.c.title).where(
                    sessions.c.session_id.in_(ids[start : start + TITLE_BATCH]), sessions.c.title.is_not(None)
                )
                found.update({r.session_id: r.title for r in conn.execute(q)})
        return found
