"""Which configuration a worker uses for an MCP server, and whether it may use the server at all:
agentrt.toml's ``[mcp.servers.NAME]`` tables overlaid with the servers operators added or changed
at run time (the store's ``mcp_server_changes``, read at most every ``ttl_seconds``), and the
latest trust decision on the server (read at each use, so a revocation holds at once). Workers
pick up a change without a restart: the next listing or call of the server uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrt.schemas import McpServerChange, McpServerConfig, McpServerUnavailable, McpTrustDecision

if TYPE_CHECKING:
    from agentrt.store import Store

# How long a worker reuses its read of the servers operators changed at run time (seconds).
REGISTRY_TTL_SECONDS = 2.0


@dataclass(frozen=True)
class Resolved:
    """A server a worker may use now: its ``config`` and the operator's latest trust ``decision`` on
    it (None: none was made; its ``trust`` holds)."""

    config: McpServerConfig
    decision: McpTrustDecision | None


class ServerRegistry:
    """The servers of ``configured`` (agentrt.toml's, by name) and, with a ``store``, those of the
    store's registry, which win over agentrt.toml's for the same name. ``ttl_seconds``: how long a
    read of the store's registry is reused (0: read at each use)."""

    def __init__(self, configured: Mapping[str, McpServerConfig], store: Store | None, ttl_seconds: float = REGISTRY_TTL_SECONDS) -> None:
        self._configured = dict(configured)
        self._store = store
        self._ttl = ttl_seconds
        self._changes: dict[str, McpServerChange] = {}
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    @property
    def follows_store(self) -> bool:
        """Whether this registry reads the store (its changes and trust decisions) at all."""
        return self._store is not None

    async def resolve(self, name: str) -> Resolved:
        """The configuration ``name`` has now and the latest trust decision on it.

        Raises ``McpServerUnavailable`` when neither agentrt.toml nor the store has ``name``, or
        an operator revoked it (with who and why)."""
        config = (await self._runtime()).get(name) or self._configured.get(name)
        if config is None:
            raise McpServerUnavailable(name, f"this worker has no [mcp.servers.{name}] in its configuration, and no operator added it")
        decision = None if self._store is None else await asyncio.to_thread(self._store.mcp_trust, name)
        if decision is not None and decision.trust == "revoked":
            raise McpServerUnavailable(name, f"revoked by {decision.principal} at {decision.at:%Y-%m-%d %H:%M:%S}Z: {decision.reason[:200]}")
        return Resolved(config, decision)

    async def _runtime(self) -> dict[str, McpServerConfig]:
        """The configurations of the store's registry by name, read again once ``ttl_seconds`` passed."""
        if self._store is None:
            return {}
        loop = asyncio.get_running_loop()
        async with self._lock:
            if self._read_at is None or loop.time() - self._read_at >= self._ttl:
                self._changes = await asyncio.to_thread(self._store.mcp_server_changes)
                self._read_at = loop.time()
        return {name: change.config for name, change in self._changes.items()}
