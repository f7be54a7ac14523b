"""`agentrt mcp ...`: the MCP servers of agentrt.toml, their state as workers saw it, their tools,
and operators' decisions on how far each is trusted."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._render import printable
from agentrt.schemas import ConfigurationError, McpServerConfig, McpServerEvent, McpTrustDecision
from agentrt.store import agentrt_home
from agentrt.worker import open_store

mcp_app = typer.Typer(help="MCP servers: their state in the workers, and the tools they offer.", no_args_is_help=True)

STATES = {"McpServerStarting": "starting", "McpServerReady": "ready", "McpServerStopped": "stopped", "McpServerFailed": "failed"}


def _where(server: McpServerConfig) -> str:
    if server.url is not None:
        return server.url
    return " ".join([server.command or "", *server.args])


def _server_row(server: McpServerConfig, event: McpServerEvent | None, decision: McpTrustDecision | None) -> dict[str, Any]:
    return {
        "name": server.name,
        "transport": server.transport,
        "target": _where(server),
        "start": server.start,
        "trust": decision.trust if decision is not None else server.trust,
        "trust_decision": decision.model_dump(mode="json") if decision is not None else None,
        "sandbox": server.sandbox if server.transport == "stdio" else None,
        "state": STATES[event.type] if event is not None else "not started",
        "tools": event.tools if event is not None and event.type == "McpServerReady" else None,
        "worker": event.worker if event is not None else None,
        "at": event.at.isoformat() if event is not None else None,
        "diagnostic": event.diagnostic if event is not None else None,
    }


@mcp_app.command("list")
def mcp_list(as_json: bool = typer.Option(False, "--json", help="One JSON object: {\"servers\": \\[...]}.")) -> None:
    """The configured MCP servers (tables mcp.servers.NAME of agentrt.toml), each with its latest state in a worker
    (from the store: starting, ready with its tool count, stopped, failed with why) and its trust (an operator's
    latest decision, with who, when and why, else agentrt.toml's). Needs no server."""
    config = load_config()

    async def go() -> None:
        with open_store(config) as store:
            latest = await asyncio.to_thread(store.latest_mcp_server_events)
            decisions = {name: await asyncio.to_thread(store.mcp_trust, name) for name in config.mcp_servers}
        rows = [_server_row(server, latest.get(name), decisions[name]) for name, server in sorted(config.mcp_servers.items())]
        if as_json:
            typer.echo(json.dumps({"servers": rows}, indent=2))
            return
        if not rows:
            typer.echo("no MCP servers configured: add [mcp.servers.NAME] to agentrt.toml (see docs/mcp.md)")
            return
        for row in rows:
            tools = f" · {row['tools']} tools" if row["tools"] is not None else ""
            seen = f" · {row['worker']} at {row['at']}" if row["worker"] else ""
            typer.echo(f"{row['name']:<16} {row['state']:<11} {row['transport']:<5} {row['trust']:<9}{tools}{seen}")
            typer.echo(f"{'':<16} {printable(row['target'])[:200]}")
            if row["diagnostic"]:
                typer.echo(f"{'':<16} {printable(row['diagnostic'])[:500]}")
            if row["trust_decision"]:
                d = row["trust_decision"]
                typer.echo(f"{'':<16} {d['trust']} by {printable(d['principal'])} at {d['at']}: {printable(d['reason'])[:500]}")

    run_command(go)


@mcp_app.command("tools")
def mcp_tools(
    name: str = typer.Argument(..., help="The server's name in agentrt.toml (its table mcp.servers.NAME)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: {\"server\": ..., \"tools\": \\[...]}."),
) -> None:
    """Start server NAME here (in its sandbox, as a worker would), list its tools and stop it: each
    tool with the name the model sees, its risk class and why (an annotation, an override in
    agentrt.toml, none). Tools a model cannot see are listed as skipped, with why."""
    config = load_config()
    if name not in config.mcp_servers:
        known = ", ".join(sorted(config.mcp_servers)) or "(none)"
        typer.echo(f"error: {ConfigurationError(f'no MCP server {name!r} in the configuration; configured: {known}')}", err=True)
        raise typer.Exit(2)

    async def go() -> None:
        from agentrt.activities.mcp import McpManager  # starts servers: loaded by this command only
        from agentrt.activities.tools import SecretVault

        manager = McpManager(
            config.mcp_servers,
            store=None,
            worker=f"cli/{os.getpid()}",
            home=agentrt_home(),
            vault=SecretVault(config.secrets),
            egress_allow=config.egress_allow,
        )
        try:
            listing = await manager.list_tools(name)
        finally:
            await manager.close()
        if as_json:
            typer.echo(json.dumps({"server": name, "tools": [t.model_dump(mode="json") for t in listing.tools]}, indent=2))
            return
        width = max((len(t.qualified_name) for t in listing.tools), default=10)
        for tool in listing.tools:
            if tool.skipped:
                typer.echo(f"{printable(tool.qualified_name):<{width}}  skipped     {printable(tool.skipped)}")
                continue
            typer.echo(f"{printable(tool.qualified_name):<{width}}  {tool.risk:<10}  {printable(tool.risk_reason)}")
        offered = sum(1 for t in listing.tools if not t.skipped)
        typer.echo(f"{offered} tools offered as {name}.<tool>" + (f", {len(listing.tools) - offered} skipped" if offered != len(listing.tools) else ""))

    run_command(go)


@mcp_app.command("trust")
def mcp_trust(
    name: str = typer.Argument(..., help="The server's name (its table mcp.servers.NAME)."),
    trust: str = typer.Argument(..., help="trusted (the policy decides by risk class) or untrusted (every call needs an approval)."),
    reason: str = typer.Option(..., "--reason", help="Why (recorded with who and when, in the audit log too)."),
    as_json: bool = typer.Option(False, "--json", help="Print the recorded decision as one JSON object."),
) -> None:
    """Decide how far server NAME is trusted (operators only, as $AGENTRT_PRINCIPAL): every worker applies it from
    its next listing of the server's tools on, whatever agentrt.toml says. Needs the store, no Temporal server."""
    from agentrt.client import decide_mcp_trust, default_principal

    config = load_config()

    async def go() -> None:
        with open_store(config) as store:
            decision = await decide_mcp_trust(store, default_principal(), config.operators, name, trust, reason)
        if as_json:
            typer.echo(decision.model_dump_json())
            return
        configured = "" if name in config.mcp_servers else " (not configured here: workers that configure it apply it)"
        typer.echo(f"MCP server {name} is {decision.trust} from each worker's next listing of its tools{configured}")

    run_command(go)
