"""The HTTP gateway (``agentrt serve``): a FastAPI app over ``AgentClient`` for callers in any
language: sessions, autonomous tasks and task graphs (``/v1/graphs``, also ``/v1/runs``), behind bearer tokens, with an
OpenAPI schema at ``/openapi.json`` (docs/gateway.md).

Routes (every ``/v1`` and ``/apps`` route needs ``Authorization: Bearer <token>``):

    GET  /healthz                                               no authentication
    GET  /docs · /redoc · /openapi.json                         no authentication (gateway/_docs.py)
    GET  /v1/sessions · POST /v1/sessions                       scope sessions
    GET  /v1/sessions/{id} · POST …/messages · GET …/turns/{turn_id}?wait= · GET …/events · GET …/stream
    POST …/cancel · POST …/pause · POST …/resume · POST …/archive · POST …/approvals/{request_id}
    POST …/approvals/{request_id}/reconcile · POST …/answers/{request_id}
    POST /v1/agents/{agent}/ag-ui                               scope sessions: one AG-UI run (gateway/_agui_runs.py)
    GET  /v1/tasks · POST /v1/tasks · GET /v1/tasks/{id} · GET …/events · POST …/cancel|pause|resume   scope tasks
    GET  /v1/graphs · POST /v1/graphs · GET /v1/graphs/{id} · GET …/events · POST …/approve|reject|cancel|pause|resume   scope runs
    the same task-graph routes under /v1/runs (an alias), /apps/{app}/graphs and its alias /apps/{app}/runs (the app is the profile of
    the graphs it creates)
    GET  /v1/health/stuck                                       scope admin
    GET  /v1/audit                                              scope admin (gateway/_audit.py)
    POST /v1/pause · POST /v1/resume                            scope admin: everything of one owner (gateway/_pause.py)
    GET  /v1/mcp/servers · POST /v1/mcp/servers · PUT …/{name} · POST …/{name}/trust|revoke   scope admin (gateway/_mcp.py)
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from agentrt.client import AgentClient
from agentrt.gateway._agui_runs import agui_routes
from agentrt.gateway._auth import MAX_STREAMS, MAX_STREAMS_PER_PRINCIPAL, Gateway
from agentrt.gateway._docs import install_docs
from agentrt.gateway._errors import MAX_BODY_BYTES, BodyLimit, Problem, ProblemBody, install_error_handlers
from agentrt.gateway._audit import audit_routes
from agentrt.gateway._mcp import mcp_routes
from agentrt.gateway._health import health_routes
from agentrt.gateway._models import Health
from agentrt.gateway._pause import pause_routes
from agentrt.gateway._tasks_graphs import graph_routes, task_routes
from agentrt.gateway._sessions import session_routes
from agentrt.gateway._stream import StreamHub
from agentrt.gateway._webhooks import WebhookDispatcher
from agentrt.schemas import ConfigurationError
from agentrt.worker import GatewayConfig

__all__ = ["LocalCallersOnly", "check_authentication", "create_app", "is_loopback"]

# A Host header: a name or IPv4 address, or an IPv6 address in brackets, then an optional port.
_HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]{1,5})?")

# The error responses every authenticated route documents (its body: ``ProblemBody``).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ProblemBody, "description": description}
    for status, description in (
        (401, "No bearer token, or one the gateway does not know (`WWW-Authenticate: Bearer`)."),
        (403, "The token's scopes do not cover this route, or its principal may not pause that owner's work."),
        (404, "No such session, task or run, or one of another principal."),
        (409, "The session, task or run refused the request in its present state, or the id is taken."),
        (413, "The request body is longer than the gateway reads."),
        (422, "The request does not validate."),
        (503, "No worker or Temporal server answers."),
    )
}


def _version() -> str:
    try:
        return version("agentrt")
    except PackageNotFoundError:
        return "0"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``, with or without
    brackets), in any letter case."""
    host = host.lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def _loopback_host_header(value: str) -> bool:
    match = _HOST_HEADER.fullmatch(value)
    return match is not None and is_loopback(match.group(1))


def _loopback_origin(value: str) -> bool:
    """``value`` is ``http(s)://<loopback host>[:port]`` and nothing more."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https") and parts.hostname is not None and is_loopback(parts.hostname)
        and parts.username is None and parts.password is None and not (parts.path or parts.query or parts.fragment)
    )


class LocalCallersOnly:
    """ASGI middleware of a gateway without authentication (``--insecure-no-auth``): only
    programs on this host may drive it, never a web page in a browser on it.

    - ``Host`` must be a loopback name or address (``localhost``, ``127.0.0.0/8``, ``[::1]``, any
      port), else 400: a page whose DNS name an attacker re-points at 127.0.0.1 (DNS rebinding)
      sends its own name.
    - An ``Origin`` header must be a loopback origin (``http(s)://localhost:3000`` ...), else 403:
      a browser sends the page's origin with every cross-origin request and every POST, so a
      cross-site form or ``fetch`` (a "simple" request, which no preflight stops) is refused.
    - ``Sec-Fetch-Site: cross-site`` is 403 too (a browser's own word that another site sent it).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self._refusal(scope.get("headers", []))
            if problem is not None:
                await problem.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _refusal(headers: Iterable[tuple[bytes, bytes]]) -> Problem | None:
        named: dict[bytes, list[str]] = {b"host": [], b"origin": [], b"sec-fetch-site": []}
        for key, value in headers:
            if key.lower() in named:
                named[key.lower()].append(value.decode("latin-1"))
        hosts, origins, sites = named[b"host"], named[b"origin"], named[b"sec-fetch-site"]
        why = "this gateway serves without authentication"
        if len(hosts) != 1 or not _loopback_host_header(hosts[0]):
            return Problem(400, "bad-request", f"{why}: the Host header must name a loopback address")
        if not all(_loopback_origin(origin) for origin in origins):
            return Problem(403, "forbidden", f"{why}: it refuses requests of a web page that is not on a loopback origin")
        if any(site.strip().lower() == "cross-site" for site in sites):
            return Problem(403, "forbidden", f"{why}: it refuses cross-site requests")
        return None


class JsonBodies:
    """ASGI middleware: every request body is JSON. A body sent as a form or plain text (``curl
    -d`` without ``-H 'Content-Type: application/json'``) is read as JSON rather than refused.
    A browser sends such bodies cross-site without a preflight, and that gains nothing: with
    tokens, callers authenticate with a bearer header, which a page cannot attach cross-site
    without a preflight (and never a cookie); without authentication, ``LocalCallersOnly``
    refuses every request of a page that is not on a loopback origin."""

    LENIENT = (b"", b"application/x-www-form-urlencoded", b"text/plain")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-type"]
            given = [v for k, v in scope.get("headers", []) if k.lower() == b"content-type"]
            kind = given[0].split(b";")[0].strip().lower() if given else b""
            if kind in self.LENIENT:
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


def check_authentication(config: GatewayConfig, insecure_principal: str | None) -> None:
    """Raise ``ConfigurationError`` unless the gateway authenticates its callers: ``config`` has
    tokens, or (and then only) ``insecure_principal`` names who every caller is."""
    if not config.tokens and insecure_principal is None:
        raise ConfigurationError(
            "the gateway has no bearer tokens: add [[gateway.tokens]] (sha256, principal, scopes) to agentrt.toml or set "
            "AGENTRT_GATEWAY_TOKEN; to serve without authentication on a loopback address, give --insecure-no-auth"
        )
    if config.tokens and insecure_principal is not None:
        raise ConfigurationError("the gateway has bearer tokens configured; serving without authentication would ignore them")
    if insecure_principal is not None and not insecure_principal.strip():
        raise ConfigurationError("the principal of a gateway without authentication is empty")


def create_app(
    client: AgentClient,
    config: GatewayConfig,
    *,
    hub: StreamHub | None = None,
    webhooks: WebhookDispatcher | None = None,
    workspace_root: str | os.PathLike[str] | None = None,
    profiles: Iterable[str] | None = None,
    insecure_principal: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_streams_per_principal: int = MAX_STREAMS_PER_PRINCIPAL,
    max_streams: int = MAX_STREAMS,
) -> FastAPI:
    """The gateway's FastAPI app, acting through ``client`` (its principal is replaced per request
    by the bearer token's, ``AgentClient.with_principal``).

    - ``config``: the ``[gateway]`` section; its ``tokens`` are the only credentials accepted.
    - ``hub``: the ``StreamHub`` of ``GET /v1/sessions/{id}/stream`` (default: one on the client's
      store, closed with the app; without a store that route answers 503); ``webhooks``: a
      ``WebhookDispatcher`` told of every session, task and run created (``await
      webhooks.watch(kind, id, principal)``, kind ``session``, ``task`` or ``run``), started and
      stopped with the app.
    - ``workspace_root``: the directory every workspace and script path of a request must resolve
      under (default: the current directory); ``profiles``: the profile names a request may name
      (None: not checked here, the worker refuses an unknown one).
    - ``insecure_principal``: serve without authentication, every request acting as this
      principal with every scope (``agentrt serve --insecure-no-auth``); only without tokens.
      Then only loopback ``Host`` names are served and requests from a web page that is not on
      a loopback origin are refused (``LocalCallersOnly``).
    - ``max_body_bytes``: the longest request body read (bytes); longer ones get 413.
    - ``max_streams_per_principal``: the most ``/stream`` responses one principal holds open at
      once (default 16; one more is a 429 with ``Retry-After``); ``max_streams``: the most open
      in all (default 512; one more is a 503 with ``Retry-After``).

    Raises ``ConfigurationError`` when ``config`` has no token and no ``insecure_principal`` is
    given (a gateway without authentication is asked for by name, never a default), or both,
    or when a stream limit is under 1.
    """
    check_authentication(config, insecure_principal)
    if max_streams_per_principal < 1 or max_streams < 1:
        raise ConfigurationError("the gateway's stream limits (max_streams_per_principal, max_streams) must be at least 1")
    own_hub: StreamHub | None = None
    if hub is None and client.store is not None:
        hub = own_hub = StreamHub(client.store)
    gateway = Gateway(
        client=client, config=config, workspace_root=Path(os.path.realpath(workspace_root or os.getcwd())),
        profiles=frozenset(profiles) if profiles is not None else None, hub=hub, webhooks=webhooks,
        insecure_principal=insecure_principal, max_streams_per_principal=max_streams_per_principal, max_streams=max_streams,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if own_hub is not None:
                stack.push_async_callback(own_hub.aclose)
            if webhooks is not None:
                await webhooks.start()
                stack.push_async_callback(webhooks.stop)
            yield

    app = FastAPI(
        title="agentrt gateway", version=_version(), lifespan=lifespan, redirect_slashes=False,
        docs_url=None, redoc_url=None,  # served by install_docs, without a CDN
        description=(
            "Sessions, autonomous tasks and task graphs of a durable agent runtime on Temporal. "
            "Every /v1 and /apps route needs `Authorization: Bearer <token>`; errors are problem bodies "
            "(`type`, `title`, `status`, `detail`)."
        ),
    )
    app.state.gateway = gateway
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(JsonBodies)
    if insecure_principal is not None:
        app.add_middleware(LocalCallersOnly)  # added last: it runs first

    @app.get("/healthz", response_model=Health, tags=["health"], summary="Whether the gateway answers (no authentication)")
    async def healthz() -> Health:
        return Health()

    app.include_router(session_routes(), responses=ERROR_RESPONSES)
    app.include_router(agui_routes(), responses=ERROR_RESPONSES)
    app.include_router(task_routes(), responses=ERROR_RESPONSES)
    app.include_router(graph_routes("/v1/graphs"), responses=ERROR_RESPONSES)
    app.include_router(graph_routes("/v1/runs", "runs"), responses=ERROR_RESPONSES)  # an alias of /v1/graphs
    app.include_router(graph_routes("/apps/{app}/graphs"), responses=ERROR_RESPONSES)
    app.include_router(graph_routes("/apps/{app}/runs", "runs"), responses=ERROR_RESPONSES)  # an alias
    app.include_router(health_routes(), responses=ERROR_RESPONSES)
    app.include_router(audit_routes(), responses=ERROR_RESPONSES)
    app.include_router(pause_routes(), responses=ERROR_RESPONSES)
    app.include_router(mcp_routes(), responses=ERROR_RESPONSES)
    install_docs(app)
    return app
