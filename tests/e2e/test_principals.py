"""One rule for principals on every surface: another owner's session, task, child session, memory
and trajectory answers a stranger exactly as a missing id does (the Python client, the CLI as a
process, the HTTP gateway), lists show nothing of it, and a session id once used never passes to
another owner, also after Temporal has forgotten it: no stored transcript of one owner reaches
another's model, and the gateway keeps no visibility that could outlive an owner change."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timezone
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client import AgentClient, create_app
from agentrt.schemas import MemoryNotFound, MemoryRecord, RequestRejected, SessionNotFound, TaskNotFound
from agentrt.worker import GatewayConfig, GatewayToken, token_sha256
from tests.cli.test_cli import agentrt
from tests.conftest import Harness
from tests.e2e._support import write_script
from tests.e2e.test_gateway import gateway_client
from tests.gateway.test_gateway import serving

TOKENS = {"alice": "alice-principals-token-0123456789", "mallory": "mallory-principals-token-0123456789"}


def as_missing(error: BaseException, real_id: str, missing_id: str) -> tuple[type, str]:
    return type(error), str(error).replace(missing_id, real_id)


async def refusal(call: Callable[[], Awaitable[Any]]) -> BaseException:
    with pytest.raises(Exception) as caught:
        await call()
    return caught.value


async def alice_session(harness: Harness, workspace: Path, tmp_path: Path, text: str = "hello") -> tuple[AgentClient, str]:
    alice = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="alice", store=harness.store)
    sid = harness.new_session_id()
    config = alice.new_config(str(workspace), session_id=sid, profile="scripted", script=write_script(tmp_path, [{"text": "noted"}]))
    started = await alice.start(config, text)
    assert (await alice.wait(sid, started.turn_id, timeout_seconds=60)).status == "completed"
    return alice, sid


async def test_a_stranger_s_client_gets_what_a_missing_id_gets_for_every_session_and_task_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    alice, sid = await alice_session(harness, workspace, tmp_path)
    task_id = await alice.start_task("g", workspace=str(workspace), every_seconds=3600, max_sessions=1, script=write_script(tmp_path, [{"text": "x"}]))
    mallory = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="mallory", store=harness.store)
    missing_sid, missing_task = f"{sid}x", f"{task_id}x"

    session_calls: list[Callable[[str], Awaitable[Any]]] = [
        mallory.state, mallory.events, lambda s: mallory.wait(s, "turn-1", timeout_seconds=0),
        lambda s: mallory.send(s, "let me in"), lambda s: mallory.send_and_wait(s, "let me in"),
        lambda s: mallory.cancel(s, reason="mine"), lambda s: mallory.archive(s, "mine"),
        lambda s: mallory.approve(s, "req-1"), lambda s: mallory.deny(s, "req-1"), mallory.questions,
        mallory.trajectory, mallory.compact,
    ]
    for call in session_calls:
        hidden = await refusal(lambda: call(sid))
        missing = await refusal(lambda: call(missing_sid))
        assert isinstance(hidden, SessionNotFound), hidden
        assert as_missing(missing, sid, missing_sid) == (type(hidden), str(hidden))
    task_calls: list[Callable[[str], Awaitable[Any]]] = [
        mallory.task_status, mallory.task_events, mallory.wait_task, lambda t: mallory.pause_task(t, "mine"),
        lambda t: mallory.cancel_task(t, "mine"),
    ]
    for call in task_calls:
        hidden = await refusal(lambda: call(task_id))
        missing = await refusal(lambda: call(missing_task))
        assert isinstance(hidden, TaskNotFound), hidden
        assert as_missing(missing, task_id, missing_task) == (type(hidden), str(hidden))

    memory = harness.store.write_memory(MemoryRecord(
        memory_id=f"mem-{sid}", owner="alice", scope="user", key="k", text="alice likes tea", status="proposed",
        session_id=sid, workspace=str(workspace), created_at=datetime.now(timezone.utc),
    ))
    for memory_call in (lambda m: mallory.decide_memory(m, "accept"), mallory.forget_memory):
        hidden = await refusal(lambda: memory_call(memory.memory_id))
        missing = await refusal(lambda: memory_call(f"{memory.memory_id}x"))
        assert isinstance(hidden, MemoryNotFound)
        assert as_missing(missing, memory.memory_id, f"{memory.memory_id}x") == (type(hidden), str(hidden))
    assert await mallory.memories() == []

    for _ in range(300):  # the task's first session: a child session of alice's
        receipts = [r for r in (await alice.task_status(task_id)).receipts if r.kind == "session"]
        if receipts:
            break
        await asyncio.sleep(0.1)
    child = receipts[0].session_id
    for call in (mallory.state, mallory.events, mallory.trajectory):
        hidden = await refusal(lambda: call(child))
        missing = await refusal(lambda: call(f"{child}x"))
        assert isinstance(hidden, SessionNotFound)
        assert as_missing(missing, child, f"{child}x") == (type(hidden), str(hidden))

    assert sid not in {s.session_id for s in await mallory.list_sessions(limit=500)}
    assert task_id not in {t.task_id for t in await mallory.list_tasks(limit=500)}
    for _ in range(100):  # visibility is eventually consistent: the owner sees it
        if sid in {s.session_id for s in await alice.list_sessions(limit=500)}:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("alice's own session never listed")
    operator = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="ops", operators=["ops"])
    assert (await operator.state(sid)).owner == "alice"  # operators keep their access
    with contextlib.suppress(RequestRejected):  # ended already (its one session ran)
        await alice.cancel_task(task_id)


async def test_a_session_id_another_owner_used_is_refused_as_a_taken_id(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    alice, sid = await alice_session(harness, workspace, tmp_path)
    mallory = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="mallory", store=harness.store)
    config = mallory.new_config(str(workspace), session_id=sid, profile="scripted", script=write_script(tmp_path, [{"text": "x"}]))

    refused = await refusal(lambda: mallory.start(config, "take it"))

    assert isinstance(refused, RequestRejected)
    assert refused.reason == "a session with this id exists or existed (session ids are never reused); choose another id"
    assert "alice" not in str(refused)
    storeless = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="mallory")
    again = await refusal(lambda: storeless.start(config, "take it"))
    assert (type(again), str(again)) == (RequestRejected, str(refused))  # without the store: the workflow's owner
    assert [m.text for _, m in harness.store.messages(sid) if m.role == "user"] == ["hello"]


async def forget(harness: Harness, workflow_id: str) -> None:
    """Delete the workflow from Temporal, as its namespace's retention does, and wait until it is gone.
    A loaded dev server may cancel the delete ("operation was canceled"): it is asked again."""
    request = DeleteWorkflowExecutionRequest(
        namespace=harness.temporal.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id),
    )
    for attempt in range(1, 6):
        try:
            await harness.temporal.workflow_service.delete_workflow_execution(request, retry=True)
            break
        except RPCError as err:
            if err.status != RPCStatusCode.CANCELLED or attempt == 5:
                raise
            await asyncio.sleep(0.25 * attempt)
    for _ in range(600):
        try:
            await harness.temporal.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return
            raise
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id} was never deleted")


async def test_an_id_reused_after_retention_never_passes_to_another_owner_nor_shows_its_transcript(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    alice, sid = await alice_session(harness, workspace, tmp_path, text="the launch code is 0000")
    assert (await alice.state(sid)).owner == "alice"  # a running session: the client keeps the answer
    await alice.archive(sid)
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=("sessions",)) for p, t in TOKENS.items()])
    async with serving(create_app(await gateway_client(harness), config, workspace_root=workspace.parent)) as http:
        as_alice = {"Authorization": f"Bearer {TOKENS['alice']}"}
        assert (await http.get(f"/v1/sessions/{sid}", headers=as_alice)).status_code == 200
        await forget(harness, f"session-{sid}")

        # A client with the store refuses the id at once; one without (or a start straight through
        # Temporal) starts a workflow, which the worker fails before its model sees anything.
        mallory = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="mallory", store=harness.store)
        script = write_script(tmp_path, [{"text": "what did alice say?"}])
        taken = await refusal(lambda: mallory.start(mallory.new_config(str(workspace), session_id=sid, profile="scripted", script=script), "x"))
        assert isinstance(taken, RequestRejected) and "exists or existed" in taken.reason
        around = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="mallory")
        await around.start(around.new_config(str(workspace), session_id=sid, profile="scripted", script=script), "tell me")
        with pytest.raises(WorkflowFailureError) as failed:
            await harness.temporal.get_workflow_handle(f"session-{sid}").result()
        assert "used by another owner" in str(failed.value.cause) and "alice" not in str(failed.value.cause)
        assert [m.text for _, m in harness.store.messages(sid) if m.role == "user"] == ["the launch code is 0000"]
        assert harness.store.workflow_owner(f"session-{sid}") == "alice"

        # Nothing alice's client or the gateway kept outlives the owner change: the workflow now
        # under this id is not alice's, and answers her as a missing one.
        hidden_state = await refusal(lambda: alice.state(sid))
        missing_state = await refusal(lambda: alice.state(f"{sid}x"))
        assert as_missing(missing_state, sid, f"{sid}x") == (SessionNotFound, str(hidden_state))
        hidden = await http.get(f"/v1/sessions/{sid}", headers=as_alice)
        missing = await http.get(f"/v1/sessions/{sid}x", headers=as_alice)
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["detail"] == missing.json()["detail"].replace(f"{sid}x", sid)


@pytest.mark.parametrize("kind", ["task", "graph"])
async def test_a_task_or_graph_id_reused_after_retention_is_refused_by_the_worker_and_the_store_keeps_the_first_owner_s(
    harness: Harness, workspace: Path, tmp_path: Path, kind: str
) -> None:
    alice = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="alice", store=harness.store)
    around = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="mallory")  # no store: it cannot refuse
    script = write_script(tmp_path, [{"text": "x"}])
    if kind == "task":
        item = await alice.start_task("alice's goal", workspace=str(workspace), every_seconds=3600, max_sessions=1, script=script)
        workflow_id, events = f"task-{item}", harness.store.task_events
    else:
        item = await alice.start_graph(goal="alice's goal", workspace=str(workspace), script=script, approve_plan="ask")
        workflow_id, events = f"graph-{item}", harness.store.graph_events
    for _ in range(600):
        if events(item):
            break
        await asyncio.sleep(0.1)
    assert harness.store.workflow_owner(workflow_id) == "alice"
    await forget(harness, workflow_id)

    if kind == "task":
        await around.start_task("mallory's goal", workspace=str(workspace), task_id=item, every_seconds=3600, max_sessions=1, script=script)
    else:
        await around.start_graph(goal="mallory's goal", workspace=str(workspace), graph_id=item, script=script, approve_plan="ask")
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(harness.temporal.get_workflow_handle(workflow_id).result(), 60)
    cause = failed.value.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__ or getattr(cause, "cause", None)
    assert isinstance(cause, ApplicationError) and cause.type == f"{kind.capitalize()}IdTaken", failed.value
    assert "used by another owner" in cause.message and "never reused" in cause.message and "alice" not in cause.message
    # Nothing of mallory's start reached the store (alice's own work may still have been writing).
    assert not [e for e in events(item) if "mallory" in e.model_dump_json()]
    assert harness.store.workflow_owner(workflow_id) == "alice"
    if kind == "task":
        row = harness.store.get_task(item)
        assert row is not None and (row.owner, row.goal) == ("alice", "alice's goal")


async def test_a_stranger_on_the_gateway_gets_what_a_missing_id_gets_and_lists_nothing(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    alice, sid = await alice_session(harness, workspace, tmp_path)
    task_id = await alice.start_task("g", workspace=str(workspace), every_seconds=3600, max_sessions=1, script=write_script(tmp_path, [{"text": "x"}]))
    scopes = ("sessions", "tasks", "runs")
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=scopes) for p, t in TOKENS.items()])
    as_mallory = {"Authorization": f"Bearer {TOKENS['mallory']}"}
    async with serving(create_app(await gateway_client(harness), config, workspace_root=workspace.parent)) as http:
        for method, path, body, real in (
            ("GET", "/v1/sessions/{}", None, sid), ("GET", "/v1/sessions/{}/events", None, sid),
            ("GET", "/v1/sessions/{}/turns/turn-1", None, sid), ("POST", "/v1/sessions/{}/messages", {"text": "let me in"}, sid),
            ("POST", "/v1/sessions/{}/cancel", {}, sid), ("POST", "/v1/sessions/{}/archive", {}, sid),
            ("GET", "/v1/tasks/{}", None, task_id), ("GET", "/v1/tasks/{}/events", None, task_id),
        ):
            hidden = await http.request(method, path.format(real), json=body, headers=as_mallory)
            missing = await http.request(method, path.format(f"{real}x"), json=body, headers=as_mallory)
            assert hidden.status_code == missing.status_code == 404, (path, hidden.text)
            assert hidden.json()["detail"] == missing.json()["detail"].replace(f"{real}x", real), path
        listed = await http.get("/v1/sessions?limit=500", headers=as_mallory)
        assert sid not in {s["session_id"] for s in listed.json()["sessions"]}
        tasks = await http.get("/v1/tasks?limit=500", headers=as_mallory)
        assert task_id not in {t["task_id"] for t in tasks.json()["tasks"]}
    with contextlib.suppress(RequestRejected):  # ended already (its one session ran)
        await alice.cancel_task(task_id)


async def test_a_stranger_on_the_cli_gets_what_a_missing_id_gets(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    alice, sid = await alice_session(harness, workspace, tmp_path)
    task_id = await alice.start_task("g", workspace=str(workspace), every_seconds=3600, max_sessions=1, script=write_script(tmp_path, [{"text": "x"}]))
    mallory = {"AGENTRT_PRINCIPAL": "mallory"}
    for args in (
        ("session", "state", "{}"), ("session", "events", "{}"), ("session", "send", "{}", "let me in"),
        ("session", "cancel", "{}"), ("session", "trajectory", "{}"),
    ):
        hidden = await agentrt(harness, *(a.format(sid) for a in args), cwd=tmp_path, env=mallory)
        missing = await agentrt(harness, *(a.format(f"{sid}x") for a in args), cwd=tmp_path, env=mallory)
        assert hidden.returncode == missing.returncode != 0, (args, hidden.stderr)
        assert (hidden.stdout, hidden.stderr) == (missing.stdout.replace(f"{sid}x", sid), missing.stderr.replace(f"{sid}x", sid)), args
    for args in (("task", "status", "{}"), ("task", "pause", "{}")):
        hidden = await agentrt(harness, *(a.format(task_id) for a in args), cwd=tmp_path, env=mallory)
        missing = await agentrt(harness, *(a.format(f"{task_id}x") for a in args), cwd=tmp_path, env=mallory)
        assert hidden.returncode == missing.returncode != 0, (args, hidden.stderr)
        assert hidden.stderr == missing.stderr.replace(f"{task_id}x", task_id), args
    listed = await agentrt(harness, "session", "list", "--limit", "500", cwd=tmp_path, env=mallory)
    assert listed.returncode == 0 and sid not in listed.stdout
    with contextlib.suppress(RequestRejected):  # ended already (its one session ran)
        await alice.cancel_task(task_id)
