"""The record of MCP connection changes: ``McpServerEvent`` rows, written in order by one writer
task (the store is synchronous: writes go through ``asyncio.to_thread``), so that recording an
event never blocks the connection it is about."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from agentrt.schemas import McpServerEvent

if TYPE_CHECKING:
    from agentrt.store import Store

logger = logging.getLogger(__name__)

# The values of ``McpServerEvent.type``.
EventKind = Literal["McpServerStarting", "McpServerReady", "McpServerStopped", "McpServerFailed"]


class ServerEvents:
    """Queues the events of this worker (``worker``, its identity in them) for ``store``; with no
    store they go nowhere."""

    def __init__(self, store: Store | None, worker: str) -> None:
        self._store = store
        self._worker = worker
        self._events: asyncio.Queue[McpServerEvent] | None = None
        self._writer: asyncio.Task[None] | None = None

    def emit(self, server: str, kind: EventKind, **fields: Any) -> None:
        """Queue an event of type ``kind`` (``McpServerReady`` ...) about ``server``, stamped now;
        ``fields`` are the event's own. Needs a running loop; never waits."""
        if self._store is None:
            return
        event = McpServerEvent(type=kind, server=server, worker=self._worker, at=datetime.now(UTC), **fields)
        if self._events is None:
            self._events = asyncio.Queue()
        self._events.put_nowait(event)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_events(self._events), name="mcp-server-events")

    async def flush(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for the queued events to be written (a warning is
        logged if they are not), then stop the writer; a later ``emit`` starts a new one."""
        if self._events is not None:
            try:
                await asyncio.wait_for(self._events.join(), timeout=timeout)
            except TimeoutError:
                logger.warning("MCP server events not written within %s s", timeout)
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.wait({self._writer})
            self._writer = None

    async def _write_events(self, queue: asyncio.Queue[McpServerEvent]) -> None:
        assert self._store is not None
        while True:
            event = await queue.get()
            try:
                await asyncio.to_thread(self._store.record_mcp_server_event, event)
            except Exception:  # a lost event must not stop the next ones
                logger.exception("could not record %s of MCP server %r", event.type, event.server)
            finally:
                queue.task_done()
