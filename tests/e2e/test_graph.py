"""Task graphs end to end: plan, approval with a capability token, a DAG of child sessions under
``max_parallel``, reviews that retry a node, a failure that blocks only its dependants, cancel, a
worker killed mid-graph, against the real dev server, worker and scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from agentrt.schemas import (
    AgentTaskStarted,
    GraphControlInput,
    GraphSnapshot,
    GraphSpec,
    ModelRequestStarted,
    TaskPlanApproved,
)
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._graphs import PASS, GraphRig, answer, fail, most_running, write_graph_script
from tests.e2e._support import kill_hard, worker_process


@pytest.fixture
def rig(harness: Harness) -> GraphRig:
    return GraphRig(harness.temporal, harness.task_queue)


def write(path: str, content: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "fs.write", "arguments": {"path": path, "content": content}}]}


def diamond() -> GraphSpec:
    """a -> (b, c) -> d; e after b; f after c. Six nodes, two branches below a."""
    return GraphSpec.model_validate(
        {
            "max_parallel": 2,
            "nodes": [
                {"id": "a", "prompt": "lay the foundation"},
                {"id": "b", "prompt": "build the left side", "depends_on": ["a"], "acceptance": "the left side stands"},
                {"id": "c", "prompt": "build the right side", "depends_on": ["a"]},
                {"id": "d", "prompt": "join both sides", "depends_on": ["b", "c"]},
                {"id": "e", "prompt": "paint the left side", "depends_on": ["b"]},
                {"id": "f", "prompt": "paint the right side", "depends_on": ["c"]},
            ],
        }
    )


async def test_a_diamond_runs_at_most_max_parallel_nodes_retries_a_failed_review_and_blocks_only_a_failed_nodes_dependants(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_graph_script(tmp_path, {
        "a": [{"turns": [answer("foundation laid")]}],
        "b": [
            {"turns": [answer("left side half built", 1.0)], "review": fail("the left side is only half built")},
            {"turns": [answer("left side built", 1.0)], "review": PASS},
        ],
        "c": [
            {"turns": [answer("right side wobbles", 1.0)], "review": fail("the right side wobbles")},
            {"turns": [answer("right side still wobbles")], "review": fail("still wobbles")},
        ],
        "e": [{"turns": [answer("left side painted", 0.5)]}],
    })
    graph_id = await rig.start(rig.config(workspace, script, graph=diamond(), approve_plan="auto", tools=["fs.read"]))
    result = await rig.wait(graph_id)
    events = await rig.events(graph_id)
    view = await rig.snapshot(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "failed" and result.failure_reason == "node_failed"
    assert result.nodes == {"a": "completed", "b": "completed", "c": "failed", "d": "blocked", "e": "completed", "f": "blocked"}
    assert most_running(events) == 2  # b and c ran side by side, never a third
    retried = [(e.node_id, e.attempt) for e in events if e.type == "TaskRetried"]
    assert sorted(retried) == [("b", 2), ("c", 2)]
    assert sorted((e.node_id, e.blocked_by) for e in events if e.type == "TaskBlocked") == [("d", "c"), ("f", "c")]
    final_failures = [e for e in events if e.type == "AgentTaskFailed" and e.final]
    assert [e.node_id for e in final_failures] == ["c"] and "still wobbles" in final_failures[0].error
    started = [e for e in events if isinstance(e, AgentTaskStarted)]
    assert sorted((e.node_id, e.attempt) for e in started) == [("a", 1), ("b", 1), ("b", 2), ("c", 1), ("c", 2), ("e", 1)]
    # The retry's prompt carried the reviewer's findings.
    retry_session = next(e.session_id for e in started if (e.node_id, e.attempt) == ("b", 2))
    prompt = next(m.text for _, m in harness.store.messages(retry_session) if m.role == "user")
    assert "the left side is only half built" in prompt and "left side" in prompt
    nodes = {n.id: n for n in view.nodes}
    assert nodes["b"].attempts == 2 and nodes["b"].answer == "left side built"
    assert view.spend.usage.input_tokens == sum(n.spend.usage.input_tokens for n in view.nodes) > 0
    for session_id in [e.session_id for e in started]:
        described = await rig.temporal.get_workflow_handle(f"session-{session_id}").describe()
        assert described.status == WorkflowExecutionStatus.COMPLETED


async def test_an_approved_plan_freezes_each_nodes_grants_and_a_call_outside_them_is_refused(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    plan = {"graph": {"nodes": [
        {"id": "survey", "prompt": "list what is there", "tools": ["fs.read", "fs.list"]},
        {"id": "write", "prompt": "write the notes", "depends_on": ["survey"], "tools": ["fs.write"]},
    ]}}
    script = write_graph_script(tmp_path, {
        "survey": [{"turns": [write("sneaky.txt", "outside the token"), answer("README.md only")]}],
        "write": [{"turns": [write("notes.md", "notes"), answer("wrote notes.md")]}],
    }, plan=[plan])
    graph_id = await rig.start(rig.config(workspace, script, goal="write notes about the project", tools=["fs.read", "fs.list", "fs.write"]))
    pending = await rig.wait_until(graph_id, lambda v: v.status == "pending_approval")
    assert pending.risk_level == "medium" and any("fs.write" in r for r in pending.risk_reasons)
    assert [n.id for n in pending.nodes] == ["survey", "write"] and pending.token_id is None
    stranger = rig.approve(graph_id, principal="mallory")
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await stranger
    assert "may not approve" in str(refused.value.cause)

    approved = await rig.approve(graph_id, reason="looks right")
    assert approved.status in ("approved", "executing") and approved.approved_by == "alice" and approved.token_id
    with pytest.raises((WorkflowUpdateFailedError, RPCError)):  # decided already (or, if it is that quick, ended)
        await rig.approve(graph_id)
    result = await rig.wait(graph_id)
    events = await rig.events(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "completed"
    token = next(e.token for e in events if isinstance(e, TaskPlanApproved))
    assert {k: g.tools for k, g in token.grants.items()} == {"survey": ["fs.list", "fs.read"], "write": ["fs.write"]}
    assert not (workspace / "sneaky.txt").exists()
    assert (workspace / "notes.md").read_text() == "notes"
    survey_session = next(e.session_id for e in events if isinstance(e, AgentTaskStarted) and e.node_id == "survey")
    refused_calls = [e for e in harness.store.events(survey_session) if e.type == "ToolInvocationFailed"]
    assert refused_calls and "not granted" in refused_calls[0].error


async def test_concurrent_approvals_mint_one_token(rig: GraphRig, workspace: Path, tmp_path: Path) -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "only", "prompt": "say hello"}]})
    script = write_graph_script(tmp_path, {"only": [{"turns": [answer("hello")]}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, operators=["ops"]))
    await rig.wait_until(graph_id, lambda v: v.status == "pending_approval")
    outcomes = await asyncio.gather(
        *[rig.approve(graph_id) for _ in range(4)], rig.approve(graph_id, principal="ops", reason="on call"),
        return_exceptions=True,
    )
    result = await rig.wait(graph_id)
    events = await rig.events(graph_id)

    assert sum(1 for o in outcomes if not isinstance(o, BaseException)) == 1
    assert all(isinstance(o, WorkflowUpdateFailedError) for o in outcomes if isinstance(o, BaseException))
    assert len([e for e in events if e.type == "TaskPlanApproved"]) == 1
    assert result.status == "completed" and len([e for e in events if e.type == "AgentTaskStarted"]) == 1


async def test_cancelling_a_graph_mid_run_leaves_no_child_session_running(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"max_parallel": 2, "nodes": [
        {"id": "slow1", "prompt": "take your time"}, {"id": "slow2", "prompt": "take your time too"},
        {"id": "later", "prompt": "after both", "depends_on": ["slow1", "slow2"]},
    ]})
    script = write_graph_script(tmp_path, {
        "slow1": [{"turns": [answer("too late", 120)]}], "slow2": [{"turns": [answer("too late", 120)]}],
    })
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto"))
    await rig.wait_until(graph_id, lambda v: v.running == 2)
    sessions = await rig.session_ids(graph_id)
    for session_id in sessions:
        await _wait_model_call(harness, session_id)
    view = await rig.handle(graph_id).execute_update(
        "cancel", GraphControlInput(principal="alice", reason="changed my mind"), result_type=GraphSnapshot
    )
    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert view.status == "cancelled" and result.status == "cancelled"
    assert result.nodes == {"slow1": "cancelled", "slow2": "cancelled", "later": "cancelled"}
    for session_id in sessions:
        described = await rig.temporal.get_workflow_handle(f"session-{session_id}").describe()
        assert described.status == WorkflowExecutionStatus.CANCELED
    events = await rig.events(graph_id)
    assert events[-1].type == "TaskCancelled" and events[-1].principal == "alice"
    assert len(sessions) == 2


async def _wait_model_call(harness: Harness, session_id: str, timeout: float = 60.0) -> None:
    async def poll() -> None:
        while not any(isinstance(e, ModelRequestStarted) for e in await asyncio.to_thread(harness.store.events, session_id)):
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), timeout)


async def test_a_worker_killed_mid_graph_is_replaced_and_each_node_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue + "-proc")
    spec = GraphSpec.model_validate({"nodes": [
        {"id": "first", "prompt": "step one"}, {"id": "second", "prompt": "step two", "depends_on": ["first"]},
    ]})
    script = write_graph_script(tmp_path, {
        "first": [{"turns": [answer("one done", 4.0)]}], "second": [{"turns": [answer("two done")]}],
    })
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto"))
        await rig.wait_until(graph_id, lambda v: v.running == 1)
        session_id = (await rig.session_ids(graph_id))[0]
        await _wait_model_call(harness, session_id)
        await asyncio.sleep(1.0)  # the slow model call is in flight
        kill_hard(first)
    with worker_process(harness, log):
        result = await rig.wait(graph_id)
        events = await rig.events(graph_id)
        RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "completed" and result.answer == "two done"
    assert [(e.node_id, e.attempt) for e in events if isinstance(e, AgentTaskStarted)] == [("first", 1), ("second", 1)]
    answers = [m.text for _, m in harness.store.messages(session_id) if m.role == "assistant"]
    assert answers == ["one done"]


async def test_a_planner_answering_in_plain_text_completes_the_graph_with_that_answer(
    rig: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_graph_script(tmp_path, {}, plan=[{"text": "The answer is 42; nothing to split up."}])
    graph_id = await rig.start(rig.config(workspace, script, goal="what is six times seven?"))
    result = await rig.wait(graph_id)
    events = await rig.events(graph_id)

    assert result.status == "completed" and result.answer == "The answer is 42; nothing to split up."
    assert [e.type for e in events if e.type != "TaskGraphStatusChanged"] == ["TaskGraphCreated", "TaskDecomposed", "TaskGraphCompleted"]


async def test_a_cyclic_plan_fails_the_graph_as_an_invalid_plan_before_anything_runs(
    rig: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    plan = {"graph": {"nodes": [
        {"id": "x", "prompt": "x", "depends_on": ["y"]}, {"id": "y", "prompt": "y", "depends_on": ["x"]},
    ]}}
    script = write_graph_script(tmp_path, {}, plan=[plan])
    graph_id = await rig.start(rig.config(workspace, script, goal="go in circles"))
    result = await rig.wait(graph_id)

    assert result.status == "failed" and result.failure_reason == "invalid_plan"
    assert "cycle" in (result.failure or "")
    assert await rig.session_ids(graph_id) == []


async def test_a_high_risk_plan_waits_for_a_person_even_when_approval_is_automatic(
    rig: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "fetch", "prompt": "fetch the page"}]})
    script = write_graph_script(tmp_path, {"fetch": [{"turns": [answer("fetched")]}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto", network=True, tools=["fs.read"]))
    view = await rig.wait_until(graph_id, lambda v: v.status == "pending_approval")
    assert view.risk_level == "high" and any("network" in r for r in view.risk_reasons)
    await rig.approve(graph_id, approve=False, reason="no network today")
    result = await rig.wait(graph_id)
    assert result.status == "rejected" and await rig.session_ids(graph_id) == []


async def test_under_fail_fast_a_node_failing_for_good_cancels_the_running_ones_and_starts_nothing_more(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"max_parallel": 2, "nodes": [
        {"id": "quick", "prompt": "fail quickly"}, {"id": "slow", "prompt": "take long"},
        {"id": "after", "prompt": "never", "depends_on": ["slow"]},
    ]})
    script = write_graph_script(tmp_path, {
        "quick": [{"turns": [answer("broken", 1.0)], "review": fail("it is broken")}],
        "slow": [{"turns": [answer("too late", 120)]}],
    })
    config = rig.config(workspace, script, graph=spec, approve_plan="auto", failure_policy="fail_fast", max_retries=0)
    graph_id = await rig.start(config)
    result = await rig.wait(graph_id)
    sessions = await rig.session_ids(graph_id)

    assert result.status == "failed" and result.nodes == {"quick": "failed", "slow": "cancelled", "after": "cancelled"}
    assert len(sessions) == 2
    for session_id in sessions:
        described = await rig.temporal.get_workflow_handle(f"session-{session_id}").describe()
        assert described.status != WorkflowExecutionStatus.RUNNING


async def test_temporals_own_cancel_of_a_graph_cancels_its_children_and_records_it(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "slow", "prompt": "take long"}]})
    script = write_graph_script(tmp_path, {"slow": [{"turns": [answer("too late", 120)]}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto"))
    await rig.wait_until(graph_id, lambda v: v.running == 1)
    session_id = (await rig.session_ids(graph_id))[0]
    await _wait_model_call(harness, session_id)
    await rig.handle(graph_id).cancel()
    with pytest.raises(WorkflowFailureError):
        await rig.wait(graph_id)
    view = await rig.snapshot(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert (await rig.handle(graph_id).describe()).status == WorkflowExecutionStatus.CANCELED
    assert (await rig.temporal.get_workflow_handle(f"session-{session_id}").describe()).status == WorkflowExecutionStatus.CANCELED
    assert view.status == "cancelled" and [n.status for n in view.nodes] == ["cancelled"]


async def test_cancelling_a_graph_during_a_review_cancels_the_review_call(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "only", "prompt": "do it"}]})
    slow_review = {"verdict": "pass", "delay_seconds": 120}
    script = write_graph_script(tmp_path, {"only": [{"turns": [answer("done")], "review": slow_review}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto"))
    await rig.wait_until(graph_id, lambda v: v.nodes and v.nodes[0].status == "reviewing")
    view = await rig.handle(graph_id).execute_update(
        "cancel", GraphControlInput(principal="alice", reason="enough"), result_type=GraphSnapshot
    )
    history = await rig.handle(graph_id).fetch_history()

    assert view.status == "cancelled" and [n.status for n in view.nodes] == ["cancelled"]
    assert any(e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED for e in history.events)
