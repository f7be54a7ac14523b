"""The fields every event has: ``seq`` (its number in its session, task or graph), ``at`` (when
it happened, UTC) and ``turn_id`` (the turn it belongs to, if any)."""

from __future__ import annotations

from datetime import datetime

from agentrt.schemas._base import Model


class EventBase(Model):
    seq: int = 0
    at: datetime | None = None
    turn_id: str | None = None
