"""Activity ``store.append``: the workflow's staged messages and events, written idempotently."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import activity

from agentrt.activities import _attempts
from agentrt.schemas import STORE_APPEND, StoreAppendInput

if TYPE_CHECKING:
    from agentrt.store import Store


class StoreActivities:
    def __init__(self, store: "Store") -> None:
        self._store = store

    @activity.defn(name=STORE_APPEND)
    async def append(self, input: StoreAppendInput) -> None:
        """Insert messages by (session_id, position) and events by (session_id, seq); repeats are no-ops.

        Heartbeats while it writes (naming this worker process): a write that waits on a busy
        database is not mistaken for a dead worker, and one whose worker died is retried
        elsewhere after the session's heartbeat timeout, not after the call's 30 s bound."""
        async with _attempts.heartbeating():
            await asyncio.to_thread(self._store.append, input)
