"""A worker's declared secrets at its start: every secret its tools and MCP servers declare must be
in one of its ``[secrets]`` sources, or the worker does not start (``SecretsMissing``)."""

from __future__ import annotations

from agentrt.activities import WorkerRole
from agentrt.activities.tools import SecretVault, ToolRegistry
from agentrt.worker._config import AgentrtConfig

__all__ = ["check_secrets", "declared_secrets"]


def declared_secrets(registry: ToolRegistry, config: AgentrtConfig) -> dict[str, list[str]]:
    """The secrets the registry's tools and the configured MCP servers declare: name -> who declares
    it (tool names, ``mcp:<server>``)."""
    declared: dict[str, list[str]] = {}
    for name in registry.names():
        for secret in registry.get(name).secrets:
            declared.setdefault(secret, []).append(name)
    for server in config.mcp_servers.values():
        for secret in server.declared_secrets:
            declared.setdefault(secret, []).append(f"mcp:{server.name}")
    return declared


def check_secrets(registry: ToolRegistry, config: AgentrtConfig, role: WorkerRole = "all") -> None:
    """Raise ``SecretsMissing`` (a ``ConfigurationError``) when a secret that a tool or MCP server
    declares is in none of ``config.secrets``' sources, and ``ConfigurationError`` when a source
    fails (an insecure or unreadable secrets file, a hook that raises or does not answer in time).
    A worker that runs no tool (models-, workflows- or providers-only) checks nothing."""
    if role in ("all", "tools"):
        SecretVault(config.secrets).missing(declared_secrets(registry, config))
