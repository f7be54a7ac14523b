"""Activity ``memory.decide``: the owner's decision on a proposed memory, recorded in the store
with the decision's event in one transaction, so the store never shows one without the other."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrt.schemas import (
    MEMORY_DECIDE,
    MemoryAlreadyDecided,
    MemoryDecideInput,
    MemoryNotFound,
    MemoryRecord,
    StoreAppendInput,
)

if TYPE_CHECKING:
    from agentrt.store import Store


class MemoryActivities:
    """Holds the worker's store."""

    def __init__(self, store: "Store") -> None:
        self._store = store

    @activity.defn(name=MEMORY_DECIDE)
    async def decide(self, input: MemoryDecideInput) -> MemoryRecord:
        """Accept or reject proposal ``input.memory_id`` and write ``input.events`` (idempotent by
        (session_id, seq)); returns the memory as stored. Safe to retry: the decision it already
        has returns it unchanged.

        Raises non-retryable ``ApplicationError`` typed ``MemoryNotFound`` (unknown, or not
        ``input.principal``'s) or ``MemoryAlreadyDecided`` (the other decision was taken, or the
        memory was never a proposal); nothing is written then.
        """
        try:
            return await asyncio.to_thread(self._decide, input)
        except MemoryNotFound as err:
            raise ApplicationError(str(err), {"memory_id": err.memory_id}, type=type(err).__name__, non_retryable=True) from err
        except MemoryAlreadyDecided as err:
            details = {"memory_id": err.memory_id, "status": err.status, "decided_by": err.decided_by}
            raise ApplicationError(str(err), details, type=type(err).__name__, non_retryable=True) from err

    def _decide(self, input: MemoryDecideInput) -> MemoryRecord:
        with self._store.transaction() as conn:
            record = self._store.decide_memory(input.memory_id, input.decision, input.principal, input.reason, conn=conn)
            if input.events:
                self._store.append(StoreAppendInput(session_id=input.session_id, events=input.events), conn=conn)
        return record
