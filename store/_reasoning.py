"""Reasoning blocks: what a model reasoned before a reply, kept beside the transcript (never in
workflow history) to be shown as reasoning and sent back to providers that require it
(Anthropic thinking with tool use, OpenAI Responses reasoning items)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import TypeAdapter
from sqlalchemy import Connection, select

from agentrt.schemas import ReasoningBlock
from agentrt.store._base import StoreBase
from agentrt.store._models import reasoning

_BLOCKS = TypeAdapter(list[ReasoningBlock])


class ReasoningTable(StoreBase):
    """Table ``reasoning``: one row of blocks per assistant message (session_id, position)."""

    def put_reasoning(
        self,
        session_id: str,
        position: int,
        blocks: list[ReasoningBlock],
        *,
        turn_id: str | None = None,
        round: int | None = None,
        attempt: int = 1,
        conn: Connection | None = None,
    ) -> None:
        """Store ``blocks`` for the reply at ``position``, replacing an earlier attempt's: the
        attempt that writes last is the one whose reply the workflow records. Nothing is
        written for an empty list."""
        if not blocks:
            return
        stmt = self._upsert(reasoning, ["session_id", "position"], ["turn_id", "round", "attempt", "blocks_json", "created_at"])
        values = dict(
            session_id=session_id, position=position, turn_id=turn_id, round=round, attempt=attempt,
            blocks_json=self._seal(_BLOCKS.dump_json(blocks).decode(), f"reasoning/{session_id}"), created_at=self._now(),
        )
        with self._writing(conn) as conn:
            conn.execute(stmt, values)

    def reasoning_at(
        self, session_id: str, positions: Iterable[int], *, conn: Connection | None = None
    ) -> dict[int, list[ReasoningBlock]]:
        """The stored blocks of the replies at ``positions``, by position (positions without any left out)."""
        wanted = sorted(set(positions))
        if not wanted:
            return {}
        c = reasoning.c
        q = select(c.position, c.blocks_json).where(c.session_id == session_id, c.position.in_(wanted))
        with self._reading(conn) as conn:
            rows = conn.execute(q).all()
        return {position: _BLOCKS.validate_json(self._open(body, f"reasoning/{session_id}")) for position, body in rows}
