"""Streamed model text (token deltas): written by the model activity as it streams, read by
clients that follow a turn live. They never enter workflow history."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, insert, select

from agentrt.store._base import StoreBase, text_column
from agentrt.store._models import token_deltas


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


class DeltaTable(StoreBase):
    """Table ``token_deltas``."""

    def append_deltas(
        self,
        session_id: str,
        turn_id: str,
        round: int,
        attempt: int,
        texts: list[str],
        start_idx: int,
        *,
        conn: Connection | None = None,
    ) -> None:
        """Store streamed text chunks ``texts`` as idx ``start_idx``, ``start_idx + 1``, ...

        Not deduplicated: a retried model call writes under its own ``attempt``.
        """
        if not texts:
            return
        now = self._now()
        rows = [
            {
                "session_id": session_id, "turn_id": turn_id, "round": round, "attempt": attempt,
                "idx": start_idx + i, "text": self._seal(text_column(chunk), f"token_deltas/{session_id}"), "created_at": now,
            }
            for i, chunk in enumerate(texts)
        ]
        with self._writing(conn) as conn:
            conn.execute(self._statement("insert token_deltas", lambda: insert(token_deltas)), rows)
            self._stream_grew(conn, session_id)

    def deltas(self, session_id: str, after_id: int = 0, limit: int = 1000, *, turn_id: str | None = None) -> list[TokenDelta]:
        """The session's deltas with ``id > after_id`` (of turn ``turn_id`` only, when given: read
        through the (session, turn) index, so a long session's earlier turns cost nothing), in id
        order, at most ``limit``."""
        c = token_deltas.c
        q = select(c.id, c.turn_id, c.round, c.attempt, c.idx, c.text).where(c.session_id == session_id, c.id > after_id)
        if turn_id is not None:
            q = q.where(c.turn_id == turn_id)
        q = q.order_by(c.id).limit(limit)
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        context = f"token_deltas/{session_id}"
        return [
            TokenDelta(id=r.id, turn_id=r.turn_id, round=r.round, attempt=r.attempt, idx=r.idx, text=self._open(r.text, context))
            for r in rows
        ]

    def last_delta_id(self, session_id: str) -> int:
        """The id of the session's newest delta, or 0: where a live stream starts reading."""
        with self._engine.connect() as conn:
            value = conn.execute(
                select(func.max(token_deltas.c.id)).where(token_deltas.c.session_id == session_id)
            ).scalar()
        return int(value or 0)
