"""Pause and resume, the operator's kill switch, end to end on the dev server and a real worker: a
paused session starts no model call (a loopback provider counts them) and no tool call, queues
what it is sent and goes on where it stopped; a paused graph starts no node and pauses the sessions
it runs; an owner's work is paused and resumed at once; a stranger changes nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.client import WorkflowUpdateFailedError

from agentrt.client import AgentClient
from agentrt.schemas import (
    SESSION_STATUS,
    GraphConfig,
    GraphControlInput,
    GraphSnapshot,
    GraphSpec,
    ModelProfile,
    ModelRequestStarted,
    PauseInput,
    PauseNotAllowed,
    PermissionGranted,
    PermissionRequested,
    RequestRejected,
    SessionNotFound,
    SessionPaused,
    SessionResumed,
    SessionStateView,
    SetPausedInput,
    TaskGraphPaused,
    TaskGraphResumed,
    ToolInvocationStarted,
    TurnStarted,
    session_workflow_id,
)
from agentrt.client import create_app
from agentrt.worker import GatewayConfig, GatewayToken, token_sha256
from agentrt.workflows.session import SessionWorkflow
from tests.activities.providers._loopback import LoopbackServer, Reply
from tests.conftest import OWNER, RECORDED_HISTORIES, Harness
from tests.e2e._graphs import PASS, GraphRig, answer, write_graph_script
from tests.e2e._support import session_config, wait_for_event, write_script
from tests.e2e.conftest import KEY_ENV
from tests.e2e.test_memory_recall import RECORDED_TEXT
from tests.gateway.test_gateway import assert_problem, serving

T = TypeVar("T")
WRITE_NOTES = {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "paused and resumed"}}]}


async def state_until(client: AgentClient, session_id: str, holds: Callable[[SessionStateView], bool], timeout: float = 60) -> SessionStateView:
    async def poll() -> SessionStateView:
        while True:
            state = await client.state(session_id)
            if holds(state):
                return state
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), timeout)


async def shown_status(harness: Harness, workflow_id: str) -> str | None:
    description = await harness.temporal.get_workflow_handle(workflow_id).describe()
    return description.typed_search_attributes.get(SESSION_STATUS)


async def test_a_paused_session_starts_no_model_call_for_a_queued_message_until_resumed_then_the_turn_completes_once(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = ModelProfile(name="loopback-pause", provider="openai", model="gpt-4o-mini", base_url=provider_server.url, api_key_env=KEY_ENV)
    harness.config.profiles[profile.name] = profile
    provider_server.reply(*[Reply(chunks=[RECORDED_TEXT.read_bytes()]) for _ in range(2)])
    client = harness.client
    config = client.new_config(str(workspace), session_id=harness.new_session_id(), profile=profile.name)
    session_id = config.session_id
    first = await client.start(config, "first")
    assert (await client.wait(session_id, first.turn_id, timeout_seconds=60)).status == "completed"
    assert len(provider_server.requests) == 1

    paused = await client.sessions.pause(session_id, reason="incident 42")
    assert paused.status == "paused" and paused.paused is not None
    assert (paused.paused.principal, paused.paused.reason) == (OWNER, "incident 42")
    again = await client.sessions.pause(session_id, reason="twice")  # no error, nothing changes
    assert again.paused == paused.paused
    sent = await client.send(session_id, "second")
    held = await state_until(client, session_id, lambda s: s.active_turn_id == sent.turn_id)
    assert held.status == "paused"
    assert (await client.wait(session_id, sent.turn_id, timeout_seconds=0.5)).status == "pending"
    events = (await client.events(session_id)).events
    assert not [e for e in events if isinstance(e, (TurnStarted, ModelRequestStarted)) and e.turn_id == sent.turn_id]
    assert len(provider_server.requests) == 1  # no model call while paused
    assert await shown_status(harness, session_workflow_id(session_id)) == "paused"
    assert [e.type for e in harness.store.events(session_id, 0, 1000) if e.type == "SessionPaused"] == ["SessionPaused"]

    resumed = await client.sessions.resume(session_id, reason="fixed")
    assert resumed.paused is None and resumed.status != "paused"
    outcome = await client.wait(session_id, sent.turn_id, timeout_seconds=60)

    assert outcome.status == "completed", outcome.error
    assert len(provider_server.requests) == 2  # the held turn ran once
    events = (await client.events(session_id)).events
    assert len([e for e in events if isinstance(e, TurnStarted) and e.turn_id == sent.turn_id]) == 1
    [pause] = [e for e in events if isinstance(e, SessionPaused)]
    [resume] = [e for e in events if isinstance(e, SessionResumed)]
    assert (pause.principal, pause.reason, resume.principal, resume.reason) == (OWNER, "incident 42", OWNER, "fixed")
    assert resume.paused_seconds > 0
    assert await shown_status(harness, session_workflow_id(session_id)) == "idle"


async def test_a_pause_during_an_approval_wait_takes_the_decision_and_holds_the_call_until_resumed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = harness.client
    script = write_script(tmp_path, [WRITE_NOTES, {"text": "notes written"}])
    config = session_config(client, harness.new_session_id(), workspace, script)
    session_id = config.session_id
    started = await client.start(config, "write the notes")
    request = await wait_for_event(client, session_id, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(request, PermissionRequested)

    paused = await client.sessions.pause(session_id)
    assert paused.status == "paused" and [r.request_id for r in paused.pending_approvals] == [request.request.request_id]
    await client.approve(session_id, request.request.request_id)
    state = await state_until(client, session_id, lambda s: not s.pending_approvals)

    assert state.status == "paused" and state.active_turn_id == started.turn_id
    events = (await client.events(session_id)).events
    assert [e for e in events if isinstance(e, PermissionGranted)]
    assert not [e for e in events if isinstance(e, ToolInvocationStarted)]
    assert not (workspace / "notes.md").exists()  # granted, but no tool call starts while paused

    await client.sessions.resume(session_id)
    outcome = await client.wait(session_id, started.turn_id, timeout_seconds=60)
    assert outcome.status == "completed" and outcome.answer == "notes written"
    assert (workspace / "notes.md").read_text() == "paused and resumed"
    events = (await client.events(session_id)).events
    assert len([e for e in events if isinstance(e, ToolInvocationStarted)]) == 1


async def test_a_stranger_can_neither_pause_nor_resume_a_session_and_an_operator_needs_a_reason(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = harness.client
    script = write_script(tmp_path, [{"text": "hello"}])
    config = session_config(client, harness.new_session_id(), workspace, script, operators=["ops"])
    session_id = config.session_id
    started = await client.start(config, "hi")
    await client.wait(session_id, started.turn_id, timeout_seconds=60)
    handle = harness.handle(session_id)
    stranger = harness.as_principal("mallory")

    with pytest.raises(SessionNotFound):
        await stranger.sessions.pause(session_id, reason="mine now")
    with pytest.raises(WorkflowUpdateFailedError) as refused:  # past the client, straight to Temporal
        await handle.execute_update(SessionWorkflow.pause, PauseInput(principal="mallory", reason="mine now"))
    assert "not its owner" in str(refused.value.cause)
    await handle.signal(SessionWorkflow.set_paused, SetPausedInput(paused=True, principal="mallory"))
    state = await state_until(client, session_id, lambda s: s.strangers_ignored == 1)
    assert (state.status, state.paused) == ("idle", None)

    operator = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="ops", operators=["ops"])
    with pytest.raises(RequestRejected, match="must give a reason"):
        await operator.sessions.pause(session_id)
    paused = await operator.sessions.pause(session_id, reason="incident 7")
    assert paused.status == "paused" and paused.paused is not None and paused.paused.principal == "ops"
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(SessionWorkflow.resume, PauseInput(principal="mallory"))
    assert (await client.state(session_id)).status == "paused"
    assert [e.type for e in (await client.events(session_id)).events].count("SessionPaused") == 1
    await client.sessions.resume(session_id)
    await client.archive(session_id)


async def test_a_paused_graph_pauses_its_running_session_and_starts_nothing_until_resumed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    listing = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}], "delay_seconds": 1.5}
    script = write_graph_script(tmp_path, {
        "a": [{"turns": [listing, answer("listed")], "review": PASS}],
        "b": [{"turns": [answer("b done")], "review": PASS}],
    })
    graph = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "list"}, {"id": "b", "prompt": "then b", "depends_on": ["a"]}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=graph, approve_plan="auto", tools=["fs.list"]))
    [child] = await _until(lambda: rig.session_ids(graph_id), lambda ids: len(ids) == 1)
    await wait_for_event(harness.client, child, lambda e: isinstance(e, ModelRequestStarted))

    view = await rig.handle(graph_id).execute_update(
        "pause", GraphControlInput(principal=OWNER, reason="hold on"), result_type=GraphSnapshot
    )
    assert view.status == "paused" and view.paused is not None and view.paused.reason == "hold on"
    # The child's call in flight finishes; the tool call it asked for waits.
    await wait_for_event(harness.client, child, lambda e: e.type == "AssistantMessageCompleted")
    held = await harness.client.state(child)
    assert held.status == "paused" and held.paused is not None and held.paused.principal == OWNER
    assert not [e for e in (await harness.client.events(child)).events if isinstance(e, ToolInvocationStarted)]
    assert await shown_status(harness, f"graph-{graph_id}") == "paused"
    assert await shown_status(harness, session_workflow_id(child)) == "paused"

    await rig.handle(graph_id).execute_update("resume", GraphControlInput(principal=OWNER, reason="go"), result_type=GraphSnapshot)
    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "completed" and result.nodes == {"a": "completed", "b": "completed"}
    types = [e.type for e in await rig.events(graph_id)]
    assert types.count("TaskGraphPaused") == 1 and types.count("TaskGraphResumed") == 1
    assert types.index("TaskGraphResumed") < types.index("AgentTaskCompleted")
    child_events = (await harness.client.events(child)).events
    assert [e.type for e in child_events if isinstance(e, (SessionPaused, SessionResumed))] == ["SessionPaused", "SessionResumed"]


async def test_an_owner_s_sessions_and_graphs_pause_and_resume_at_once_and_a_stranger_may_not(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    owner = f"owner-{uuid.uuid4().hex[:8]}"  # of its own: the dev server holds other tests' work too
    client = harness.as_principal(owner)
    script = write_script(tmp_path, [{"text": "hello"}, {"text": "after the resume"}])
    sessions = []
    for _ in range(2):
        config = session_config(client, harness.new_session_id(), workspace, script)
        started = await client.start(config, "hi")
        await client.wait(config.session_id, started.turn_id, timeout_seconds=60)
        sessions.append(config.session_id)
    rig = GraphRig(harness.temporal, harness.task_queue)
    graph_script = write_graph_script(tmp_path, {"a": [{"turns": [answer("a done")], "review": PASS}]})
    graph_id = await rig.start(GraphConfig(
        graph_id=f"g{uuid.uuid4().hex[:10]}", owner=owner, workspace=str(workspace), profile="scripted", script=graph_script,
        graph=GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "a"}]}),
    ))
    await rig.wait_until(graph_id, lambda v: v.status == "pending_approval")

    with pytest.raises(PauseNotAllowed, match="neither that owner nor an operator"):
        await harness.as_principal("mallory").pause_owner(owner)
    with pytest.raises(PauseNotAllowed, match="must give a reason"):
        await AgentClient(harness.temporal, task_queue=harness.task_queue, principal="ops", operators=["ops"]).pause_owner(owner)
    report = await client.pause_owner(owner, reason="kill switch")

    assert {(i.kind, i.id): i.outcome for i in report.items} == {("session", sessions[0]): "paused", ("session", sessions[1]): "paused", ("graph", graph_id): "paused"}
    for session_id in sessions:
        assert (await client.state(session_id)).status == "paused"
    await rig.approve(graph_id, principal=owner)  # approved while paused: no node starts
    view = await rig.wait_until(graph_id, lambda v: v.approved_by is not None)
    assert view.status == "paused" and view.running == 0 and [n.status for n in view.nodes] == ["pending"]
    assert await shown_status(harness, f"graph-{graph_id}") == "paused"
    again = await client.pause_owner(owner, reason="kill switch")
    assert len(again.items) == 3 and {i.outcome for i in again.items} <= {"already", "paused"}  # "already" once listed so
    sent = await client.send(sessions[0], "again")

    await _until(lambda: _paused_listed(client, sessions), bool)
    resumed = await client.resume_owner(owner, reason="all clear")

    assert {(i.kind, i.id) for i in resumed.items if i.outcome == "resumed"} == {("session", s) for s in sessions} | {("graph", graph_id)}
    assert (await client.wait(sessions[0], sent.turn_id, timeout_seconds=60)).answer == "after the resume"
    assert (await rig.wait(graph_id)).status == "completed"
    assert [e.type for e in await rig.events(graph_id)].count("TaskGraphPaused") == 1
    assert [e.type for e in (await client.events(sessions[0])).events].count("SessionPaused") == 1
    RECORDED_HISTORIES.extend(await rig.workflow_handles())


async def _paused_listed(client: AgentClient, sessions: list[str]) -> bool:
    rows = await client.list_sessions(limit=500)
    return all(any(r.session_id == s and r.status == "paused" for r in rows) for s in sessions)


async def _until(read: Callable[[], Awaitable[T]], holds: Callable[[T], Any], timeout: float = 60) -> T:
    async def poll() -> T:
        while True:
            value = await read()
            if holds(value):
                return value
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), timeout)


async def test_over_http_a_session_pauses_and_resumes_and_an_operator_pauses_an_owner_s_work(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    tokens = {"alice": ("alice-pause-token-0123456789", ("sessions", "tasks", "runs")),
              "mallory": ("mallory-pause-token-0123456789", ("sessions", "tasks", "runs")),
              "ops": ("ops-pause-token-0123456789", ("admin", "sessions"))}
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=s) for p, (t, s) in tokens.items()])
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="gateway", store=harness.store, operators=["ops"])
    # The gateway answers 503 to a session start while the server lists no worker polling its queue.
    for _ in range(300):
        if await client.has_worker():
            break
        await asyncio.sleep(0.05)

    def auth(principal: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[principal][0]}"}

    script = write_script(tmp_path, [WRITE_NOTES, {"text": "notes written"}])
    async with serving(create_app(client, config, workspace_root=workspace.parent)) as http:
        created = await http.post("/v1/sessions", json={"text": "notes", "workspace": workspace.name, "script": script}, headers=auth("alice"))
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        harness.session_ids.append(sid)
        request = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
        assert isinstance(request, PermissionRequested)

        paused = await http.post(f"/v1/sessions/{sid}/pause", json={"reason": "look first"}, headers=auth("alice"))
        assert paused.status_code == 200 and paused.json()["status"] == "paused", paused.text
        assert paused.json()["paused"]["reason"] == "look first"
        assert_problem(await http.post(f"/v1/sessions/{sid}/resume", headers=auth("mallory")), 404)
        approved = await http.post(f"/v1/sessions/{sid}/approvals/{request.request.request_id}", json={"decision": "approve"}, headers=auth("alice"))
        assert approved.status_code == 202, approved.text
        await state_until(harness.client, sid, lambda s: not s.pending_approvals)
        assert not (workspace / "notes.md").exists()

        assert_problem(await http.post("/v1/pause", json={"owner": OWNER, "reason": "x"}, headers=auth("alice")), 403)  # no admin scope
        no_reason = assert_problem(await http.post("/v1/pause", json={"owner": OWNER}, headers=auth("ops")), 403)
        assert "must give a reason" in no_reason["detail"]
        report = await http.post("/v1/resume", json={"owner": OWNER, "reason": "incident over"}, headers=auth("ops"))
        assert report.status_code == 200, report.text
        assert {"kind": "session", "id": sid, "outcome": "resumed"} in report.json()["items"]
        outcome = await harness.client.wait(sid, created.json()["turn_id"], timeout_seconds=60)

    assert outcome.status == "completed" and (workspace / "notes.md").exists()
    [resume] = [e for e in (await harness.client.events(sid)).events if isinstance(e, SessionResumed)]
    assert (resume.principal, resume.reason) == ("ops", "incident over")
