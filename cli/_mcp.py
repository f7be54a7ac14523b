"""`agentrt mcp ...`: the MCP servers of agentrt.toml and those operators added at run time, their
state as workers saw it, their tools, and operators' decisions: how far each is trusted, revoked,
added or changed (every worker follows them without a restart)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._render import printable
from agentrt.schemas import ConfigurationError, McpServerChange, McpServerConfig, McpServerEvent, McpTrustDecision
from agentrt.store import agentrt_home
from agentrt.worker import open_store

mcp_app = typer.Typer(help="MCP servers: their state in the workers, and the tools they offer.", no_args_is_help=True)

# An operator's act on a server as its listing and its answer say it.
DONE = {"add": "added", "change": "changed"}

STATES = {"McpServerStarting": "starting", "McpServerReady": "ready", "McpServerStopped": "stopped", "McpServerFailed": "failed"}


def _where(server: McpServerConfig) -> str:
    if server.url is not None:
        return server.url
    return " ".join([server.command or "", *server.args])


def _server_row(
    server: McpServerConfig, event: McpServerEvent | None, decision: McpTrustDecision | None, change: McpServerChange | None
) -> dict[str, Any]:
    return {
        "name": server.name,
        "source": "store" if change is not None else "agentrt.toml",
        "change": change.model_dump(mode="json", exclude={"config"}) if change is not None else None,
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
    """The MCP servers (tables mcp.servers.NAME of agentrt.toml, and those operators added or changed at run time,
    which win), each with its latest state in a worker (from the store: starting, ready with its tool count, stopped,
    failed with why) and its trust (an operator's latest decision, with who, when and why, else its table's; revoked:
    no worker uses it). Needs no server."""
    config = load_config()

    async def go() -> None:
        with open_store(config) as store:
            latest = await asyncio.to_thread(store.latest_mcp_server_events)
            decisions = await asyncio.to_thread(store.mcp_trust_decisions)
            changes = await asyncio.to_thread(store.mcp_server_changes)
        servers = {**config.mcp_servers, **{name: change.config for name, change in changes.items()}}
        rows = [
            _server_row(server, latest.get(name), decisions.get(name), changes.get(name)) for name, server in sorted(servers.items())
        ]
        if as_json:
            typer.echo(json.dumps({"servers": rows}, indent=2))
            return
        if not rows:
            typer.echo(
                "no MCP servers configured: add [mcp.servers.NAME] to agentrt.toml, or (operators) "
                "`agentrt mcp add NAME --command CMD | --url URL --reason TEXT` for every worker (see docs/mcp.md)"
            )
            return
        for row in rows:
            tools = f" · {row['tools']} tools" if row["tools"] is not None else ""
            seen = f" · {row['worker']} at {row['at']}" if row["worker"] else ""
            typer.echo(f"{row['name']:<16} {row['state']:<11} {row['transport']:<5} {row['trust']:<9}{tools}{seen}")
            typer.echo(f"{'':<16} {printable(row['target'])[:200]}")
            if row["diagnostic"]:
                typer.echo(f"{'':<16} {printable(row['diagnostic'])[:500]}")
            if row["change"]:
                c = row["change"]
                typer.echo(f"{'':<16} {DONE.get(c['action'], c['action'])} by {printable(c['principal'])} at {c['at']}: {printable(c['reason'])[:500]}")
            if row["trust_decision"]:
                d = row["trust_decision"]
                typer.echo(f"{'':<16} {d['trust']} by {printable(d['principal'])} at {d['at']}: {printable(d['reason'])[:500]}")

    run_command(go)


@mcp_app.command("tools")
def mcp_tools(
    name: str = typer.Argument(..., help="The server's name: its table mcp.servers.NAME, or one an operator added (mcp add)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: {\"server\": ..., \"tools\": \\[...]}."),
) -> None:
    """Start server NAME here (in its sandbox, as a worker would, with its configuration as workers use it: an operator's
    run-time change wins over agentrt.toml), list its tools and stop it: each tool with the name the model sees, its risk
    class and why (an annotation, an override in agentrt.toml, none). Tools a model cannot see are listed as skipped,
    with why. A revoked server is not started."""
    config = load_config()

    async def go() -> None:
        from agentrt.activities.mcp import McpManager  # starts servers: loaded by this command only
        from agentrt.activities.tools import SecretVault

        with open_store(config) as store:  # the run-time registry, as workers read it
            changes = await asyncio.to_thread(store.mcp_server_changes)
            decision = await asyncio.to_thread(store.mcp_trust, name)
        servers = {**config.mcp_servers, **{n: change.config for n, change in changes.items()}}
        if name not in servers:
            configured = ", ".join(sorted(config.mcp_servers)) or "(none)"
            added = ", ".join(sorted(changes)) or "(none)"
            raise ConfigurationError(f"no MCP server {name!r} in the configuration; configured: {configured}; added by operators: {added}")
        if decision is not None and decision.trust == "revoked":
            raise ConfigurationError(
                f"MCP server {name!r} is revoked (by {decision.principal}: {decision.reason[:200]}); no worker starts it, "
                f"nor does this command (agentrt mcp trust {name} trusted|untrusted lifts it)"
            )
        manager = McpManager(
            servers,
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


def _pairs(values: list[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` options as a dict; ``ConfigurationError`` for one without ``=``."""
    found: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"{option} takes KEY=VALUE, not {value[:100]!r}")
        found[key] = rest
    return found


def _table(
    name: str, command: str | None, args: list[str], url: str | None, headers: list[str], env: list[str], cwd: str | None,
    read_paths: list[str], network: bool, trust: str, start: str, timeout: float | None, secrets: list[str],
) -> dict[str, Any]:
    """The ``[mcp.servers.NAME]`` table the options of ``mcp add`` and ``mcp change`` give."""
    table: dict[str, Any] = {"name": name, "command": command, "url": url, "trust": trust, "start": start, "network": network}
    if args:
        table["args"] = args
    if headers:
        table["headers"] = _pairs(headers, "--header")
    if env:
        table["env"] = _pairs(env, "--env")
    if secrets:
        table["secrets"] = _pairs(secrets, "--secret")
    if cwd is not None:
        table["cwd"] = cwd
    if read_paths:
        table["read_paths"] = read_paths
    if timeout is not None:
        table["timeout_seconds"] = timeout
    return table


def _register(action: str, table_options: dict[str, Any], reason: str, as_json: bool) -> None:
    from agentrt.client import change_mcp_server, default_principal

    config = load_config()

    async def go() -> None:
        table = _table(**table_options)
        with open_store(config) as store:
            change = await change_mcp_server(
                store, default_principal(), config.operators, sorted(config.mcp_servers), action, table, reason  # type: ignore[arg-type]
            )
        if as_json:
            typer.echo(change.model_dump_json())
            return
        typer.echo(f"MCP server {change.server} {DONE[action]} ({change.config.transport}): every worker uses it from its next listing of its tools")

    run_command(go)


_NAME = typer.Argument(..., help="The server's name: letters, digits, _ and - (at most 32); its tools reach the model as NAME.<tool>.")
_COMMAND = typer.Option(None, "--command", help="A stdio server: the program (run in the OS sandbox on each worker).")
_ARG = typer.Option([], "--arg", help="An argument of --command (repeat for each).")
_URL = typer.Option(None, "--url", help="A streamable HTTP server: its URL (http:// or https://).")
_HEADER = typer.Option([], "--header", help="KEY=VALUE, a header of an HTTP server; secrets as ${VAR} or ${secret:NAME}.")
_ENV = typer.Option([], "--env", help="KEY=VALUE, a variable of a stdio server; secrets as ${VAR} or ${secret:NAME}.")
_CWD = typer.Option(None, "--cwd", help="A stdio server's directory on the worker (default $AGENTRT_HOME/mcp/NAME).")
_READ = typer.Option([], "--read-path", help="A host path the sandboxed server may read (repeat).")
_NETWORK = typer.Option(False, "--network", help="Let a sandboxed stdio server use the network (through the egress proxy).")
_TRUST = typer.Option("trusted", "--trust", help="trusted (the policy decides by risk class) or untrusted (every call needs an approval).")
_START = typer.Option("lazy", "--start", help="lazy (on first use) or eager (a worker starts it as it starts).")
_TIMEOUT = typer.Option(None, "--timeout", help="Seconds to connect and list its tools (default 30).")
_SECRET = typer.Option([], "--secret", help="VARIABLE=SECRET_NAME, a declared secret the worker reads from its \\[secrets] sources (repeat).")
_REASON = typer.Option(..., "--reason", help="Why (recorded with who and when, in the audit log too).")
_JSON = typer.Option(False, "--json", help="Print what was recorded as one JSON object.")


@mcp_app.command("add")
def mcp_add(
    name: str = _NAME, command: str | None = _COMMAND, args: list[str] = _ARG, url: str | None = _URL,
    headers: list[str] = _HEADER, env: list[str] = _ENV, cwd: str | None = _CWD, read_paths: list[str] = _READ,
    network: bool = _NETWORK, trust: str = _TRUST, start: str = _START, timeout: float | None = _TIMEOUT,
    secrets: list[str] = _SECRET, reason: str = _REASON, as_json: bool = _JSON,
) -> None:
    """Add MCP server NAME for every worker, without a restart (operators only, as $AGENTRT_PRINCIPAL): recorded in the
    store with who, when and why; workers list its tools from their next turn on. A name agentrt.toml or the store has
    already is refused (use mcp change), and so is an invalid table. Needs the store, no Temporal server."""
    _register("add", dict(
        name=name, command=command, args=args, url=url, headers=headers, env=env, cwd=cwd, read_paths=read_paths,
        network=network, trust=trust, start=start, timeout=timeout, secrets=secrets,
    ), reason, as_json)


@mcp_app.command("change")
def mcp_change(
    name: str = _NAME, command: str | None = _COMMAND, args: list[str] = _ARG, url: str | None = _URL,
    headers: list[str] = _HEADER, env: list[str] = _ENV, cwd: str | None = _CWD, read_paths: list[str] = _READ,
    network: bool = _NETWORK, trust: str = _TRUST, start: str = _START, timeout: float | None = _TIMEOUT,
    secrets: list[str] = _SECRET, reason: str = _REASON, as_json: bool = _JSON,
) -> None:
    """Replace the whole configuration of MCP server NAME (agentrt.toml's or an earlier change's) for every worker,
    without a restart (operators only): each worker starts it anew on next use; its old process ends once its calls in
    flight have. An unknown name is refused. Needs the store, no Temporal server."""
    _register("change", dict(
        name=name, command=command, args=args, url=url, headers=headers, env=env, cwd=cwd, read_paths=read_paths,
        network=network, trust=trust, start=start, timeout=timeout, secrets=secrets,
    ), reason, as_json)


@mcp_app.command("revoke")
def mcp_revoke(name: str = _NAME, reason: str = _REASON, as_json: bool = _JSON) -> None:
    """Revoke MCP server NAME (operators only): no worker lists or calls its tools from now on, and workers stop it,
    until mcp trust NAME trusted|untrusted. Needs the store, no Temporal server."""
    from agentrt.client import default_principal, revoke_mcp_server

    config = load_config()

    async def go() -> None:
        with open_store(config) as store:
            decision = await revoke_mcp_server(store, default_principal(), config.operators, sorted(config.mcp_servers), name, reason)
        if as_json:
            typer.echo(decision.model_dump_json())
            return
        typer.echo(f"MCP server {name} is revoked: no worker lists or calls its tools (mcp trust {name} trusted lifts it)")

    run_command(go)
