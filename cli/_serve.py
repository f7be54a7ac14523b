"""`agentrt serve`: run the HTTP gateway (gateway/_app.py) under uvicorn until Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Optional

import typer
import uvicorn

from agentrt.cli._common import run_command
from agentrt.client import AgentClient, default_principal
from agentrt.gateway import WebhookDispatcher, check_authentication, check_workspace_root, create_app, is_loopback
from agentrt.schemas import AgentrtError
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig, connect_when_ready, open_store

log = logging.getLogger("agentrt.gateway")


def serve(
    host: Optional[str] = typer.Option(None, "--host", help="Address to listen on.", show_default="[gateway] host, else 127.0.0.1"),
    port: Optional[int] = typer.Option(
        None, "--port", min=0, max=65535, help="TCP port to listen on (0: any free one).", show_default="[gateway] port, else 8080"
    ),
    config_file: Optional[Path] = typer.Option(
        None, "--config", exists=True, dir_okay=False, resolve_path=True,
        help="The agentrt.toml to read.", show_default="$AGENTRT_CONFIG, ./agentrt.toml, $AGENTRT_HOME/agentrt.toml",
    ),
    workspace_root: Path = typer.Option(
        Path("."), "--workspace-root", exists=True, file_okay=False, resolve_path=True,
        help="Directory every workspace and script path of a request must resolve under.", show_default="the current directory",
    ),
    insecure_no_auth: bool = typer.Option(
        False, "--insecure-no-auth",
        help="Serve without authentication, on a loopback address only: every request acts as --principal with every scope.",
    ),
    principal: Optional[str] = typer.Option(
        None, "--principal", help="Who every request is with --insecure-no-auth.", show_default="$AGENTRT_PRINCIPAL, else the OS user"
    ),
) -> None:
    """Serve the HTTP gateway: sessions, autonomous tasks and task graphs over HTTP, with an
    OpenAPI schema at /openapi.json and docs at /docs (see docs/gateway.md).

    Callers authenticate with `Authorization: Bearer <token>`; the tokens are the gateway.tokens
    tables of agentrt.toml (the SHA-256 of each, its principal and scopes) and AGENTRT_GATEWAY_TOKEN
    (one admin token). Without any, the gateway refuses to start unless --insecure-no-auth is given.

    The workspace root may not hold the configuration file, the SQLite store, the codec keys file,
    the payload directory or $AGENTRT_HOME, nor lie inside $AGENTRT_HOME (exit code 2 naming it).
    A workspace under it belongs to the principal that first started work in it.

    Waits (with backoff) for the Temporal server; exit code 2 for a configuration error.
    """
    try:
        config = AgentrtConfig.load(config_file)
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if principal is not None and not insecure_no_auth:
        raise typer.BadParameter("--principal names who callers are without authentication; give --insecure-no-auth too", param_hint="--principal")
    host = host or config.gateway.host
    port = config.gateway.port if port is None else port
    insecure_principal = (principal or default_principal()) if insecure_no_auth else None
    if insecure_no_auth and not is_loopback(host):
        raise typer.BadParameter(f"serving without authentication is allowed on a loopback address only, not {host!r}", param_hint="--host")
    try:
        check_authentication(config.gateway, insecure_principal)
        check_workspace_root(workspace_root, config)
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per migration plugin and step is noise here
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per webhook delivery; failures are logged by the dispatcher

    async def go() -> None:
        store = open_store(config)
        try:
            temporal = await connect_when_ready(config.temporal_address, config.namespace, [AgentrtClientPlugin(config, store)])
            client = AgentClient.for_config(temporal, config, store=store)
            webhooks = WebhookDispatcher(store, client, config.gateway.webhooks) if config.gateway.webhooks else None
            app = create_app(
                client, config.gateway, webhooks=webhooks, workspace_root=workspace_root, profiles=config.profiles,
                insecure_principal=insecure_principal,
            )
            server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info", server_header=False, timeout_graceful_shutdown=10))
            serving = asyncio.ensure_future(server.serve())
            while not server.started and not serving.done():
                await asyncio.sleep(0.05)
            if server.started:
                bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
                where = f"[{host}]" if ":" in host else host
                auth = f"without authentication, as {insecure_principal!r}" if insecure_principal else f"{len(config.gateway.tokens)} token(s)"
                typer.echo(
                    f"agentrt gateway listening on http://{where}:{bound} ({auth}; OpenAPI at /openapi.json, docs at /docs); "
                    "Ctrl-C stops it",
                    err=True,
                )
            try:
                await asyncio.shield(serving)
            except asyncio.CancelledError:
                # Ctrl-C or SIGTERM: uvicorn stops accepting, gives open requests up to
                # timeout_graceful_shutdown and runs the app's shutdown, instead of being cut mid-loop.
                server.should_exit = True
                await _drained(serving)
                raise
        finally:
            store.close()

    run_command(go, service=True)


async def _drained(serving: asyncio.Future[None]) -> None:
    """Wait for uvicorn's shutdown to end. Another SIGTERM while it drains (a supervisor that
    repeats its signal; uvicorn's own re-raise of the one it caught) cancels this wait only, never
    the shutdown: the open requests still get their graceful timeout. A second Ctrl-C still forces
    the exit, through uvicorn's own handler."""
    while not serving.done():
        try:
            await asyncio.shield(serving)
        except asyncio.CancelledError:
            continue
    await serving  # its own error, if it ended with one
