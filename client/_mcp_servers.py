"""Operators' changes of the MCP servers at run time, checked and recorded in the store with who
and why (``AgentClient.add_mcp_server``, ``change_mcp_server``, ``revoke_mcp_server``; ``agentrt
mcp add|change|revoke``; ``/v1/mcp/servers``), and the servers as every worker sees them
(``mcp_servers_view``). Workers use a change from their next listing or call of the server on,
without a restart (``activities/mcp/_registry.py``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from agentrt.client._mcp_trust import MAX_TRUST_REASON_CHARS
from agentrt.schemas import (
    SERVER_NAME_PATTERN,
    InvalidMcpServer,
    McpServerChange,
    McpServerConfig,
    McpServerNotFound,
    McpTrustDecision,
    Model,
    RequestRejected,
)
from agentrt.store import Store

__all__ = ["McpServerView", "change_mcp_server", "mcp_servers_view", "revoke_mcp_server"]

# The most characters of a server's configuration (its JSON) an operator may give at run time.
MAX_CONFIG_CHARS = 64_000


class McpServerView(Model):
    """One MCP server as workers see it now (``GET /v1/mcp/servers``): ``name``; ``source``
    ``agentrt.toml`` (the caller's configuration) or ``store`` (an operator's change, which wins);
    ``change``: that change (who, when, why, the configuration), None for agentrt.toml's; ``trust``
    in force (``revoked``: no worker lists or calls it; None: as the workers' agentrt.toml says) and
    the ``trust_decision`` behind it, if any."""

    name: str
    source: Literal["agentrt.toml", "store"]
    transport: Literal["stdio", "http"] | None = None
    change: McpServerChange | None = None
    trust: str | None = None
    trust_decision: McpTrustDecision | None = None


def _refuse(server: str, request: str, principal: str, operators: Sequence[str], reason: str) -> None:
    """``RequestRejected`` for a principal that is not an operator, a reason empty or too long, or
    a server that is no server name."""
    problem = None
    if principal not in operators:
        problem = f"{principal} is not an operator ([principals] operators)"
    elif not reason.strip():
        problem = f"{request} of an MCP server needs a reason"
    elif len(reason) > MAX_TRUST_REASON_CHARS:
        problem = f"a reason is at most {MAX_TRUST_REASON_CHARS} characters, not {len(reason)}"
    elif not re.fullmatch(SERVER_NAME_PATTERN, server):
        problem = f"{server[:64]!r} is not a server name ({SERVER_NAME_PATTERN})"
    if problem is not None:
        error = RequestRejected(server[:64], request, problem)
        error.args = (f"MCP server {server[:64]!r} rejected {request}: {problem}",)
        raise error


def checked_config(config: McpServerConfig | Mapping[str, Any]) -> McpServerConfig:
    """``config`` as a valid server configuration an operator may give at run time. Raises
    ``InvalidMcpServer`` with each problem: not a valid ``[mcp.servers.NAME]`` table (a name,
    one transport, ``${VAR}`` references ...), too long, or ``sandbox = "none"`` (a process outside
    the OS sandbox on every worker: agentrt.toml only)."""
    name = str(config.name if isinstance(config, McpServerConfig) else config.get("name", ""))[:64]
    if not isinstance(config, McpServerConfig):
        try:
            config = McpServerConfig.model_validate(dict(config))
        except ValidationError as err:
            problems = [f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}"[:300] for e in err.errors()[:10]]
            raise InvalidMcpServer(name, problems) from None
    problems = []
    if len(config.model_dump_json()) > MAX_CONFIG_CHARS:
        problems.append(f"the configuration is longer than {MAX_CONFIG_CHARS} characters")
    if config.transport == "stdio" and config.sandbox == "none":
        problems.append('sandbox = "none" runs the server outside the OS sandbox on every worker: only agentrt.toml may say so')
    if problems:
        raise InvalidMcpServer(config.name, problems)
    return config


async def change_mcp_server(
    store: Store,
    principal: str,
    operators: Sequence[str],
    configured: Sequence[str],
    action: Literal["add", "change"],
    config: McpServerConfig | Mapping[str, Any],
    reason: str,
) -> McpServerChange:
    """Record ``principal``'s ``add`` of a new server or ``change`` of one (``configured``: the
    servers of the caller's agentrt.toml) to ``config`` because of ``reason``
    (``Store.change_mcp_server``: a row and an audit entry, in one transaction).

    Raises ``RequestRejected`` (not an operator, no reason), ``InvalidMcpServer``
    (``checked_config``), ``McpServerExists`` (``add`` of a name agentrt.toml or the store has),
    ``McpServerNotFound`` (``change`` of a name neither has). Nothing is recorded then."""
    if principal not in operators:  # before the configuration is read: a stranger learns nothing of it
        _refuse(str(config.name if isinstance(config, McpServerConfig) else config.get("name", "")), action, principal, operators, reason)
    checked = checked_config(config)
    _refuse(checked.name, action, principal, operators, reason)
    return await asyncio.to_thread(store.change_mcp_server, action, checked, principal, reason, configured)


async def revoke_mcp_server(
    store: Store, principal: str, operators: Sequence[str], configured: Sequence[str], server: str, reason: str
) -> McpTrustDecision:
    """Record ``principal``'s revocation of ``server`` because of ``reason``: a trust decision
    ``revoked`` (no worker lists or calls its tools; workers stop it) until a later ``trust``
    decision. Raises ``RequestRejected`` (not an operator, no reason, not a server name) and
    ``McpServerNotFound`` (neither ``configured`` nor the store has it); nothing is recorded then."""
    _refuse(server, "revoke", principal, operators, reason)
    changes = await asyncio.to_thread(store.mcp_server_changes)
    if server not in configured and server not in changes:
        raise McpServerNotFound(server, sorted({*configured, *changes}))
    return await asyncio.to_thread(store.decide_mcp_trust, server, "revoked", principal, reason)


async def mcp_servers_view(store: Store, configured: Mapping[str, str | None]) -> list[McpServerView]:
    """Every server of ``configured`` (name → its agentrt.toml ``trust``, None: unknown here) and of the store's
    registry, as workers see them now, by name."""
    changes = await asyncio.to_thread(store.mcp_server_changes)
    decisions = await asyncio.to_thread(store.mcp_trust_decisions)
    views = []
    for name in sorted({*configured, *changes}):
        change = changes.get(name)
        decision = decisions.get(name)
        trust = decision.trust if decision else change.config.trust if change else configured[name]
        views.append(McpServerView(
            name=name, source="store" if change else "agentrt.toml", transport=change.config.transport if change else None,
            change=change, trust=trust, trust_decision=decision,
        ))
    return views
