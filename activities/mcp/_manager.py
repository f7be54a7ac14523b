"""The worker's MCP servers: one live connection per configured server per worker process,
started on first use (or at worker start), restarted with backoff when it breaks, and shared
by every call the worker runs.

Each connection is an ``mcp.Client`` owned by one long-lived asyncio task (anyio context
managers must be entered and exited in the same task); calls run in their callers' tasks
over it. A stdio server runs in the OS sandbox ``shell.run`` uses (bubblewrap) unless its
configuration says ``sandbox = "none"``; its stderr is kept as a bounded tail for
diagnostics. Connection changes are recorded as ``McpServerEvent`` rows, in order, by one
writer task (the store is synchronous: writes go through ``asyncio.to_thread``).

Elicitation never blocks a worker: the k-th time a server asks the user during one run of a
call, it gets ``answers[k]``; when it asks beyond them, the call is stopped (its request
cancelled at the server) and the question is returned for the workflow to ask, after which
the call runs again with one more answer.

- Protocol 2025-11-25 and earlier: the server sends ``elicitation/create`` during the call. The
  request names no call (the SDK gives the callback no related request id, on stdio or HTTP),
  so it is attributed to the one call in flight on the connection; with several in flight it
  is refused with a JSON-RPC error (the server's tool fails, the model may call again), never
  answered with another call's answer.
- Protocol 2026-07-28: the call returns ``InputRequiredResult`` rounds, answered in order from
  the same answers. A returned question's ``request_state`` is this module's token wrapping
  the server's state, the round's keys and the answers taken before it (``_ResumeState``): the
  next run resumes that round; without it, or when the server refuses its old state (it
  restarted), the call runs from the start and each question is answered again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import logging
import math
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    CreateMessageRequest,
    ElicitRequest,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    Implementation,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    PaginatedRequestParams,
    Tool,
    ToolListChangedNotification,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from agentrt.activities.mcp._results import result_text
from agentrt.activities.mcp._risk import describe_tool
from agentrt.activities.tools import sandbox_status, sandboxed_argv
from agentrt.schemas import (
    VARIABLE_REFERENCE,
    ConfigurationError,
    ElicitationAnswer,
    ElicitationRequest,
    McpServerConfig,
    McpServerEvent,
    McpServerState,
    McpServerUnavailable,
    McpToolError,
    McpToolInfo,
    ToolError,
    ToolSpec,
)

if TYPE_CHECKING:
    from agentrt.store import Store

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "MAX_LISTED_TOOLS",
    "MAX_LIST_PAGES",
    "McpCallOutcome",
    "McpListing",
    "McpManager",
    "SERVER_PATH",
]

logger = logging.getLogger(__name__)


class _BoundedLog(logging.Filter):
    """Lets through at most ``limit`` records per ``window`` seconds (each with its traceback),
    then one line saying how many were left out: the SDK logs a traceback for every line a
    stdio server writes to stdout that is not JSON-RPC, and a server may write millions."""

    def __init__(self, limit: int = 10, window: float = 60.0) -> None:
        super().__init__()
        self.limit, self.window = limit, window
        self.started, self.count, self.dropped = 0.0, 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.created - self.started >= self.window:
            if self.dropped:
                logger.warning("%d more log records of %s left out in %g s", self.dropped, record.name, self.window)
            self.started, self.count, self.dropped = record.created, 0, 0
        self.count += 1
        if self.count <= self.limit:
            return True
        self.dropped += 1
        return False


STDIO_LOG_FILTER = _BoundedLog()
logging.getLogger("mcp.client.stdio").addFilter(STDIO_LOG_FILTER)

# Pages of tools/list followed (next_cursor), and tools kept, per listing.
MAX_LIST_PAGES = 20
MAX_LISTED_TOOLS = 1000
# Restart delays after consecutive failures: at once, then 1, 2, 4 ... seconds, at most this.
BACKOFF_MAX_SECONDS = 60.0
# PATH of a stdio server's process (its configured env may change it).
SERVER_PATH = "/usr/local/bin:/usr/bin:/bin"
# Bytes of a stdio server's stderr kept (the latest), and characters of it in a diagnostic.
STDERR_TAIL_BYTES = 64 * 1024
DIAGNOSTIC_STDERR_CHARS = 2000
# How long the end of a connection waits for the rest of the server's stderr (seconds).
STDERR_DRAIN_SECONDS = 1.0
# Rounds of 2026-07-28 InputRequiredResult answered in one run of a call.
MAX_INPUT_ROUNDS = 10
# How long close() waits for connections to shut down before cancelling them (seconds); a
# stdio server gets 2 s to exit after its stdin closes, then SIGTERM, then SIGKILL.
CLOSE_TIMEOUT_SECONDS = 10.0
# How long a call that broke waits for its connection's diagnostic (exit status, stderr).
BROKEN_DIAGNOSTIC_WAIT_SECONDS = 2.0
# How long a server request for input waits for its call to cancel the call's request.
ELICITATION_STOP_WAIT_SECONDS = 5.0
# The token wrapping a 2026-07-28 server's request_state (see _ResumeState).
_STATE_PREFIX = "agentrt-mcp-1:"
_VARIABLE = VARIABLE_REFERENCE
# A stdio server runs under a shell that reports its exit status on stderr, in this line (no
# transport of the SDK exposes the process, and bwrap's status fd would take the server's stderr).
_EXIT_LINE = "agentrt-mcp: exit status"
_EXIT_STATUS = re.compile(rf"^{re.escape(_EXIT_LINE)} (\d+)$")
_STATUS_WRAPPER = f'"$@"; status=$?; echo "{_EXIT_LINE} $status" >&2; exit $status'


@dataclass
class McpListing:
    """A server's tools: ``tools``, every tool it lists (skipped ones with why), and ``specs``, the
    ones the model may see (``<server>.<tool>``, risk class, ``source="mcp:<server>"``)."""

    tools: list[McpToolInfo]
    specs: list[ToolSpec]


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
    server's tool listing is reused.

    Call ``start()`` when the worker starts and ``close()`` when it stops. Raises
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
    ) -> None:
        for key, config in servers.items():
            if key != config.name:
                raise ConfigurationError(f"MCP server {key!r} is configured with name {config.name!r}")
        self._configs = dict(servers)
        self._servers = {name: _Server(config) for name, config in servers.items()}
        self._store = store
        self._worker = worker
        self._home = Path(home)
        self._env = os.environ if env is None else env
        self._ttl = listing_ttl_seconds
        self._closed = False
        self._events: asyncio.Queue[McpServerEvent] | None = None
        self._writer: asyncio.Task[None] | None = None

    @property
    def servers(self) -> Mapping[str, McpServerConfig]:
        """The configured servers by name."""
        return self._configs

    async def start(self) -> None:
        """Start the servers configured ``start = "eager"``, concurrently, each within its
        ``timeout_seconds``. A server that fails is recorded (``McpServerFailed``) and retried on
        first use; this never raises."""
        eager = [srv for srv in self._servers.values() if srv.config.start == "eager"]
        await asyncio.gather(*(self._start_quietly(srv) for srv in eager))

    async def close(self) -> None:
        """Stop every running server (``McpServerStopped``) and write the pending events. Waits at
        most about ``CLOSE_TIMEOUT_SECONDS`` for servers to exit; idempotent, and safe when nothing
        was started. Later uses raise ``McpServerUnavailable``."""
        self._closed = True
        owners: list[asyncio.Task[None]] = []
        for srv in self._servers.values():
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
        await self._flush_events()

    def state(self, server: str) -> McpServerState | None:
        """The state of ``server`` in this process: ``starting``, ``ready``, ``failed`` or ``stopped``;
        None for a server not configured or not used yet."""
        srv = self._servers.get(server)
        return None if srv is None else srv.state

    def secrets(self) -> list[str]:
        """The values ``${VAR}`` references in the servers' ``env`` and ``headers`` expand to (set,
        non-empty ones), for redacting tool results and messages."""
        found: set[str] = set()
        for config in self._configs.values():
            for value in [*config.env.values(), *config.headers.values()]:
                for name in _VARIABLE.findall(value):
                    if self._env.get(name):
                        found.add(self._env[name])
        return sorted(found)

    async def list_tools(self, server: str, *, refresh: bool = False) -> McpListing:
        """The tools of ``server``, from a listing at most ``listing_ttl_seconds`` old unless
        ``refresh``; starts the server if needed. Bounded by its ``timeout_seconds``.

        Raises ``McpServerUnavailable`` (not configured, cannot start, broke, listing failed or
        timed out).
        """
        srv = self._server(server)
        loop = asyncio.get_running_loop()
        timeout = srv.config.timeout_seconds
        if not refresh and srv.fresh_listing(loop.time(), self._ttl):
            assert srv.listing is not None
            return srv.listing
        try:
            async with asyncio.timeout(timeout) as scope:
                conn = await self._connection(srv, deadline=loop.time() + timeout)
                if not refresh and srv.fresh_listing(loop.time(), self._ttl):
                    assert srv.listing is not None
                    return srv.listing
                async with srv.listing_lock:
                    return await self._list(srv, conn)
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

        Raises ``McpServerUnavailable`` (the server is not configured, cannot start, or its
        connection broke during the call), ``McpToolError`` (a JSON-RPC error or an invalid
        result), ``ToolError`` (timed out; the request is cancelled at the server). When the
        awaiting task is cancelled, the request is cancelled at the server and
        ``CancelledError`` propagates.
        """
        srv = self._server(server)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_seconds) as scope:
                conn = await self._connection(srv, deadline=loop.time() + timeout_seconds)
                result = await self._call(srv, conn, tool, arguments, answers, request_state, on_progress)
        except TimeoutError:
            if scope.expired():
                raise ToolError(f"the MCP tool {server}.{tool} timed out after {timeout_seconds:g} s") from None
            raise
        if isinstance(result, ElicitationRequest):
            return McpCallOutcome(text="", is_error=False, input_required=result)
        text = await asyncio.to_thread(result_text, result, files_dir)
        return McpCallOutcome(text=text, is_error=result.is_error)

    # Connections.

    def _server(self, name: str) -> _Server:
        srv = self._servers.get(name)
        if srv is None:
            raise McpServerUnavailable(name, "this worker has no [mcp.servers." + name + "] in its configuration")
        return srv

    async def _start_quietly(self, srv: _Server) -> None:
        try:
            await self._connection(srv, deadline=None)
        except McpServerUnavailable:
            pass  # recorded as McpServerFailed; the next use tries again

    async def _connection(self, srv: _Server, *, deadline: float | None) -> _Connection:
        """The live connection of ``srv``: the current one, or a new one once the previous one has
        wound down and the backoff has passed (waited for when ``deadline``, a loop time, allows)."""
        loop = asyncio.get_running_loop()
        name = srv.config.name
        while True:
            if self._closed:
                raise McpServerUnavailable(name, "the worker is shutting down its MCP servers")
            conn = srv.conn
            if conn is not None and not conn.ended.is_set():
                return conn
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

    async def _own(self, srv: _Server, started: asyncio.Future[_Connection]) -> None:
        """The task that owns one connection of ``srv``: starts it, lists its tools, keeps it until
        it ends (closed, or broken), and records what happened."""
        config = srv.config
        conn = _Connection()
        stderr: _StderrTail | None = None
        scope: anyio.CancelScope | None = None
        failure: str | None = None
        srv.state = "starting"
        self._emit(srv, "McpServerStarting")
        try:
            async with AsyncExitStack() as stack:
                if config.transport == "stdio":
                    parameters = await asyncio.to_thread(self._stdio_parameters, config)
                    stderr = await _StderrTail.open()
                    stack.push_async_callback(stderr.aclose)
                    transport: Any = stdio_client(parameters, errlog=stderr.writer)
                else:
                    assert config.url is not None
                    headers = self._expand(config, config.headers, "headers")
                    http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                    transport = streamable_http_client(config.url, http_client=http)
                client = Client(
                    _watched(transport, lambda: conn.broke("the server closed the connection")),
                    mode="auto",
                    elicitation_callback=lambda context, params: self._on_elicitation(conn, params),
                    message_handler=lambda message: self._on_message(srv, message),
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
                            listing = await self._list(srv, conn)
                            scope.deadline = math.inf
                            srv.conn = conn
                            srv.state = "ready"
                            srv.failures = 0
                            srv.diagnostic = None
                            self._emit(srv, "McpServerReady", tools=len(listing.tools), protocol_version=client.protocol_version)
                            started.set_result(conn)
                            await conn.ended.wait()
                    finally:
                        if stderr is not None:
                            stderr.close_writer()
        except asyncio.CancelledError:
            self._settle(srv, conn, started, stopped=True, diagnostic=None)
            raise
        except Exception as err:  # noqa: BLE001 - whatever ended the connection is its diagnostic
            leaf = _only(err)
            if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED and not started.done():
                failure = "the server closed the connection before it was ready"
            else:
                failure = _describe(leaf)
        if scope is not None and scope.cancel_called and not started.done():
            failure = f"no answer within {config.timeout_seconds:g} s (timeout_seconds)"
        stopped = conn.stopping and failure is None
        diagnostic = None
        if not stopped:
            reason = failure or conn.reason or "the connection ended"
            diagnostic = self._redact(_diagnostic(reason, stderr))
        if stderr is not None:
            await asyncio.to_thread(_write_log, self._home / "mcp" / f"{config.name}.log", stderr.data())
        self._settle(srv, conn, started, stopped=stopped, diagnostic=diagnostic)

    def _settle(
        self, srv: _Server, conn: _Connection, started: asyncio.Future[_Connection], *, stopped: bool, diagnostic: str | None
    ) -> None:
        """Record the end of ``conn``: stopped, or failed with ``diagnostic`` (and the backoff)."""
        if srv.conn is conn:
            srv.conn = None
        srv.starting = None
        if stopped:
            srv.state = "stopped"
            self._emit(srv, "McpServerStopped")
            if not started.done():
                started.set_exception(McpServerUnavailable(srv.config.name, "the worker is shutting down its MCP servers"))
            return
        srv.state = "failed"
        srv.failures += 1
        srv.diagnostic = diagnostic
        srv.retry_at = asyncio.get_running_loop().time() + _backoff(srv.failures)
        self._emit(srv, "McpServerFailed", diagnostic=diagnostic)
        if not started.done():
            started.set_exception(McpServerUnavailable(srv.config.name, diagnostic or "it failed"))

    def _stdio_parameters(self, config: McpServerConfig) -> StdioServerParameters:
        """How to spawn a stdio server (runs in a thread: it creates directories and may probe the
        sandbox). Its environment is ``PATH``, ``HOME`` (its directory), ``LANG`` and its expanded
        ``env``, nothing of the worker's; values reach it through the process environment,
        never its command line. It runs under ``/bin/sh``, which reports its exit status on
        stderr for diagnostics."""
        assert config.command is not None
        cwd = self._cwd(config)
        cwd.mkdir(parents=True, exist_ok=True)
        env = {"PATH": SERVER_PATH, "HOME": str(cwd), "LANG": "C.UTF-8", **self._expand(config, config.env, "env")}
        # stdio_client adds some of the worker's variables (HOME, USER ...); unset the others.
        inherited = [name for name in DEFAULT_INHERITED_ENV_VARS if name not in env]
        command = ["/bin/sh", "-c", _STATUS_WRAPPER, "agentrt-mcp", config.command, *config.args]
        if config.sandbox == "none":
            unset = [arg for name in inherited for arg in ("-u", name)]
            argv = [shutil.which("env") or "/usr/bin/env", *unset, "--", *command]
        else:
            status = sandbox_status()
            if not status.available or status.path is None:
                raise McpServerUnavailable(
                    config.name,
                    f"the OS sandbox (bubblewrap) cannot run on this worker, so the server was not started "
                    f"(it would run unsandboxed only with sandbox = \"none\"): {status.reason}",
                )
            read_paths = [self._host_path(p, cwd) for p in config.read_paths]
            argv = sandboxed_argv(
                status.path, command, cwd, config.sandbox, network=config.network, env={}, read_paths=read_paths
            )
            argv = _environment_through_process(argv, inherited)
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)

    def _cwd(self, config: McpServerConfig) -> Path:
        if config.cwd is None:
            return (self._home / "mcp" / config.name).resolve()
        path = Path(config.cwd).expanduser()
        return (path if path.is_absolute() else self._home / path).resolve()

    @staticmethod
    def _host_path(value: str, cwd: Path) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else cwd / path

    def _expand(self, config: McpServerConfig, values: Mapping[str, str], where: str) -> dict[str, str]:
        """``values`` with each ``${VAR}`` replaced from the manager's environment. Raises
        ``McpServerUnavailable`` naming the first variable that is not set."""

        def one(key: str, value: str) -> str:
            def replace(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in self._env:
                    raise McpServerUnavailable(
                        config.name, f"the environment variable {name} (in {where}.{key}) is not set on this worker"
                    )
                return self._env[name]

            return _VARIABLE.sub(replace, value)

        return {key: one(key, value) for key, value in values.items()}

    async def _list(self, srv: _Server, conn: _Connection) -> McpListing:
        """List the tools of ``srv`` on ``conn`` (following ``next_cursor``, bounded) and cache them."""
        assert conn.client is not None
        session = conn.client.session
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_LIST_PAGES):
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor or len(tools) >= MAX_LISTED_TOOLS:
                    break
        except MCPError as err:
            if err.code == CONNECTION_CLOSED:
                conn.broke("the connection closed while listing tools")
                raise McpServerUnavailable(srv.config.name, "the connection closed while listing its tools") from err
            raise McpServerUnavailable(srv.config.name, f"tools/list failed: {err.error.message} (code {err.code})") from err
        except ValidationError as err:
            raise McpServerUnavailable(
                srv.config.name, f"tools/list answered with an invalid result: {_first_line(str(err))}"
            ) from err
        listing = _listing(srv.config, tools[:MAX_LISTED_TOOLS])
        srv.listing = listing
        srv.listed_at = asyncio.get_running_loop().time()
        return listing

    async def _on_message(self, srv: _Server, message: object) -> None:
        if isinstance(message, ToolListChangedNotification):
            srv.listing = None

    # Calls.

    async def _call(
        self,
        srv: _Server,
        conn: _Connection,
        tool: str,
        arguments: dict[str, Any],
        answers: Sequence[ElicitationAnswer],
        request_state: str | None,
        on_progress: Callable[[float, float | None, str | None], None] | None,
    ) -> CallToolResult | ElicitationRequest:
        """One run of a call on ``conn``: its result, or the question it stopped at."""
        call = _Call(answers)
        conn.calls.add(call)
        request = asyncio.create_task(self._request(srv, conn, call, tool, arguments, request_state, on_progress))
        asked = asyncio.create_task(call.asked.wait())
        try:
            await asyncio.wait({request, asked}, return_when=asyncio.FIRST_COMPLETED)
            if request.done():
                return self._outcome(srv, conn, tool, request)
            # The server asked (elicitation/create) beyond the answers: stop the call at the server.
            await _cancel(request)
            assert call.question is not None
            return call.question
        except _Broken as broken:
            raise McpServerUnavailable(srv.config.name, await self._broken_diagnostic(srv, broken.reason)) from broken.__cause__
        finally:
            conn.calls.discard(call)
            call.stopped.set()
            asked.cancel()
            if not request.done():
                await _cancel(request)

    async def _request(
        self,
        srv: _Server,
        conn: _Connection,
        call: _Call,
        tool: str,
        arguments: dict[str, Any],
        request_state: str | None,
        on_progress: Callable[[float, float | None, str | None], None] | None,
    ) -> CallToolResult | ElicitationRequest:
        """Send tools/call, answering a 2026-07-28 server's ``InputRequiredResult`` rounds from the
        call's answers; an ``ElicitationRequest`` when they run out."""
        assert conn.client is not None
        session = conn.client.session
        modern = conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS
        progress = None
        if on_progress is not None:
            report = on_progress

            async def progress(value: float, total: float | None, message: str | None) -> None:
                report(value, total, message)

        responses: dict[str, InputResponse] | None = None
        state: str | None = None
        consumed = 0
        resumed = _ResumeState.decode(request_state) if modern and request_state else None
        if resumed is not None and len(call.answers) >= resumed.base + len(resumed.keys):
            responses = {key: _elicit_result(call.answers[resumed.base + i]) for i, key in enumerate(resumed.keys)}
            state = resumed.state
            consumed = resumed.base + len(resumed.keys)
        else:
            resumed = None
        rounds = 0
        relisted = False
        while True:
            try:
                result = await session.call_tool(
                    tool, arguments, progress_callback=progress, input_responses=responses, request_state=state,
                    allow_input_required=True,
                )
            except MCPError as err:
                if err.code == HEADER_MISMATCH and modern and not relisted:
                    # The server's listing of the tool changed since this connection listed it.
                    relisted = True
                    await self._list(srv, conn)
                    continue
                if resumed is not None and err.code != CONNECTION_CLOSED:
                    # The server no longer takes its state (it restarted, or the state expired):
                    # run the call from the start, answering each question again.
                    resumed, responses, state, consumed = None, None, None, 0
                    continue
                raise
            resumed = None
            if not isinstance(result, InputRequiredResult):
                return result
            rounds += 1
            if rounds > MAX_INPUT_ROUNDS:
                raise McpToolError(srv.config.name, tool, None, f"the server asked for input more than {MAX_INPUT_ROUNDS} times")
            requests = result.input_requests or {}
            state = result.request_state
            if not requests:  # only state: retry after a short pause, as the SDK's own driver does
                await asyncio.sleep(min(0.05 * 2 ** (rounds - 1), 0.25))
                responses = None
                continue
            elicit_keys = [key for key, request in requests.items() if isinstance(request, ElicitRequest)]
            responses = {}
            for key, request in requests.items():
                if isinstance(request, ElicitRequest):
                    index = consumed + elicit_keys.index(key)
                    if index >= len(call.answers):
                        token = _ResumeState(state, elicit_keys, consumed).encode()
                        return _elicitation_request(request.params, key=key, request_state=token)
                    responses[key] = _elicit_result(call.answers[index])
                elif isinstance(request, ListRootsRequest):
                    responses[key] = ListRootsResult(roots=[])
                elif isinstance(request, CreateMessageRequest):
                    raise McpToolError(
                        srv.config.name, tool, None, "the server asked the client to sample a model, which agentrt does not offer"
                    )
            consumed += len(elicit_keys)

    def _outcome(self, srv: _Server, conn: _Connection, tool: str, request: asyncio.Task[Any]) -> Any:
        """The finished ``request``'s result, with SDK errors mapped to agentrt's."""
        name = srv.config.name
        try:
            return request.result()
        except MCPError as err:
            if err.code == CONNECTION_CLOSED:
                conn.broke("the connection closed during a call")
                raise _Broken("the connection closed during the call") from err
            raise McpToolError(name, tool, err.code, err.error.message) from err
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError) as err:
            conn.broke(f"the connection failed during a call: {_describe(err)}")
            raise _Broken(f"the connection failed during the call: {_describe(err)}") from err
        except (ValidationError, RuntimeError) as err:
            # An answer the protocol does not allow (a result of the wrong shape, structured content
            # that does not match the tool's output schema).
            raise McpToolError(name, tool, None, f"invalid result: {_first_line(str(err))}") from err

    async def _broken_diagnostic(self, srv: _Server, reason: str) -> str:
        """``reason``, with the server's exit status and stderr once its connection has wound down
        (waiting a little for it)."""
        owner = srv.owner
        if owner is not None and not owner.done():
            await asyncio.wait({owner}, timeout=BROKEN_DIAGNOSTIC_WAIT_SECONDS)
        if owner is not None and owner.done() and srv.diagnostic:
            return f"{reason} ({srv.diagnostic})"
        return reason

    async def _on_elicitation(self, conn: _Connection, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        """A server's ``elicitation/create`` (protocol 2025-11-25 and earlier), sent while a call runs.

        The request names no call, so it is attributed to the one call in flight on this
        connection; with several in flight it is refused (the server sees an error), since
        answering one call's question with another's answer would be worse.
        """
        calls = list(conn.calls)
        if len(calls) != 1:
            return ErrorData(
                code=INVALID_REQUEST,
                message=f"cannot tell which of the {len(calls)} calls in flight asks for input; call again",
            )
        call = calls[0]
        index = call.count
        call.count += 1
        if index < len(call.answers):
            try:
                return _elicit_result(call.answers[index])
            except ValidationError as err:
                return ErrorData(code=INVALID_PARAMS, message=f"the answer does not fit the request: {err}")
        call.question = _elicitation_request(params)
        call.asked.set()
        # The call cancels its request first; by then this answer is moot.
        with anyio.move_on_after(ELICITATION_STOP_WAIT_SECONDS):
            await call.stopped.wait()
        return ElicitResult(action="cancel")

    # Events.

    def _emit(self, srv: _Server, kind: str, **fields: Any) -> None:
        if self._store is None:
            return
        event = McpServerEvent(type=kind, server=srv.config.name, worker=self._worker, at=datetime.now(UTC), **fields)
        if self._events is None:
            self._events = asyncio.Queue()
        self._events.put_nowait(event)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_events(self._events), name="mcp-server-events")

    async def _write_events(self, queue: asyncio.Queue[McpServerEvent]) -> None:
        assert self._store is not None
        while True:
            event = await queue.get()
            try:
                await asyncio.to_thread(self._store.record_mcp_server_event, event)
            except Exception:  # a lost event must not stop the next ones
                logger.exception("could not record %s of MCP server %r", event.type, event.server)
            finally:
                queue.task_done()

    async def _flush_events(self) -> None:
        if self._events is not None:
            try:
                await asyncio.wait_for(self._events.join(), timeout=CLOSE_TIMEOUT_SECONDS)
            except TimeoutError:
                logger.warning("MCP server events not written within %s s", CLOSE_TIMEOUT_SECONDS)
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.wait({self._writer})
            self._writer = None

    def _redact(self, text: str) -> str:
        for secret in sorted(self.secrets(), key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text


class _Server:
    """One configured server's state in this process."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.state: McpServerState | None = None
        self.conn: _Connection | None = None
        self.owner: asyncio.Task[None] | None = None
        self.starting: asyncio.Future[_Connection] | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.diagnostic: str | None = None
        self.listing: McpListing | None = None
        self.listed_at = 0.0
        self.listing_lock = asyncio.Lock()

    def fresh_listing(self, now: float, ttl: float) -> bool:
        live = self.conn is not None and not self.conn.ended.is_set()
        return live and self.listing is not None and now - self.listed_at < ttl


class _Connection:
    """One connection's shared state: its client, the calls in flight, and how it ended."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.calls: set[_Call] = set()
        self.ended = asyncio.Event()
        self.stopping = False
        self.reason: str | None = None

    def broke(self, reason: str) -> None:
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()


class _Call:
    """One run of a call, as the elicitation callback sees it."""

    def __init__(self, answers: Sequence[ElicitationAnswer]) -> None:
        self.answers = answers
        self.count = 0  # server requests for input seen so far
        self.question: ElicitationRequest | None = None
        self.asked = asyncio.Event()
        self.stopped = asyncio.Event()


class _Broken(Exception):
    """The connection broke during a call (mapped to ``McpServerUnavailable`` by ``_call``)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class _ResumeState:
    """What ``ElicitationRequest.request_state`` carries for a 2026-07-28 server: the server's own
    ``state``, the ``keys`` of the round's elicitation requests, and ``base``, how many answers
    earlier rounds took. With all of that round's answers, the next run resumes the round
    instead of running the call from the start."""

    state: str | None
    keys: list[str]
    base: int

    def encode(self) -> str:
        data = json.dumps({"state": self.state, "keys": self.keys, "base": self.base}, separators=(",", ":"))
        return _STATE_PREFIX + base64.urlsafe_b64encode(data.encode()).decode()

    @classmethod
    def decode(cls, token: str) -> _ResumeState | None:
        if not token.startswith(_STATE_PREFIX):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(token[len(_STATE_PREFIX) :].encode()))
            state, keys, base = data["state"], data["keys"], data["base"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        if not (state is None or isinstance(state, str)) or not isinstance(base, int) or base < 0:
            return None
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            return None
        return cls(state, keys, base)


class _StderrTail(asyncio.Protocol):
    """A stdio server's stderr: a pipe whose latest ``STDERR_TAIL_BYTES`` are kept in memory."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._eof = asyncio.Event()
        self._transport: asyncio.BaseTransport | None = None
        self.writer: Any = None

    @classmethod
    async def open(cls) -> _StderrTail:
        read_fd, write_fd = os.pipe()
        tail = cls()
        try:
            reader = os.fdopen(read_fd, "rb", buffering=0)
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        try:
            tail._transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: tail, reader)
        except BaseException:
            reader.close()
            os.close(write_fd)
            raise
        tail.writer = os.fdopen(write_fd, "w")
        return tail

    def data_received(self, data: bytes) -> None:
        self._data += data
        if len(self._data) > STDERR_TAIL_BYTES:
            del self._data[: len(self._data) - STDERR_TAIL_BYTES]

    def eof_received(self) -> bool | None:
        self._eof.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof.set()

    def close_writer(self) -> None:
        """Close this process's copy of the pipe's write end (the server holds its own)."""
        if self.writer is not None and not self.writer.closed:
            self.writer.close()

    async def aclose(self) -> None:
        self.close_writer()
        try:
            await asyncio.wait_for(self._eof.wait(), STDERR_DRAIN_SECONDS)
        except TimeoutError:
            pass
        if self._transport is not None:
            self._transport.close()

    def data(self) -> bytes:
        return bytes(self._data)

    def report(self) -> tuple[int | None, str]:
        """``(exit status, stderr text)``: the wrapper's exit status line taken out of the text."""
        exit_code: int | None = None
        kept = []
        for line in self._data.decode(errors="replace").splitlines():
            if match := _EXIT_STATUS.match(line):
                exit_code = int(match.group(1))
                continue
            kept.append(line)
        return exit_code, "\n".join(kept).strip()


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


def _listing(config: McpServerConfig, tools: list[Tool]) -> McpListing:
    infos: list[McpToolInfo] = []
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for tool in tools:
        info, spec = describe_tool(config, tool)
        if tool.name in seen:
            info = info.model_copy(update={"skipped": "listed more than once"})
            spec = None
        seen.add(tool.name)
        infos.append(info)
        if spec is not None:
            specs.append(spec)
    return McpListing(tools=infos, specs=specs)


def _environment_through_process(argv: list[str], unset: list[str]) -> list[str]:
    """The bwrap command line of ``sandboxed_argv`` with the sandboxed command taking bwrap's own
    environment (the process environment, readable only by this user) instead of ``--setenv``
    arguments any user can read in the process list; ``unset`` names are removed from it."""
    head = argv.index("--")
    options = [arg for arg in argv[1:head] if arg != "--clearenv"]
    assert "--setenv" not in options, "sandboxed_argv was given an environment to set"
    unsets = [arg for name in unset for arg in ("--unsetenv", name)]
    return [argv[0], *unsets, *options, *argv[head:]]


def _elicitation_request(params: ElicitRequestParams, *, key: str | None = None, request_state: str | None = None) -> ElicitationRequest:
    if isinstance(params, ElicitRequestURLParams):
        return ElicitationRequest(message=params.message, mode="url", url=params.url, key=key, request_state=request_state)
    return ElicitationRequest(
        message=params.message, requested_schema=dict(params.requested_schema), key=key, request_state=request_state
    )


def _elicit_result(answer: ElicitationAnswer) -> ElicitResult:
    if answer.action == "accept" and answer.content is not None:
        return ElicitResult(action="accept", content=answer.content)
    return ElicitResult(action=answer.action)


# Exit status 126/127 in the sandbox: the program (or its interpreter, through a symlink) is not
# among what the sandbox mounts.
SANDBOX_NOT_FOUND_HINT = (
    "a sandboxed server sees only /usr, /bin, /lib*, its cwd and read_paths: add to read_paths the real "
    "location of its program and what it loads (for a virtualenv's python, the venv and the interpreter's "
    "installation, e.g. the prefix `python -c 'import sys; print(sys.base_prefix)'` prints)"
)


def _diagnostic(reason: str, stderr: _StderrTail | None) -> str:
    parts = [reason]
    if stderr is not None:
        exit_code, text = stderr.report()
        if exit_code is not None:
            parts.append(f"exit status {exit_code}" + (f" (signal {exit_code - 128})" if exit_code > 128 else ""))
            if exit_code in (126, 127):
                parts.append(SANDBOX_NOT_FOUND_HINT)
        if text:
            if len(text) > DIAGNOSTIC_STDERR_CHARS:
                text = "…" + text[-DIAGNOSTIC_STDERR_CHARS:]
            parts.append(f"stderr: {text}")
    return "; ".join(parts)


def _describe(err: BaseException) -> str:
    """One line for an exception, exception groups flattened."""
    if isinstance(err, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in err.exceptions)
    if isinstance(err, MCPError):
        return f"{err.error.message} (code {err.code})"
    if isinstance(err, McpServerUnavailable):
        return err.diagnostic
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _only(err: BaseException) -> BaseException:
    """The one exception inside nested single-exception groups (anyio task groups), else ``err``."""
    while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    return err


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _backoff(failures: int) -> float:
    """Seconds before restarting after ``failures`` consecutive failures: 0, 1, 2, 4 ... 60."""
    return 0.0 if failures <= 1 else min(BACKOFF_MAX_SECONDS, 2.0 ** (failures - 2))


async def _cancel(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for it to finish (its exception, if any, dropped)."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()


def _abandoned(srv: _Server, started: asyncio.Future[Any], owner: asyncio.Task[None]) -> None:
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


def _write_log(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError:
        logger.warning("could not write %s", path, exc_info=True)


def _client_info() -> Implementation:
    try:
        return Implementation(name="agentrt", version=version("agentrt"))
    except PackageNotFoundError:
        return Implementation(name="agentrt", version="0")


_CLIENT_INFO = _client_info()
