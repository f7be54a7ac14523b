"""The HTTP gateway's errors: every failure an HTTP caller can meet becomes a status and a JSON
problem body (RFC 9457: ``type``, ``title``, ``status``, ``detail``), never a stack trace; request
bodies are bounded before any route reads them.

    status  type                                  from
    400     urn:agentrt:problem:bad-request       a malformed header (Idempotency-Key, Content-Length,
                                                  a Last-Event-ID naming no item: InvalidStreamCursor);
                                                  without authentication, a Host that is not loopback
    401     urn:agentrt:problem:unauthenticated   no bearer token, or one the gateway does not know
    403     urn:agentrt:problem:forbidden         the token's scopes do not cover the route; without
                                                  authentication, a request of a page not on a loopback origin;
                                                  PauseNotAllowed (an owner-wide pause by a stranger)
    404     urn:agentrt:problem:not-found         SessionNotFound, TaskNotFound, GraphNotFound, TurnNotFound, McpServerNotFound,
                                                  an unknown turn, an id that cannot name anything, another
                                                  principal's work
    409     urn:agentrt:problem:request-rejected  RequestRejected (the session, task or run refused), an id taken,
                                                  McpServerExists
    409     urn:agentrt:problem:session-busy      SessionBusy: a send-only-if-idle message while the session is
                                                  busy (``busy``, ``turn_id``); nothing was queued
    413     urn:agentrt:problem:body-too-large    a body of more than ``MAX_BODY_BYTES``
    422     urn:agentrt:problem:invalid-request   a body or query that does not validate, ConfigurationError,
                                                  a model built from the request that does not validate
    422     urn:agentrt:problem:invalid-graph     InvalidGraph (``problems`` lists each)
    429     urn:agentrt:problem:too-many-streams  a stream past the principal's limit of open streams
    429     urn:agentrt:problem:quota-exceeded    QuotaExceeded: the tenant is at a quota (``quota``, ``limit``,
                                                  ``used``, ``resets_at``; Retry-After until a daily reset)
    503     urn:agentrt:problem:stuck             SessionStuck: the workflow task keeps failing (GET /v1/health/stuck)
    503     urn:agentrt:problem:unavailable       WorkerUnavailable, ServerUnavailable, Temporal errors,
                                                  PayloadStorageMismatch and PayloadCodecMismatch (details
                                                  logged, not sent), a stream
                                                  past the gateway's limit of open streams; the store does
                                                  not answer (``unreachable_reason``; Retry-After) or its
                                                  SQLite file changed under the gateway (StoreFileChanged)
    500     urn:agentrt:problem:internal          anything else (logged with its traceback)
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from agentrt.schemas import (
    AgentrtError,
    ClientError,
    ConfigurationError,
    GraphNotFound,
    InvalidGraph,
    InvalidStreamCursor,
    McpServerExists,
    McpServerNotFound,
    MemoryAlreadyDecided,
    MemoryNotFound,
    PauseNotAllowed,
    PayloadStorageMismatch,
    QuotaExceeded,
    RequestRejected,
    ServerUnavailable,
    SessionBusy,
    SessionNotFound,
    SessionStuck,
    StoreFileChanged,
    TaskNotFound,
    TurnNotFound,
    WorkerUnavailable,
)
from agentrt.store import error_chain, unreachable_reason
from agentrt.worker import PayloadCodecMismatch

__all__ = ["MAX_BODY_BYTES", "BodyLimit", "Problem", "ProblemBody", "install_error_handlers", "problem_for"]

log = logging.getLogger("agentrt.gateway")

# The largest request body the gateway reads (bytes); a longer one is answered 413 unread.
MAX_BODY_BYTES = 1024 * 1024
PROBLEM_TYPE = "urn:agentrt:problem:"
PROBLEM_MEDIA_TYPE = "application/problem+json"
# Characters of a caller's input echoed back in a validation problem (a location, a message).
ECHO_CHARS = 200

TITLES = {
    400: "Bad request", 401: "Unauthenticated", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
    409: "Request rejected", 413: "Request body too large", 415: "Unsupported media type",
    422: "Invalid request", 429: "Too many requests", 500: "Internal error", 503: "Unavailable",
}


class ProblemBody(BaseModel):
    """An error's JSON body (RFC 9457): ``type`` a URN naming the kind of problem, ``title`` its
    short name, ``status`` the HTTP status, ``detail`` what happened to this request. Invalid
    requests add ``errors`` (where and what), invalid graphs ``problems``, a busy session ``busy``
    (``turn``, ``compaction``, ``model_switch`` or ``queued``) and ``turn_id`` (the running turn)."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
    problems: list[str] | None = None
    busy: str | None = None
    turn_id: str | None = None


class Problem(Exception):
    """An HTTP error the gateway answers with a problem body; ``kind`` is the last part of its type."""

    def __init__(
        self, status: int, kind: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra

    def response(self) -> JSONResponse:
        body = ProblemBody(
            type=PROBLEM_TYPE + self.kind, title=TITLES.get(self.status, "Error"), status=self.status,
            detail=self.detail, **self.extra,
        )
        return JSONResponse(
            body.model_dump(exclude_none=True), status_code=self.status, headers=self.headers, media_type=PROBLEM_MEDIA_TYPE
        )


def problem_for(err: Exception) -> Problem:
    """The problem an agentrt error (or a Temporal RPC failure) is for an HTTP caller (see the
    module's table). Details of server-side trouble are logged, not sent."""
    if isinstance(err, (SessionNotFound, TaskNotFound, GraphNotFound, TurnNotFound, MemoryNotFound, McpServerNotFound)):
        return Problem(404, "not-found", str(err))
    if isinstance(err, PauseNotAllowed):
        return Problem(403, "forbidden", str(err))
    if isinstance(err, InvalidStreamCursor):
        return Problem(400, "bad-request", str(err))
    if isinstance(err, InvalidGraph):
        return Problem(422, "invalid-graph", str(err), problems=list(err.problems))
    if isinstance(err, SessionBusy):
        return Problem(409, "session-busy", str(err), busy=err.busy, turn_id=err.turn_id)
    if isinstance(err, (RequestRejected, MemoryAlreadyDecided, McpServerExists)):
        return Problem(409, "request-rejected", str(err))
    if isinstance(err, QuotaExceeded):
        return _quota_problem(err)
    if isinstance(err, WorkerUnavailable):
        return Problem(503, "unavailable", str(err), headers={"Retry-After": "5"})
    if isinstance(err, SessionStuck):
        log.error("gateway: %s", err)
        return Problem(
            503, "stuck", f"session {err.session_id} is stuck: its workflow task keeps failing "
            "(an operator sees why: GET /v1/health/stuck, agentrt doctor)", headers={"Retry-After": "60"},
        )
    if isinstance(err, PayloadStorageMismatch):
        log.error("gateway: %s", err)
        return Problem(503, "unavailable", "the gateway's payload storage is not its workers'; an operator must fix it")
    if isinstance(err, PayloadCodecMismatch):
        log.error("gateway: %s", err)
        return Problem(503, "unavailable", "the gateway's payload codec keys are not its workers'; an operator must fix it")
    if isinstance(err, ServerUnavailable):
        log.error("gateway: %s", err)
        return Problem(503, "unavailable", "the Temporal server does not answer", headers={"Retry-After": "5"})
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return Problem(503, "unavailable", "no worker answered the request in time", headers={"Retry-After": "5"})
    if isinstance(err, RPCError):
        log.error("gateway: Temporal answered %s: %s", err.status.name, err.message)
        return Problem(503, "unavailable", f"the Temporal server answered {err.status.name}", headers={"Retry-After": "5"})
    store = _store_unreachable(err)
    if store is not None:
        log.warning("gateway: the store does not answer: %s", store)
        return Problem(503, "unavailable", "the store does not answer; try again", headers={"Retry-After": "5"})
    if isinstance(err, StoreFileChanged):
        log.error("gateway: %s", err)
        return Problem(503, "unavailable", "the gateway's store file changed under it; an operator must restart it")
    if isinstance(err, ValidationError):  # a model built from what the caller sent
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5])
        return Problem(422, "invalid-request", _cut(where or "invalid"))
    if isinstance(err, (ConfigurationError, ClientError)):
        return Problem(422, "invalid-request", str(err))
    if isinstance(err, AgentrtError):
        log.error("gateway: %s: %s", type(err).__name__, err)
        return Problem(500, "internal", f"the request failed ({type(err).__name__})")
    log.error("gateway: unexpected %s", type(err).__name__, exc_info=err)
    return Problem(500, "internal", "the request failed; the gateway's log has the cause")


def _store_unreachable(err: BaseException) -> str | None:
    """Why the store does not answer, when ``err`` or an exception in its chain says so."""
    return next((reason for cause in error_chain(err) if (reason := unreachable_reason(cause)) is not None), None)


def _cut(value: object) -> str:
    text = str(value)
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "…"


def _validation_problem(err: RequestValidationError) -> Problem:
    """A 422 listing where and what, never the rejected input itself (it may be huge or hostile)."""
    errors = [
        {"loc": [_cut(part) for part in problem.get("loc", ())], "msg": _cut(problem.get("msg", "")), "type": _cut(problem.get("type", ""))}
        for problem in err.errors()[:20]
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid"}
    where = ".".join(str(p) for p in first["loc"])
    return Problem(422, "invalid-request", f"{where}: {first['msg']}" if where else str(first["msg"]), errors=errors)


def _quota_problem(err: QuotaExceeded) -> Problem:
    """429 for a tenant at a quota; a daily quota's answer says in Retry-After when it resets."""
    headers = {}
    if err.resets_at is not None:
        seconds = int((err.resets_at - datetime.now(UTC)).total_seconds()) + 1
        headers["Retry-After"] = str(max(seconds, 1))
    return Problem(429, "quota-exceeded", str(err), headers=headers)


def install_error_handlers(app: Any) -> None:
    """Answer every error with a problem body: ``Problem``, validation, routing (404, 405),
    agentrt errors, Temporal RPC failures, and anything else as a bare 500."""

    async def on_problem(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, Problem)
        return err.response()

    async def on_validation(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, RequestValidationError)
        return _validation_problem(err).response()

    async def on_http(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, StarletteHTTPException)
        kind = {404: "not-found", 413: "body-too-large", 405: "method-not-allowed"}.get(err.status_code, "bad-request")
        detail = err.detail if isinstance(err.detail, str) else TITLES.get(err.status_code, "error")
        return Problem(err.status_code, kind, _cut(detail), headers=dict(err.headers or {})).response()

    async def on_error(request: Request, err: Exception) -> JSONResponse:
        return problem_for(err).response()

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(AgentrtError, on_error)
    app.add_exception_handler(RPCError, on_error)
    app.add_exception_handler(WorkflowUpdateRPCTimeoutOrCancelledError, on_error)
    app.add_exception_handler(ValidationError, on_error)
    app.add_exception_handler(Exception, on_error)


class BodyLimit:
    """ASGI middleware: a request whose body is longer than ``max_bytes`` gets 413 (a declared
    Content-Length at once, before the body is read; a streamed body as soon as it passes the
    bound), and a Content-Length that is not a number gets 400."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = [v for k, v in scope.get("headers", []) if k.lower() == b"content-length"]
        if declared:
            value = declared[0].decode("latin-1").strip()
            if not value.isdigit() or len(declared) > 1:
                await _send(send, Problem(400, "bad-request", "Content-Length is not one number of bytes"))
                return
            if int(value) > self.max_bytes:
                await _send(send, self._too_large())
                return
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise StarletteHTTPException(413, self._too_large().detail)
            return message

        await self.app(scope, bounded, send)

    def _too_large(self) -> Problem:
        return Problem(413, "body-too-large", f"the request body is longer than {self.max_bytes:,} bytes")


async def _send(send: Send, problem: Problem) -> None:
    body = json.dumps(
        ProblemBody(type=PROBLEM_TYPE + problem.kind, title=TITLES[problem.status], status=problem.status, detail=problem.detail)
        .model_dump(exclude_none=True)
    ).encode()
    await send({
        "type": "http.response.start", "status": problem.status,
        "headers": [(b"content-type", PROBLEM_MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close")],
    })
    await send({"type": "http.response.body", "body": body})
