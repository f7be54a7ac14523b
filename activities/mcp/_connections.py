"""The live connections to a worker's MCP servers: one per configured server per worker process,
started on first use (or at worker start), restarted with backoff when it breaks, and shared
by every call the worker runs. A server whose configuration changed, or that an operator
revoked, is retired: its connection ends once no call is in flight on it (``RETIRE_GRACE_SECONDS``
at most).

Each connection is an ``mcp.Client`` owned by one long-lived asyncio task (anyio context
managers must be entered and exited in the same task); calls run in their callers' tasks
over it. Each start, readiness, failure and stop is recorded as an event.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Self

import anyio
from mcp import Client, MCPError
from mcp.types import CONNECTION_CLOSED, Implementation, ToolListChangedNotification

from agentrt.activities.mcp._diagnostics import StderrTail, describe, only, server_diagnostic, write_log
from agentrt.activities.mcp._elicitation import CallRun, answer_elicitation
from agentrt.activities.mcp._events import ServerEvents
from agentrt.activities.mcp._launch import Launcher
from agentrt.activities.mcp._listing import McpListing, list_tools
from agentrt.schemas import McpServerConfig, McpServerState, McpServerUnavailable

# Restart delays after consecutive failures: at once, then 1, 2, 4 ... seconds, at most this.
BACKOFF_MAX_SECONDS = 60.0
# How long close() waits for connections to shut down before cancelling them (seconds); a
# stdio server gets 2 s to exit after its stdin closes, then SIGTERM, then SIGKILL.
CLOSE_TIMEOUT_SECONDS = 10.0
# How long a retired server's connection is kept for the calls in flight on it (seconds).
RETIRE_GRACE_SECONDS = 600.0


class Server:
    """One configured server's state in this process: its ``state``, the live connection
    (``conn``) and the task that owns it (``owner``), the start in progress (``starting``),
    consecutive ``failures`` with the last ``diagnostic`` and when to retry (``retry_at``, a
    loop time), and its cached ``listing`` (``listed_at``, a loop time)."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.state: McpServerState | None = None
        self.conn: Connection | None = None
        self.owner: asyncio.Task[None] | None = None
        self.starting: asyncio.Future[Connection] | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.diagnostic: str | None = None
        self.listing: McpListing | None = None
        self.listed_at = 0.0
        self.listing_lock = asyncio.Lock()

    def fresh_listing(self, now: float, ttl: float) -> bool:
        """Whether ``listing`` was made on a live connection less than ``ttl`` seconds before ``now``."""
        live = self.conn is not None and not self.conn.ended.is_set()
        return live and self.listing is not None and now - self.listed_at < ttl

    async def on_message(self, message: object) -> None:
        """A notification from the server: a changed tool list makes the cached one stale."""
        if isinstance(message, ToolListChangedNotification):
            self.listing = None


class Connection:
    """One connection's shared state: its client, the calls in flight, and how it ended."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.calls: set[CallRun] = set()
        self.ended = asyncio.Event()
        self.stopping = False
        self.reason: str | None = None

    def broke(self, reason: str) -> None:
        """End the connection for ``reason`` (the first reason given is kept)."""
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()


class Connections:
    """The connections to the servers of ``configs`` (by name), opened through ``launcher``, their
    changes recorded in ``events``. ``close()`` ends them for good."""

    def __init__(self, configs: Mapping[str, McpServerConfig], *, launcher: Launcher, events: ServerEvents) -> None:
        self._servers = {name: Server(config) for name, config in configs.items()}
        self._launcher = launcher
        self._events = events
        self._closed = False
        self._retiring: dict[asyncio.Task[None], Server] = {}

    def state(self, name: str) -> McpServerState | None:
        """The state of server ``name``; None for a server not configured or not used yet."""
        srv = self._servers.get(name)
        return None if srv is None else srv.state

    def server(self, name: str) -> Server:
        """The server ``name``. Raises ``McpServerUnavailable`` when it is not configured."""
        srv = self._servers.get(name)
        if srv is None:
            raise McpServerUnavailable(name, "this worker has no [mcp.servers." + name + "] in its configuration")
        return srv

    def server_for(self, config: McpServerConfig) -> Server:
        """The server of ``config.name`` with exactly ``config``: the current one, or a new one
        (started on first use) in place of one whose configuration differs, which is retired."""
        srv = self._servers.get(config.name)
        if srv is not None and srv.config == config:
            return srv
        self.retire(config.name)
        srv = self._servers[config.name] = Server(config)
        return srv

    def retire(self, name: str) -> None:
        """Forget server ``name``; its connection, if any, ends once no call is in flight on it."""
        srv = self._servers.pop(name, None)
        if srv is not None and srv.owner is not None and not srv.owner.done():
            task = asyncio.create_task(_wind_down(srv), name=f"mcp-server-{name}-retired")
            self._retiring[task] = srv
            task.add_done_callback(lambda done: self._retiring.pop(done, None))

    def running(self) -> list[str]:
        """The names of the servers whose connection is up or starting (not retired ones)."""
        return [name for name, srv in self._servers.items() if srv.owner is not None and not srv.owner.done()]

    async def start_eager(self) -> None:
        """Start the servers configured ``start = "eager"``, concurrently; never raises."""
        eager = [srv for srv in self._servers.values() if srv.config.start == "eager"]
        await asyncio.gather(*(self._start_quietly(srv) for srv in eager))

    async def close(self) -> None:
        """Stop every connection, waiting at most about ``CLOSE_TIMEOUT_SECONDS`` (then cancelling
        the owners, and waiting as long again). Idempotent; later ``connection`` calls raise
        ``McpServerUnavailable``."""
        self._closed = True
        owners: list[asyncio.Task[None]] = []
        retired = list(self._retiring.values())
        for task in list(self._retiring):
            task.cancel()
        for srv in [*self._servers.values(), *retired]:
            if srv.owner is None or srv.owner.done():
                continue
            if srv.conn is not None:
                srv.conn.stopping = True
                srv.conn.ended.set()
            else:  # still starting
                srv.owner.cancel()
            owners.append(srv.owner)
        if owners:
            _, pending = await asyncio.wait(owners, timeout=CLOSE_TIMEOUT_SECONDS)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_TIMEOUT_SECONDS)

    async def connection(self, srv: Server, *, deadline: float | None) -> Connection:
        """The live connection of ``srv``: the current one, or a new one once the previous one has
        wound down and the backoff has passed (waited for when ``deadline``, a loop time, allows).

        Raises ``McpServerUnavailable`` (shutting down, the backoff outlasts ``deadline``, or the
        start failed)."""
        loop = asyncio.get_running_loop()
        name = srv.config.name
        while True:
            if self._closed:
                raise McpServerUnavailable(name, "the worker is shutting down its MCP servers")
            conn = srv.conn
            if conn is not None and not conn.ended.is_set():
                return conn
            if srv.starting is not None and srv.starting.done() and srv.owner is not None and not srv.owner.done():
                # It started and its connection has ended since: its owner is winding down. Awaiting
                # the done start again would not yield, and this loop would hold the event loop.
                await asyncio.wait({srv.owner})
                continue
            if srv.starting is None:
                if srv.owner is not None and not srv.owner.done():
                    # The previous connection is still winding down (its process exiting).
                    await asyncio.wait({srv.owner})
                    continue
                delay = srv.retry_at - loop.time()
                if delay > 0:
                    if deadline is not None and loop.time() + delay >= deadline:
                        raise McpServerUnavailable(
                            name,
                            f"it failed {srv.failures} times in a row and restarts in {math.ceil(delay)} s; "
                            f"last failure: {srv.diagnostic}",
                        )
                    await asyncio.sleep(delay)
                    continue
                srv.starting = loop.create_future()
                srv.starting.add_done_callback(_retrieve)
                srv.owner = asyncio.create_task(self._own(srv, srv.starting), name=f"mcp-server-{name}")
                srv.owner.add_done_callback(functools.partial(_abandoned, srv, srv.starting))
            await asyncio.shield(srv.starting)

    async def _start_quietly(self, srv: Server) -> None:
        try:
            await self.connection(srv, deadline=None)
        except McpServerUnavailable:
            pass  # recorded as McpServerFailed; the next use tries again

    async def _own(self, srv: Server, started: asyncio.Future[Connection]) -> None:
        """The task that owns one connection of ``srv``: starts it, lists its tools, keeps it until
        it ends (closed, or broken), and records what happened."""
        config = srv.config
        conn = Connection()
        stderr: StderrTail | None = None
        scope: anyio.CancelScope | None = None
        failure: str | None = None
        srv.state = "starting"
        self._events.emit(config.name, "McpServerStarting")
        try:
            async with AsyncExitStack() as stack:
                transport, stderr = await self._launcher.transport(config, stack)
                client = Client(
                    _watched(transport, lambda: conn.broke("the server closed the connection")),
                    mode="auto",
                    elicitation_callback=lambda context, params: answer_elicitation(conn, params),
                    message_handler=srv.on_message,
                    client_info=_CLIENT_INFO,
                    cache=None,
                )
                # One scope around the client's whole life (anyio scopes nest): its deadline bounds
                # the start and is lifted once the server is ready.
                with anyio.CancelScope(deadline=anyio.current_time() + config.timeout_seconds) as scope:
                    try:
                        async with client:
                            if stderr is not None:
                                stderr.close_writer()
                            conn.client = client
                            listing = await list_tools(srv, conn)
                            scope.deadline = math.inf
                            srv.conn = conn
                            srv.state = "ready"
                            srv.failures = 0
                            srv.diagnostic = None
                            self._events.emit(
                                config.name,
                                "McpServerReady",
                                tools=len(listing.tools),
                                protocol_version=client.protocol_version,
                            )
                            started.set_result(conn)
                            await conn.ended.wait()
                    finally:
                        if stderr is not None:
                            stderr.close_writer()
        except asyncio.CancelledError:
            self._settle(srv, conn, started, stopped=True, diagnostic=None)
            raise
        except Exception as err:  # noqa: BLE001 - whatever ended the connection is its diagnostic
            leaf = only(err)
            if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED and not started.done():
                failure = "the server closed the connection before it was ready"
            else:
                failure = describe(leaf)
        if scope is not None and scope.cancel_called and not started.done():
            failure = f"no answer within {config.timeout_seconds:g} s (timeout_seconds)"
        stopped = conn.stopping and failure is None
        diagnostic = None
        if not stopped:
            reason = failure or conn.reason or "the connection ended"
            diagnostic = self._launcher.redact(server_diagnostic(reason, stderr))
        if stderr is not None:
            await asyncio.to_thread(write_log, self._launcher.log_path(config), stderr.data())
        self._settle(srv, conn, started, stopped=stopped, diagnostic=diagnostic)

    def _settle(
        self,
        srv: Server,
        conn: Connection,
        started: asyncio.Future[Connection],
        *,
        stopped: bool,
        diagnostic: str | None,
    ) -> None:
        """Record the end of ``conn``: stopped, or failed with ``diagnostic`` (and the backoff)."""
        if srv.conn is conn:
            srv.conn = None
        srv.starting = None
        if stopped:
            srv.state = "stopped"
            self._events.emit(srv.config.name, "McpServerStopped")
            if not started.done():
                started.set_exception(McpServerUnavailable(srv.config.name, "the worker is shutting down its MCP servers"))
            return
        srv.state = "failed"
        srv.failures += 1
        srv.diagnostic = diagnostic
        srv.retry_at = asyncio.get_running_loop().time() + _backoff(srv.failures)
        self._events.emit(srv.config.name, "McpServerFailed", diagnostic=diagnostic)
        if not started.done():
            started.set_exception(McpServerUnavailable(srv.config.name, diagnostic or "it failed"))


class _WatchedReadStream:
    """A transport's read stream that calls ``on_end`` when the server closes it (EOF)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end), write_stream


async def _wind_down(srv: Server) -> None:
    """End the connection of a retired ``srv`` once its calls in flight are done (or after
    ``RETIRE_GRACE_SECONDS``); its owner records ``McpServerStopped``."""
    try:
        if srv.conn is None and srv.starting is not None:
            await asyncio.wait({srv.starting}, timeout=RETIRE_GRACE_SECONDS)
        conn = srv.conn
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETIRE_GRACE_SECONDS
        while conn is not None and conn.calls and not conn.ended.is_set() and loop.time() < deadline:
            await asyncio.sleep(0.1)
    finally:
        if srv.conn is not None:
            srv.conn.stopping = True
            srv.conn.ended.set()
        elif srv.owner is not None:
            srv.owner.cancel()
    if srv.owner is not None:
        await asyncio.wait({srv.owner}, timeout=CLOSE_TIMEOUT_SECONDS)


def _backoff(failures: int) -> float:
    """Seconds before restarting after ``failures`` consecutive failures: 0, 1, 2, 4 ... 60."""
    return 0.0 if failures <= 1 else min(BACKOFF_MAX_SECONDS, 2.0 ** (failures - 2))


def _abandoned(srv: Server, started: asyncio.Future[Any], owner: asyncio.Task[None]) -> None:
    """An owner task that ended without settling its start (cancelled before it ran)."""
    if not started.done():
        started.set_exception(McpServerUnavailable(srv.config.name, "its start was abandoned: the worker is shutting down"))
        if srv.starting is started:
            srv.starting = None
            srv.state = "stopped"


def _retrieve(future: asyncio.Future[Any]) -> None:
    # A start's failure reaches every waiter; with none left, asyncio must not log it as lost.
    if not future.cancelled():
        future.exception()


def _client_info() -> Implementation:
    try:
        return Implementation(name="agentrt", version=version("agentrt"))
    except PackageNotFoundError:
        return Implementation(name="agentrt", version="0")


_CLIENT_INFO = _client_info()
