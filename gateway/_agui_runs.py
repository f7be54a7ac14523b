"""Agents over AG-UI: ``POST /v1/agents/{agent}/ag-ui`` takes a ``RunAgentInput`` and answers one
run as server-sent events, as a stock ``@ag-ui/client`` ``HttpAgent`` expects (docs/gateway.md,
"AG-UI front ends"). Scope ``sessions``; the token's principal owns the thread.

- ``threadId`` is the session id: the first run of a thread starts the session (its config from
  ``session_config_for``), a later one sends to it. A thread of another principal is not found (404);
  one whose session runs another agent (or app) than the path names is refused (409).
- ``runId`` is one turn: the message is sent with the idempotency key ``ag-ui:<runId>``, so the
  same runId posted again runs nothing new and answers the same turn's run again.
- Of ``messages`` only the last is sent, and it must be the user's: the session holds the history
  (its transcript is what the model reads); earlier messages the client shows are not compared
  with it, nor sent, whatever they say.
- ``tools`` (front-end tools), ``context``, ``state`` and ``forwardedProps`` (but its
  ``workspace`` and ``script`` on a thread's first run) are ignored.
- ``resume`` answers the interrupts of the run before (``_agui_interrupts``), each once, and continues that turn.

The response: ``RUN_STARTED`` (the client's threadId and runId), the turn's events as the ag-ui
encoding of the session's stream carries them, rewritten for the client's messages
(``RunTranscript``), then ``RUN_FINISHED`` (``outcome`` ``interrupt`` while the session waits for
a decision) or ``RUN_ERROR``; then the response ends. Problems found before the run (the
token, the thread, the body) are problem responses; the AG-UI contract's own (a run that
ignores pending interrupts, a resume that names none) are ``RUN_ERROR`` with a ``code``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextInputContent,
    ToolCallResultEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Path, Request
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.responses import Response
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.gateway._agui_interrupts import ResumeRefused, interrupt_for, resume_decision
from agentrt.gateway._agui_transcript import RunTranscript
from agentrt.gateway._auth import Caller, Gateway, caller_for, gateway_of
from agentrt.gateway._errors import Problem, problem_for
from agentrt.gateway._models import ID_PATTERN, MAX_NEW_ID_CHARS
from agentrt.schemas import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    PermissionRequested,
    RequestRejected,
    SessionConfig,
    SessionNotFound,
    ToolInvocationCompleted,
    TurnEnded,
    TurnStarted,
    session_workflow_id,
)
from agentrt.store import Store

__all__ = ["agui_routes", "session_config_for"]

log = logging.getLogger(__name__)

SessionsCaller = Annotated[Caller, Depends(caller_for("sessions"))]
KEY_PREFIX = "ag-ui:"
# Seconds between looks for a queued turn's first event (doubling up to the second).
TURN_POLL_SECONDS = (0.05, 1.0)
_THREAD = re.compile(ID_PATTERN)
_PERMISSION = "PermissionRequested"


async def session_config_for(
    agent: str, caller: Caller, gateway: Gateway, *, session_id: str, idempotency_key: str, props: dict[str, Any]
) -> SessionConfig:
    """The config of the session a thread's first run starts for agent ``agent``, owned by the caller.

    A name the gateway knows as a model profile is an app, as in ``/apps/{app}/graphs``: the
    session runs on that profile. Any other name is a named agent its workers registered
    (``Agent``, docs/agents.md): the session runs as that agent, and one no worker registered
    fails at its start (``AgentNotRegistered``, the run's ``RUN_ERROR``). ``props`` (the run's ``forwardedProps``)
    may name the ``workspace`` (a directory under the gateway's workspace root; default the root)
    and a scripted model's ``script`` (a file under it). Raises ``Problem`` 422 for a path outside,
    or a workspace another principal owns (``Gateway.workspace_for``).
    """
    workspace = props.get("workspace") or "."
    script = props.get("script")
    if not isinstance(workspace, str) or not isinstance(script, str | None):
        raise Problem(422, "invalid-request", "forwardedProps.workspace and forwardedProps.script are paths (strings)")
    is_app = gateway.profiles is not None and agent in gateway.profiles
    client = caller.client
    named: dict[str, Any] = {"profile": agent} if is_app else {"agent": agent}
    return client.new_config(
        await gateway.workspace_for(caller, workspace), session_id=session_id, **named,
        script=await gateway.script_for(caller, script) if script else None, idempotency_key=idempotency_key,
        operators=list(client.operators), tool_task_queue=client.tool_task_queue,
    )


def run_key(run_id: str) -> str:
    """The idempotency key of run ``run_id``: ``ag-ui:<runId>``, or for a runId that cannot be
    part of a key, ``ag-ui-sha256:<its SHA-256>``."""
    key = KEY_PREFIX + run_id
    if len(key) <= MAX_IDEMPOTENCY_KEY_CHARS and re.fullmatch(r"[A-Za-z0-9._:-]+", key):
        return key
    return "ag-ui-sha256:" + hashlib.sha256(run_id.encode()).hexdigest()


@dataclass
class _Run:
    """What a run streams: the turn ``turn_id`` from its first event (or, resuming, from after
    event ``after_seq``); or only the error ``error`` (code, message)."""

    session_id: str
    turn_id: str | None = None
    after_seq: int = 0
    error: tuple[str, str] | None = None


def agui_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/agents", tags=["ag-ui"])

    @router.post(
        "/{agent}/ag-ui", summary="Run an agent over AG-UI (one run as server-sent events)",
        responses={200: {"content": {"text/event-stream": {}}, "description": "The run's AG-UI events, then the end."}},
    )
    async def run_agent(
        request: Request,
        agent: Annotated[str, Path(max_length=MAX_NEW_ID_CHARS, pattern=ID_PATTERN, description="The agent (today: a profile).")],
        body: RunAgentInput,
        caller: SessionsCaller,
    ) -> Response:
        gateway = gateway_of(request)
        store = caller.client.store
        if gateway.hub is None or store is None:
            raise Problem(503, "unavailable", "AG-UI runs need the gateway's store (this gateway has none)")
        thread = body.thread_id
        if len(thread) > MAX_NEW_ID_CHARS or not _THREAD.fullmatch(thread):
            raise Problem(422, "invalid-request", f"threadId must be 1 to {MAX_NEW_ID_CHARS} characters of A-Z a-z 0-9 _ . - "
                          "(it names the session)")
        close = gateway.open_stream(caller.principal)
        try:
            run = await _begin(agent, body, caller, gateway, store)
            events = _run_events(run, body, caller, gateway, store)
            return EventSourceResponse(
                _frames(events), ping=15, sep="\n", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                background=BackgroundTask(close),
            )
        except BaseException:
            close()
            raise

    return router


async def _begin(agent: str, body: RunAgentInput, caller: Caller, gateway: Gateway, store: Store) -> _Run:
    """Start the run's turn (or give the resume's decisions); what it then streams."""
    thread, key = body.thread_id, run_key(body.run_id)
    exists = await _thread_exists(gateway, caller, thread)
    client = caller.client
    if exists:
        await asyncio.to_thread(_check_agent, store, thread, agent, gateway)
    if body.resume:
        if not exists:
            raise problem_for(SessionNotFound(thread))  # as another principal's thread answers
        return await _resume(body, caller, gateway, store)
    text = _new_message(body)
    if not exists:
        config = await session_config_for(agent, caller, gateway, session_id=thread, idempotency_key=key, props=_props(body))
        started = await gateway.in_time(client.start(config, text, idempotency_key=key))
        await gateway.watch("session", thread, caller.principal)
        return _Run(thread, started.turn_id)
    pending = (await client.state(thread)).pending_approvals
    if pending:
        ids = ", ".join(r.request_id for r in pending)
        return _Run(thread, error=("interrupt_pending", f"the thread waits for answers to its interrupts ({ids}): send them in resume"))
    sent = await gateway.in_time(client.send(thread, text, idempotency_key=key))
    gateway.wake_stream(thread)
    return _Run(thread, sent.turn_id)


def _check_agent(store: Store, thread: str, agent: str, gateway: Gateway) -> None:
    """Raise ``Problem`` 409 when the thread's session runs another agent (or app) than ``agent``:
    a thread is one session, of the agent its first run named, and a run of another agent's
    path would otherwise be answered by that session's agent, its instructions and tools."""
    config = store.session_config(thread)
    if config is None:  # not stored yet: the session is starting
        return
    is_app = gateway.profiles is not None and agent in gateway.profiles
    runs = config.agent if config.agent is not None else f"app {config.profile}"
    if is_app:
        other = config.agent is not None or (config.profile is not None and config.profile != agent)
    else:
        other = config.agent != agent
    if other:
        raise Problem(409, "request-rejected", f"thread {thread!r} is a session of {runs!r}, not of {agent!r}; "
                      "post it to that agent's path, or start another thread")


async def _resume(body: RunAgentInput, caller: Caller, gateway: Gateway, store: Store) -> _Run:
    """Give each resume entry's decision to its pending request; the run continues that turn
    from after the last of their ``PermissionRequested``. An entry for a request decided
    already (this resume posted again) is passed over."""
    thread = body.thread_id
    pending = {r.request_id: r for r in (await caller.client.state(thread)).pending_approvals}
    entries = body.resume or []
    named = {e.interrupt_id for e in entries}
    if len(named) < len(entries):  # checked before any is given: a second answer would fail after the first took effect
        twice = sorted({e.interrupt_id for e in entries if [x.interrupt_id for x in entries].count(e.interrupt_id) > 1})
        return _Run(thread, error=("duplicate_interrupt", f"resume answers {', '.join(twice)} more than once; answer each interrupt once"))
    if missing := sorted(set(pending) - named):
        return _Run(thread, error=("resume_incomplete", f"resume answers no open interrupt {', '.join(missing)}"))
    turns = {r.turn_id for r in pending.values()}
    asked = await asyncio.to_thread(_requests, store, thread, named, turns)
    if unknown := sorted(named - set(asked)):
        return _Run(thread, error=("unknown_interrupt", f"the thread has no interrupt {', '.join(unknown)}"))
    try:  # every payload read before any decision is given: a bad last entry leaves the first undecided
        decisions = [resume_decision(caller.client, thread, pending[e.interrupt_id], e) for e in entries if e.interrupt_id in pending]
    except ResumeRefused as err:
        return _Run(thread, error=(err.code, str(err)))
    for decision in decisions:
        try:
            await gateway.in_time(decision())
        except RequestRejected as err:
            return _Run(thread, error=("resume_rejected", err.reason))
    gateway.wake_stream(thread)
    last = max((asked[i] for i in named), key=lambda e: e.seq)
    return _Run(thread, last.turn_id, after_seq=last.seq)


def _requests(store: Store, session_id: str, ids: set[str], turns: set[str]) -> dict[str, PermissionRequested]:
    """The ``PermissionRequested`` events of the session that ask ``ids`` (by request id): those
    of ``turns`` first (the pending requests' turns), the whole session's for any not found there."""
    found: dict[str, PermissionRequested] = {}
    for turn in sorted(turns):
        for event in store.turn_events(session_id, turn):
            if isinstance(event, PermissionRequested) and event.request.request_id in ids:
                found[event.request.request_id] = event
    since = 0
    while len(found) < len(ids):
        page = store.events(session_id, since, 1000)
        if not page:
            break
        for event in page:
            if isinstance(event, PermissionRequested) and event.request.request_id in ids:
                found[event.request.request_id] = event
        since = page[-1].seq
    return found


async def _thread_exists(gateway: Gateway, caller: Caller, thread: str) -> bool:
    """True for a session the caller may see, False when there is none; 404 for another's."""
    workflow_id = session_workflow_id(thread)
    try:
        await gateway.ensure_visible(caller, workflow_id, SessionNotFound(thread))
        return True
    except Problem as problem:
        if problem.status != 404:
            raise
        try:
            await gateway.client.temporal.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        raise


def _new_message(body: RunAgentInput) -> str:
    """The text of the run's new message: the last of ``messages``, a user message (422 otherwise)."""
    last = body.messages[-1] if body.messages else None
    if last is None or last.role != "user":
        raise Problem(422, "invalid-request", "the last of messages must be the new user message (or send resume)")
    content = last.content
    if isinstance(content, str):
        text = content
    else:
        if not all(isinstance(part, TextInputContent) for part in content):
            raise Problem(422, "invalid-request", "a user message's content may hold text parts only")
        text = "".join(part.text for part in content if isinstance(part, TextInputContent))
    if not text.strip():
        raise Problem(422, "invalid-request", "the new user message is empty")
    return text


def _props(body: RunAgentInput) -> dict[str, Any]:
    props = body.forwarded_props
    return props if isinstance(props, dict) else {}


# ---------------------------------------------------------------- the run's events


async def _frames(events: AsyncIterator[BaseEvent]) -> AsyncIterator[bytes]:
    encoder = EventEncoder()
    async for event in events:
        yield encoder.encode(event).encode()


async def _run_events(run: _Run, body: RunAgentInput, caller: Caller, gateway: Gateway, store: Store) -> AsyncIterator[BaseEvent]:
    thread, run_id = body.thread_id, body.run_id
    yield RunStartedEvent(thread_id=thread, run_id=run_id)
    if run.error is not None:
        yield RunErrorEvent(code=run.error[0], message=run.error[1])
        return
    assert run.turn_id is not None and gateway.hub is not None
    try:
        try:
            after = run.after_seq or await _turn_start(store, thread, run.turn_id, caller)
        except _SessionEnded as ended:
            yield RunErrorEvent(code="session_ended", message=str(ended))
            return
        if after < 0:  # the turn ended without starting (cancelled in the queue)
            yield RunFinishedEvent(thread_id=thread, run_id=run_id, outcome=RunFinishedCancelledOutcome())
            return
        transcript = RunTranscript(list(body.messages))
        items = await gateway.hub.subscribe(thread, str(after) if after else None, "ag-ui")
        try:
            async for item in items:
                event = item.agui_event
                if event is None or _entry_seq(item.id) <= after:
                    continue
                if event.type == EventType.RUN_STARTED:
                    continue
                if event.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
                    yield event.model_copy(update={"run_id": run_id, "thread_id": thread}) if event.type == EventType.RUN_FINISHED else event
                    return
                if isinstance(event, ToolCallResultEvent):
                    event = await _whole_result(store, thread, _entry_seq(item.id), event)
                elif event.type == EventType.CUSTOM and getattr(event, "name", None) == _PERMISSION:
                    interrupts = [interrupt_for(r) for r in (await caller.client.state(thread)).pending_approvals if r.turn_id == run.turn_id]
                    if interrupts:
                        yield RunFinishedEvent(thread_id=thread, run_id=run_id, outcome=RunFinishedInterruptOutcome(interrupts=interrupts))
                        return
                for out in transcript.rewrite(event):
                    yield out
        finally:
            await items.aclose()
        yield RunErrorEvent(code="session_ended", message="the session ended before the turn did")
    except Exception as err:  # noqa: BLE001 - the client gets a RUN_ERROR; the details are logged
        log.warning("AG-UI run %s of thread %s failed: %s", run_id, thread, err, exc_info=True)
        yield RunErrorEvent(code="internal", message="the gateway could not follow the run; post the same runId again")


def _entry_seq(item_id: str) -> int:
    """The event seq of a stream item's entry (a delta's: its model call's event)."""
    return int(item_id.split(":", 1)[0].split(".", 1)[0])


class _SessionEnded(Exception):
    """The session ended before the run's turn started (e.g. it failed at its start: an agent or
    tool no worker registered); the message says why."""


async def _turn_start(store: Store, session_id: str, turn_id: str, caller: Caller) -> int:
    """The seq of the event before turn ``turn_id``'s first (0 for none), once the turn has one;
    -1 when the turn ended without starting. Raises ``_SessionEnded`` when the session's workflow
    closed first."""
    wait, most = TURN_POLL_SECONDS
    handle = caller.client.temporal.get_workflow_handle(f"session-{session_id}")
    while True:
        events = await asyncio.to_thread(store.turn_events, session_id, turn_id)
        if any(isinstance(e, TurnStarted) for e in events):
            return next(e.seq for e in events if isinstance(e, TurnStarted)) - 1
        if any(isinstance(e, TurnEnded) for e in events):
            return -1
        # The handle names no run: after a continue-as-new it describes the new run, still running.
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            try:
                await handle.result(follow_runs=False)
            except WorkflowFailureError as err:
                raise _SessionEnded(str(err.cause or err)) from None
            except Exception:  # noqa: BLE001 - cancelled, terminated, timed out: said below
                pass
            raise _SessionEnded("the session ended before the turn started")
        await asyncio.sleep(wait)
        wait = min(wait * 2, most)


async def _whole_result(store: Store, session_id: str, seq: int, event: ToolCallResultEvent) -> ToolCallResultEvent:
    """``event`` with the whole result of the tool call (the transcript's tool message), not the
    preview of ``ToolInvocationCompleted`` (event ``seq``); a failure's content stays."""
    text = await asyncio.to_thread(_result_text, store, session_id, seq)
    return event if text is None else event.model_copy(update={"content": text})


def _result_text(store: Store, session_id: str, seq: int) -> str | None:
    [event] = store.events(session_id, seq - 1, 1) or [None]
    if not isinstance(event, ToolInvocationCompleted):
        return None
    found = store.messages_in(session_id, [(event.position, event.position + 1)])
    return found[0][1].text if found else None

