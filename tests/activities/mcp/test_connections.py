"""The connection table of the worker's MCP servers, without a server: a call that arrives while
an ended connection's owner winds down waits for it, and never holds the event loop."""

from __future__ import annotations

import asyncio
import threading

from agentrt.activities.mcp._connections import Connection, Connections
from agentrt.schemas import McpServerConfig, McpServerUnavailable


def test_a_call_while_an_ended_connection_winds_down_waits_for_its_owner_without_holding_the_loop() -> None:
    # Seen under load: the relay stopped a server whose answer was too long; the next call found
    # the connection ended and its start done, and awaited that done start again and again, a
    # loop that never yielded, so the owner never finished and the worker's event loop was held.
    outcome: list[object] = []

    async def scenario() -> None:
        config = McpServerConfig(name="evil", command="/bin/true")
        connections = Connections({"evil": config}, launcher=None, events=None)  # type: ignore[arg-type]
        srv = connections.server("evil")
        loop = asyncio.get_running_loop()
        conn = Connection()
        conn.ended.set()
        srv.conn, srv.starting = conn, loop.create_future()
        srv.starting.set_result(conn)
        srv.retry_at = loop.time() + 3600  # after the owner settles: backing off, past the deadline

        async def winding_down() -> None:
            await asyncio.sleep(0.05)
            srv.conn, srv.starting = None, None

        srv.owner = asyncio.create_task(winding_down())
        try:
            await connections.connection(srv, deadline=loop.time() + 5)
        except McpServerUnavailable as err:
            outcome.append(err)

    thread = threading.Thread(target=lambda: asyncio.run(scenario()), daemon=True)
    thread.start()
    thread.join(30)

    assert not thread.is_alive(), "connection() held its event loop"
    assert len(outcome) == 1 and "restarts in" in str(outcome[0])
