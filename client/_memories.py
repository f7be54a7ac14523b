"""Memory on the client side: the principal's memories, and the owner's decisions on proposals.

A ``workspace`` or ``user`` memory a session writes is a proposal until its owner accepts it;
the decision goes to the proposing session (update ``decide_memory``), which records it as an
event, unless that session has ended: then it is written to the store directly.
``AgentClient.memories`` holds both.
"""

from __future__ import annotations

import asyncio
import builtins
from typing import TYPE_CHECKING, Any

from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._connection import Connection
from agentrt.client._session_calls import SessionCalls
from agentrt.schemas import (
    ConfigurationError,
    MemoryAlreadyDecided,
    MemoryDecision,
    MemoryNotFound,
    MemoryRecord,
    MemoryScope,
    MemoryStatus,
    RequestRejected,
    SessionNotFound,
)
from agentrt.store import Store

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle


class Memories:
    """A client's memories (``AgentClient.memories``): its principal's, and the owner's decisions on proposals. Both need the client's store."""

    def __init__(self, connection: Connection, calls: SessionCalls) -> None:
        self._connection = connection
        self._calls = calls

    async def list(
        self, status: MemoryStatus | None = None, scope: MemoryScope | None = None, *, limit: int = 200
    ) -> builtins.list[MemoryRecord]:
        """This client's principal's memories (at most ``limit``), of every status and scope unless
        ``status`` / ``scope`` say which. Raises ``ConfigurationError`` without a store."""
        store = self._connection.needs_store("memories")
        return await asyncio.to_thread(store.memories, self._connection.principal, status=status, scope=scope, limit=limit)

    async def __call__(
        self, status: MemoryStatus | None = None, scope: MemoryScope | None = None, *, limit: int = 200
    ) -> builtins.list[MemoryRecord]:
        """``list``: ``client.memories(...)``, the flat call of earlier releases, still lists them."""
        return await self.list(status, scope, limit=limit)

    async def decide(self, memory_id: str, decision: str, reason: str | None = None) -> MemoryRecord:
        """Accept (``decision="accept"``) or reject (``"reject"``) a proposed memory of this client's
        principal; returns the memory as stored after the decision.

        The decision goes to the session that proposed the memory (update ``decide_memory``), which
        records ``MemoryAccepted`` / ``MemoryRejected``. When that session's workflow has closed
        (archived, or gone from Temporal), the decision is written to the store directly and no
        session event records it. Raises ``MemoryNotFound`` for an unknown memory and for another
        principal's alike (a stranger learns nothing), ``MemoryAlreadyDecided`` when it is not a
        pending proposal, ``ConfigurationError`` without a store or for another ``decision``.
        """
        if decision not in ("accept", "reject"):
            raise ConfigurationError(f"a memory decision is accept or reject, not {decision!r}")
        store = self._connection.needs_store("decide_memory")
        record = await self._proposal(store, memory_id)
        update = MemoryDecision(memory_id=memory_id, decision=decision, principal=self._connection.principal, reason=reason)  # type: ignore[arg-type]
        try:
            if await self._session_closed(record.session_id):
                return await self._decide_in_store(store, update)
            await self._calls.execute(record.session_id, "decide_memory", "decide_memory", update)
        except (RequestRejected, SessionNotFound):
            # Decided meanwhile, or the session ended meanwhile: say which; else the session's reason.
            await self._proposal(store, memory_id)
            if not await self._session_closed(record.session_id):
                raise
            return await self._decide_in_store(store, update)
        return await self._proposal(store, memory_id, decided=True)

    async def forget(self, memory_id: str) -> MemoryRecord:
        """Delete a memory of this client's principal (any status) and return it as it was: no
        session sees it from then on, and it no longer counts toward the owner's limits. Raises
        ``MemoryNotFound`` for an unknown memory and another principal's alike,
        ``ConfigurationError`` without a store."""
        store = self._connection.needs_store("forget_memory")
        return await asyncio.to_thread(store.forget_memory, memory_id, self._connection.principal)

    async def _proposal(self, store: Store, memory_id: str, *, decided: bool = False) -> MemoryRecord:
        """The principal's memory ``memory_id``: a pending proposal unless ``decided``."""
        record = await asyncio.to_thread(store.memory, memory_id)
        if record is None or record.owner != self._connection.principal:
            raise MemoryNotFound(memory_id)
        if not decided and record.status != "proposed":
            raise MemoryAlreadyDecided(memory_id, record.status, record.decided_by)
        return record

    async def _session_closed(self, session_id: str) -> bool:
        """True when the session's workflow has closed, or Temporal no longer knows it."""
        try:
            description = await self._calls.handle(session_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return True
            raise
        return description.close_time is not None

    async def _decide_in_store(self, store: Store, update: MemoryDecision) -> MemoryRecord:
        return await asyncio.to_thread(store.decide_memory, update.memory_id, update.decision, update.principal, update.reason)
