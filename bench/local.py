"""A whole agentrt on one machine for benchmarks and recordings: a dev server, a store, a worker and a client.

Everything lives in a temporary directory and stops when the ``async with`` block ends.
"""

from __future__ import annotations

import tempfile
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence
from typing import AsyncIterator, Callable

from temporalio.client import Client

from agentrt import Agent
from agentrt.client import AgentClient, connect
from agentrt.schemas import McpServerConfig
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker


@dataclass
class LocalStack:
    """What ``local_stack`` started: ``root`` is its directory (workspaces and scripts may go there)."""

    root: Path
    server: DevServer
    store: Store
    temporal: Client
    client: AgentClient
    config: AgentrtConfig


@asynccontextmanager
async def local_stack(
    owner: str, server_args: list[str] | None = None, mcp_servers: Callable[[Path], dict[str, McpServerConfig]] | None = None,
    agents: Sequence[Agent] = (),
) -> AsyncIterator[LocalStack]:
    """A dev server on free ports (``server_args`` added to its command line), a SQLite store,
    a worker on a fresh task queue and a client acting as ``owner``; ``mcp_servers`` gives the
    worker's MCP servers from the stack's temporary directory, ``agents`` its user agents."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = DevServer.on_free_ports(root / "server", server_args or [])
        await server.start()
        try:
            config = AgentrtConfig(
                temporal_address=server.address,
                task_queue=f"local-{uuid.uuid4().hex[:8]}",
                database_url=f"sqlite:///{root / 'agentrt.db'}",
                mcp_servers=mcp_servers(root) if mcp_servers is not None else {},
            )
            store = Store.open(config.database_url)
            try:
                temporal = await connect(server.address, plugin=AgentrtPlugin(config, store))
                client = AgentClient(temporal, task_queue=config.task_queue, principal=owner, store=store)
                async with build_worker(temporal, config, store, agents=agents):
                    yield LocalStack(root=root, server=server, store=store, temporal=temporal, client=client, config=config)
            finally:
                store.close()
        finally:
            server.stop()
