"""The worker's MCP servers behind one object: the tools they list and the calls made to them,
over one live connection per configured server per worker process (``_connections``), each
reached as its configuration says (``_launch``): agentrt.toml's, or an operator's change at run
time (``_registry``), its changes recorded as ``McpServerEvent`` rows (``_events``), its calls
run and their questions returned as ``_calls`` and ``_elicitation`` describe.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrt.activities.mcp._calls import run_call
from agentrt.activities.mcp._connections import CLOSE_TIMEOUT_SECONDS, Connections, Server
from agentrt.activities.mcp._events import ServerEvents
from agentrt.activities.mcp._launch import Launcher
from agentrt.activities.mcp._listing import McpListing, list_tools
from agentrt.activities.mcp._registry import REGISTRY_TTL_SECONDS, ServerRegistry
from agentrt.activities.mcp._results import result_text
from agentrt.activities.tools import SecretVault
from agentrt.schemas import (
    ConfigurationError,
    ElicitationAnswer,
    ElicitationRequest,
    McpServerConfig,
    McpServerState,
    McpServerUnavailable,
    McpTrustDecision,
    ToolError,
)

if TYPE_CHECKING:
    from agentrt.store import Store

__all__ = ["McpCallOutcome", "McpManager"]

log = logging.getLogger(__name__)

# How often a worker looks for running servers an operator revoked, to stop them (seconds).
REVOCATION_CHECK_SECONDS = 5.0


@dataclass
class McpCallOutcome:
    """One run of a call: ``text`` the model reads, ``is_error`` the server's ``isError``; or, with
    ``input_required``, the question the server asked that the run had no answer for (``text``
    empty: the call was stopped before a result)."""

    text: str
    is_error: bool
    input_required: ElicitationRequest | None = None


class McpManager:
    """One connection per configured server per worker process.

    ``servers``: the ``[mcp.servers.NAME]`` tables by name; ``store``: where connection events go
    (None: nowhere); ``worker``: this worker's identity in those events; ``home``: the agentrt
    home (a stdio server's default directory is ``home/mcp/NAME``); ``env``: the environment
    ``${VAR}`` references read (default ``os.environ``); ``listing_ttl_seconds``: how long a
    server's tool listing is reused; ``vault``: where the secrets servers declare are read
    (``SecretVault``; default: ``env``); ``egress_allow``: internal destinations sandboxed servers
    with network may reach (``[sandbox] egress_allow``). ``runtime_servers``: whether the servers
    operators add or change at run time (the store's registry, read at most every
    ``registry_ttl_seconds``) are used too, over agentrt.toml's for the same name; a server whose
    configuration changed is started anew on next use (the old process ends once its calls in
    flight have), and one an operator revoked is neither listed nor called, and is stopped: at its
    next use, or by ``watch_revocations`` within ``revocation_check_seconds`` when nothing uses it.

    Call ``start()`` when the worker starts and ``close()`` when it stops (and run
    ``watch_revocations()`` while it runs, as ``AgentrtWorker`` does). Raises
    ``ConfigurationError`` when a key of ``servers`` is not its server's ``name``.
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        store: Store | None,
        worker: str,
        home: Path,
        env: Mapping[str, str] | None = None,
        listing_ttl_seconds: float = 60.0,
        vault: SecretVault | None = None,
        egress_allow: Sequence[str] = (),
        runtime_servers: bool = True,
        registry_ttl_seconds: float = REGISTRY_TTL_SECONDS,
        revocation_check_seconds: float = REVOCATION_CHECK_SECONDS,
    ) -> None:
        for key, config in servers.items():
            if key != config.name:
                raise ConfigurationError(f"MCP server {key!r} is configured with name {config.name!r}")
        self._configs = dict(servers)
        self._launcher = Launcher(
            self._configs, home=Path(home), env=os.environ if env is None else env, vault=vault, egress_allow=egress_allow
        )
        self._events = ServerEvents(store, worker)
        self._connections = Connections(servers, launcher=self._launcher, events=self._events)
        self._ttl = listing_ttl_seconds
        self._registry = ServerRegistry(servers, store if runtime_servers else None, registry_ttl_seconds)
        self._revocation_check = revocation_check_seconds

    @property
    def servers(self) -> Mapping[str, McpServerConfig]:
        """The servers by name: agentrt.toml's, and those of the store's registry this manager used."""
        return self._configs

    async def start(self) -> None:
        """Start the servers configured ``start = "eager"``, concurrently, each within its
        ``timeout_seconds``. A server that fails is recorded (``McpServerFailed``) and retried on
        first use; this never raises."""
        await self._connections.start_eager()

    async def close(self) -> None:
        """Stop every running server (``McpServerStopped``) and write the pending events. Waits at
        most about ``CLOSE_TIMEOUT_SECONDS`` for servers to exit; idempotent, and safe when nothing
        was started. Later uses raise ``McpServerUnavailable``."""
        await self._connections.close()
        await self._events.flush(CLOSE_TIMEOUT_SECONDS)

    async def stop_revoked(self) -> list[str]:
        """Stop each running server that may not run any more: an operator revoked it, or neither
        agentrt.toml nor the store's registry has it now (its connection ends once its calls in
        flight have, ``McpServerStopped``). A running server whose configuration changed is retired
        the same way, to start anew on next use. Returns the names stopped. Raises what the
        store raises."""
        stopped: list[str] = []
        for name in self._connections.running():
            try:
                await self._server(name)  # retires it when it may not run
            except McpServerUnavailable:
                stopped.append(name)
        return stopped

    async def watch_revocations(self) -> None:
        """Until cancelled: every ``revocation_check_seconds``, ``stop_revoked``, so that a server
        an operator revoked stops though no session lists or calls it any more. Returns at once
        when this manager does not follow the store (nothing can revoke a server then); a round
        the store fails is logged and the next one tries again."""
        if not self._registry.follows_store:
            return
        while True:
            await asyncio.sleep(self._revocation_check)
            try:
                stopped = await self.stop_revoked()
            except Exception:  # the store does not answer: the next round asks again
                log.warning("could not check the MCP servers for revocations", exc_info=True)
                continue
            if stopped:
                log.info("stopped MCP server(s) %s: revoked, or no longer configured", ", ".join(stopped))

    def state(self, server: str) -> McpServerState | None:
        """The state of ``server`` in this process: ``starting``, ``ready``, ``failed`` or ``stopped``;
        None for a server not configured or not used yet."""
        return self._connections.state(server)

    def secrets(self) -> list[str]:
        """The values ``${VAR}`` references in the servers' ``env`` and ``headers`` expand to (set,
        non-empty ones), for redacting tool results and messages."""
        return self._launcher.secrets()

    async def list_tools(self, server: str, *, refresh: bool = False) -> McpListing:
        """The tools of ``server``, from a listing at most ``listing_ttl_seconds`` old unless
        ``refresh``; starts the server if needed. Bounded by its ``timeout_seconds``. Its specs
        are ``untrusted`` as the latest operator's decision in the store says (``agentrt mcp
        trust``), else as its ``trust`` in its configuration does, read at every listing.

        Raises ``McpServerUnavailable`` (not configured nor added, revoked, cannot start, broke,
        listing failed or timed out).
        """
        srv, decision = await self._server(server)
        listing = await self._listing(srv, refresh)
        if decision is None:
            return listing
        untrusted = decision.trust == "untrusted"
        return McpListing(tools=listing.tools, specs=[spec.model_copy(update={"untrusted": untrusted}) for spec in listing.specs])

    async def _server(self, name: str) -> tuple[Server, McpTrustDecision | None]:
        """The server ``name`` as its configuration is now (a changed one replaces the old), and the
        latest trust decision on it. Raises ``McpServerUnavailable`` (unknown, or revoked: its
        running process is stopped)."""
        try:
            resolved = await self._registry.resolve(name)
        except McpServerUnavailable:
            self._connections.retire(name)
            raise
        self._configs[name] = resolved.config  # the launcher redacts what its ${VAR}s expand to
        return self._connections.server_for(resolved.config), resolved.decision

    async def _listing(self, srv: Server, refresh: bool) -> McpListing:
        server = srv.config.name
        loop = asyncio.get_running_loop()
        timeout = srv.config.timeout_seconds
        if not refresh and srv.fresh_listing(loop.time(), self._ttl):
            assert srv.listing is not None
            return srv.listing
        try:
            async with asyncio.timeout(timeout) as scope:
                conn = await self._connections.connection(srv, deadline=loop.time() + timeout)
                if not refresh and srv.fresh_listing(loop.time(), self._ttl):
                    assert srv.listing is not None
                    return srv.listing
                async with srv.listing_lock:
                    return await list_tools(srv, conn)
        except TimeoutError:
            if scope.expired():
                raise McpServerUnavailable(server, f"listing its tools took more than {timeout:g} s (timeout_seconds)") from None
            raise

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout_seconds: float,
        answers: Sequence[ElicitationAnswer] = (),
        request_state: str | None = None,
        on_progress: Callable[[float, float | None, str | None], None] | None = None,
        files_dir: Path | None = None,
    ) -> McpCallOutcome:
        """Run ``tool`` of ``server`` with ``arguments`` once, within ``timeout_seconds`` (starting
        the server, or waiting out its restart backoff, included).

        ``answers``: the user's answers to the questions the server asked in earlier runs of
        this call, in order; ``request_state``: the ``ElicitationRequest.request_state`` the last
        run returned (2026-07-28 servers). ``on_progress(progress, total, message)`` is called
        for each progress notification; ``files_dir``: where images, audio and binary resources
        of the result are saved (see ``result_text``).

        Returns the result's text and ``isError``, or ``input_required``: the server asked the
        user something beyond ``answers``; the call was stopped and should run again with one
        more answer.

        Raises ``McpServerUnavailable`` (the server is not configured nor added, revoked, cannot
        start, or its connection broke during the call), ``McpToolError`` (a JSON-RPC error or an invalid
        result), ``ToolError`` (timed out; the request is cancelled at the server). When the
        awaiting task is cancelled, the request is cancelled at the server and
        ``CancelledError`` propagates.
        """
        srv, _ = await self._server(server)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_seconds) as scope:
                conn = await self._connections.connection(srv, deadline=loop.time() + timeout_seconds)
                result = await run_call(srv, conn, tool, arguments, answers, request_state, on_progress)
        except TimeoutError:
            if scope.expired():
                raise ToolError(f"the MCP tool {server}.{tool} timed out after {timeout_seconds:g} s") from None
            raise
        if isinstance(result, ElicitationRequest):
            return McpCallOutcome(text="", is_error=False, input_required=result)
        text = await asyncio.to_thread(result_text, result, files_dir)
        return McpCallOutcome(text=text, is_error=result.is_error)
