"""The gateway's session routes (``/v1/sessions``, scope ``sessions``): create a session with its
first message, send, read state, wait for a turn, read and stream events, decide approvals,
reconciles and questions, cancel, pause, resume, rename and archive, each as the token's principal."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client import Patience, visibility_literal
from agentrt.gateway._auth import Caller, Gateway, caller_for, gateway_of, idempotency_key, path_id
from agentrt.gateway._errors import Problem, ProblemBody
from agentrt.gateway._models import (
    MAX_NAME_CHARS,
    MAX_WAIT_SECONDS,
    AnswerRequest,
    ApprovalDecisionRequest,
    ArchiveRequest,
    CancelRequest,
    ControlRequest,
    DecisionAccepted,
    MessageCreate,
    MessageQueued,
    ReconcileRequest,
    RenameRequest,
    SessionCreate,
    SessionCreated,
    SessionList,
    SessionSummary,
)
from agentrt.gateway._stream import stream_response
from agentrt.schemas import (
    SESSION_OWNER,
    EventsPage,
    RequestRejected,
    SessionNotFound,
    SessionStateView,
    TurnOutcome,
    session_workflow_id,
)

__all__ = ["session_routes"]

SessionsCaller = Annotated[Caller, Depends(caller_for("sessions"))]
SessionId = Annotated[str, Path(description="A session id (letters, digits, `_`, `.`, `-`).")]
RequestId = Annotated[str, Path(max_length=MAX_NAME_CHARS, description="A pending request's id (`req-1` ...).")]
Key = Annotated[dict[str, str], Depends(idempotency_key)]
# How the session words its refusal to wait for a turn it never had (``wait_turn``).
UNKNOWN_TURN = "unknown turn "


async def visible_session(request: Request, caller: Caller, session_id: str) -> tuple[Gateway, str]:
    """The gateway and ``session_id`` once the caller may see that session (404 otherwise)."""
    gateway = gateway_of(request)
    path_id(session_id, "session")
    await gateway.ensure_visible(caller, session_workflow_id(session_id), SessionNotFound(session_id))
    return gateway, session_id


def session_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

    @router.get("", response_model=SessionList, summary="List the caller's sessions")
    async def list_sessions(
        caller: SessionsCaller,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        include_archived: bool = False,
    ) -> SessionList:
        rows = await caller.client.list_sessions(
            f"{SESSION_OWNER.name} = {visibility_literal(caller.principal)}", limit, include_archived=include_archived
        )
        return SessionList(sessions=[
            SessionSummary(
                session_id=r.session_id, status=r.status, owner=r.owner, started_at=r.started_at, closed=r.closed, title=r.title
            )
            for r in rows
        ])

    @router.post("", status_code=201, response_model=SessionCreated, summary="Start a session with its first message")
    async def create_session(request: Request, body: SessionCreate, caller: SessionsCaller, key: Key) -> SessionCreated:
        gateway = gateway_of(request)
        caller.check_sandbox(body.sandbox, body.network)
        workspace = await gateway.workspace_for(caller, body.workspace)
        script = await gateway.script_for(caller, body.script) if body.script else None
        profile = body.profile or ("scripted" if script else caller.client.default_profile)
        if body.profile is not None or script is None:
            gateway.check_profile(profile)
        if body.session_id is not None and not key:  # with a key, a repeat of this create answers the first
            await _refuse_taken(gateway, body.session_id)
        client = caller.client
        config = client.new_config(
            workspace, session_id=body.session_id, profile=profile, script=script, **key,
            system_prompt=body.system_prompt, system_prompt_mode=body.system_prompt_mode, tools=body.tools,
            approval=body.approval, approval_timeout_seconds=body.approval_timeout_seconds,
            max_rounds_per_turn=body.max_rounds_per_turn, compact_threshold=body.compact_threshold,
            title=body.title, sandbox=body.sandbox,
            network=body.network, budget=body.budget, operators=list(client.operators),
            tool_task_queue=client.tool_task_queue, output=body.output,
            agent=body.agent,
        )
        started = await gateway.in_time(client.start(config, body.text, idempotency_key=key.get("idempotency_key")))
        await gateway.watch("session", started.session_id, caller.principal)
        return SessionCreated(session_id=started.session_id, turn_id=started.turn_id, workflow_id=started.workflow_id)

    @router.get(
        "/{session_id}", response_model=SessionStateView, summary="Read a session's state",
        description="Its status, turns, approvals, usage and context; `waits` lists its running calls that wait for "
        "the store or are being retried (read from its workflow's description).",
    )
    async def get_session(request: Request, session_id: SessionId, caller: SessionsCaller) -> Any:
        await visible_session(request, caller, session_id)
        return await caller.client.state(session_id, waits=True)

    @router.post("/{session_id}/messages", status_code=202, response_model=MessageQueued, summary="Send a message")
    async def send_message(
        request: Request, session_id: SessionId, body: MessageCreate, caller: SessionsCaller, key: Key
    ) -> MessageQueued:
        gateway, _ = await visible_session(request, caller, session_id)
        sent = await gateway.in_time(
            caller.client.send(
                session_id, body.text, output=body.output, idempotency_key=key.get("idempotency_key"), if_idle=body.if_idle
            )
        )
        gateway.wake_stream(session_id)
        return MessageQueued(session_id=session_id, turn_id=sent.turn_id, queued_behind=sent.queued_behind)

    @router.get("/{session_id}/turns/{turn_id}", response_model=TurnOutcome, summary="Read (or wait for) a turn's outcome")
    async def get_turn(
        request: Request,
        session_id: SessionId,
        turn_id: Annotated[str, Path(max_length=MAX_NAME_CHARS)],
        caller: SessionsCaller,
        wait: Annotated[float, Query(ge=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False, description="Seconds to wait for the turn to end.")] = 0,
    ) -> Any:
        # Within ``wait``, a server that does not answer (restarting) is asked again; past it, 503.
        patience = Patience(session_id, f"turn {turn_id}", wait)
        address = caller.client.temporal.service_client.config.target_host
        await patience.retried(lambda: visible_session(request, caller, session_id), address)
        left = patience.remaining() or 0.0
        try:
            return await caller.client.wait(session_id, turn_id, timeout_seconds=max(0.0, left))
        except RequestRejected as err:
            if err.reason.startswith(UNKNOWN_TURN):
                raise Problem(404, "not-found", f"session {session_id} has no turn {turn_id!r}") from err
            raise

    @router.get("/{session_id}/events", response_model=EventsPage, summary="Read a session's events")
    async def get_events(
        request: Request,
        session_id: SessionId,
        caller: SessionsCaller,
        since_seq: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
    ) -> Any:
        await visible_session(request, caller, session_id)
        return await caller.client.events(session_id, since_seq, limit)

    @router.get(
        "/{session_id}/stream", summary="Stream a session's events and token deltas (server-sent events)",
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "One SSE event per item; its id resumes after it (Last-Event-ID)."},
            204: {"description": "The session ended before the position resumed after: nothing more will come."},
            400: {"model": ProblemBody, "description": "Last-Event-ID names no item of the stream."},
            429: {"model": ProblemBody, "description": "The principal holds its most streams open already (`Retry-After`)."},
            503: {"model": ProblemBody, "description": "The gateway holds its most streams open, or has no store (`Retry-After`)."},
        },
    )
    async def stream_events(
        request: Request,
        session_id: SessionId,
        caller: SessionsCaller,
        encoding: Literal["native", "ag-ui"] = "native",
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=MAX_NAME_CHARS)] = None,
    ) -> Response:
        gateway, _ = await visible_session(request, caller, session_id)
        if gateway.hub is None:
            raise Problem(503, "unavailable", "streaming needs the gateway's store (this gateway has none)")
        close = gateway.open_stream(caller.principal)
        try:
            return await stream_response(gateway.hub, session_id, last_event_id, encoding, on_close=close)
        except BaseException:
            close()
            raise

    @router.post("/{session_id}/cancel", status_code=202, response_model=SessionStateView, summary="Cancel a turn")
    async def cancel(request: Request, session_id: SessionId, caller: SessionsCaller, body: CancelRequest | None = None) -> Any:
        gateway, _ = await visible_session(request, caller, session_id)
        body = body or CancelRequest()
        await gateway.in_time(caller.client.cancel(session_id, body.turn_id, body.reason, include_queued=body.include_queued))
        gateway.wake_stream(session_id)
        return await caller.client.state(session_id)

    @router.post("/{session_id}/archive", response_model=SessionStateView, summary="Archive (end) a session")
    async def archive(request: Request, session_id: SessionId, caller: SessionsCaller, body: ArchiveRequest | None = None) -> Any:
        gateway, _ = await visible_session(request, caller, session_id)
        state = await gateway.in_time(caller.client.archive(session_id, (body or ArchiveRequest()).reason))
        gateway.wake_stream(session_id)
        return state

    @router.post(
        "/{session_id}/pause", response_model=SessionStateView,
        summary="Pause a session: no model or tool call starts until it is resumed (messages queue)",
    )
    async def pause(request: Request, session_id: SessionId, caller: SessionsCaller, body: ControlRequest | None = None) -> Any:
        gateway, _ = await visible_session(request, caller, session_id)
        state = await gateway.in_time(caller.client.sessions.pause(session_id, (body or ControlRequest()).reason))
        gateway.wake_stream(session_id)
        return state

    @router.post("/{session_id}/rename", response_model=SessionStateView, summary="Give a session another title (null clears it)")
    async def rename(request: Request, session_id: SessionId, body: RenameRequest, caller: SessionsCaller) -> Any:
        gateway, _ = await visible_session(request, caller, session_id)
        state = await gateway.in_time(caller.client.sessions.rename(session_id, body.title, body.reason))
        gateway.wake_stream(session_id)
        return state

    @router.post("/{session_id}/resume", response_model=SessionStateView, summary="Resume a paused session where it stopped")
    async def resume(request: Request, session_id: SessionId, caller: SessionsCaller, body: ControlRequest | None = None) -> Any:
        gateway, _ = await visible_session(request, caller, session_id)
        state = await gateway.in_time(caller.client.sessions.resume(session_id, (body or ControlRequest()).reason))
        gateway.wake_stream(session_id)
        return state

    @router.post(
        "/{session_id}/approvals/{request_id}", status_code=202, response_model=DecisionAccepted,
        summary="Approve, deny or edit a pending tool call",
    )
    async def decide(
        request: Request, session_id: SessionId, request_id: RequestId, body: ApprovalDecisionRequest, caller: SessionsCaller
    ) -> DecisionAccepted:
        gateway, _ = await visible_session(request, caller, session_id)
        if body.decision == "deny":
            await gateway.in_time(caller.client.deny(session_id, request_id, body.reason))
        else:
            await gateway.in_time(caller.client.approve(
                session_id, request_id, body.reason, for_session=body.for_session, arguments=body.arguments
            ))
        gateway.wake_stream(session_id)
        return DecisionAccepted(session_id=session_id, request_id=request_id, decision=body.decision)

    @router.post(
        "/{session_id}/approvals/{request_id}/reconcile", status_code=202, response_model=DecisionAccepted,
        summary="Say whether an effect of unknown outcome was applied",
    )
    async def reconcile(
        request: Request, session_id: SessionId, request_id: RequestId, body: ReconcileRequest, caller: SessionsCaller
    ) -> DecisionAccepted:
        gateway, _ = await visible_session(request, caller, session_id)
        await gateway.in_time(caller.client.reconcile(session_id, request_id, body.outcome, body.note))
        gateway.wake_stream(session_id)
        return DecisionAccepted(session_id=session_id, request_id=request_id, decision=body.outcome)

    @router.post(
        "/{session_id}/answers/{request_id}", status_code=202, response_model=DecisionAccepted,
        summary="Answer what an MCP server asked",
    )
    async def answer(
        request: Request, session_id: SessionId, request_id: RequestId, body: AnswerRequest, caller: SessionsCaller
    ) -> DecisionAccepted:
        gateway, _ = await visible_session(request, caller, session_id)
        await gateway.in_time(caller.client.answer(session_id, request_id, body.content, action=body.action, reason=body.reason))
        gateway.wake_stream(session_id)
        return DecisionAccepted(session_id=session_id, request_id=request_id, decision=body.action)

    return router


async def _refuse_taken(gateway: Gateway, session_id: str) -> None:
    """409 when a session with this id exists (whoever owns it): a create never sends to a running session."""
    try:
        await gateway.client.temporal.get_workflow_handle(session_workflow_id(session_id)).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return
        raise
    raise Problem(409, "request-rejected", f"a session with id {session_id!r} exists; choose another id")

