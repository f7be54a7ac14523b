"""Usage receipts: the tokens of every model call attempt, written before and after the call,
so a request retried after a crash is a fresh request and the tokens of the interrupted one
are not lost from the accounts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import Connection, select

from agentrt.store._base import StoreBase, utc
from agentrt.store._models import USAGE_STATUSES, usage_receipts

# The upsert's condition, built once: a completed receipt is never changed.
_NOT_COMPLETED = usage_receipts.c.status != "completed"


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
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class UsageReceiptTable(StoreBase):
    """Table ``usage_receipts``."""

    def record_usage(
        self,
        session_id: str,
        turn_id: str,
        round: int,
        attempt: int,
        status: Literal["started", "completed", "interrupted"],
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
        cost_usd: float = 0.0,
        tool_calls: int = 0,
        conn: Connection | None = None,
    ) -> None:
        """Upsert the receipt at (session_id, turn_id, round, attempt); token counts as in
        ``schemas.Usage`` (cache and reasoning tokens are subsets of input and output);
        ``cost_usd`` the attempt's price in US dollars, ``tool_calls`` the calls its reply asked for
        (a tenant's daily quotas sum them).

        A new receipt is inserted; an existing one gets ``status`` and the token counts
        (``created_at`` is kept), unless it is already ``completed``: a completed receipt
        is never changed, so a late ``started``/``interrupted`` write cannot downgrade it.
        Raises ``ValueError`` for an unknown ``status``.
        """
        if status not in USAGE_STATUSES:
            raise ValueError(f"record_usage: status must be one of {USAGE_STATUSES}, not {status!r}")
        now = self._now()
        stmt = self._upsert(
            usage_receipts,
            ["session_id", "turn_id", "round", "attempt"],
            [
                "status", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
                "cost_usd", "tool_calls", "updated_at",
            ],
            where=_NOT_COMPLETED,
            where_name="not completed",
        )
        values = dict(
            session_id=session_id, turn_id=turn_id, round=round, attempt=attempt, status=status,
            input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens, reasoning_tokens=reasoning_tokens, cost_usd=cost_usd,
            tool_calls=tool_calls, created_at=now, updated_at=now,
        )
        with self._writing(conn) as conn:
            conn.execute(stmt, values)

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
                created_at=utc(r.created_at), updated_at=utc(r.updated_at),
                cache_read_tokens=r.cache_read_tokens, cache_write_tokens=r.cache_write_tokens,
                reasoning_tokens=r.reasoning_tokens,
            )
            for r in rows
        ]
