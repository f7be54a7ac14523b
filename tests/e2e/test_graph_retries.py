"""Task graphs end to end, how a node is tried again: by hand (``retry_node``, which unblocks its
dependants), automatically when its answer is an ``Error:`` report, and never on an answer the
reviewer failed for a destructive command."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from temporalio.testing import TimeSkipper

from agentrt.client import AgentClient
from agentrt.schemas import (
    AgentTaskFailed,
    GraphNotFound,
    GraphSpec,
    RequestRejected,
    TaskRetried,
    TaskReviewed,
)
from tests.cli.test_cli import agentrt
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._graphs import OWNER, PASS, GraphRig, answer, fail, write_graph_script
from tests.e2e.test_gateway import auth, http  # noqa: F401 (http: the gateway fixture, over the harness)
from tests.gateway.test_gateway import assert_problem


@pytest.fixture
def rig(harness: Harness) -> GraphRig:
    return GraphRig(harness.temporal, harness.task_queue)


def chain() -> GraphSpec:
    """a -> b -> c, and x beside them."""
    return GraphSpec.model_validate({"nodes": [
        {"id": "a", "prompt": "lay the foundation"},
        {"id": "b", "prompt": "build on it", "depends_on": ["a"]},
        {"id": "c", "prompt": "paint it", "depends_on": ["b"]},
        {"id": "x", "prompt": "write the notes"},
    ]})


def client_of(harness: Harness, principal: str = OWNER, operators: list[str] | None = None) -> AgentClient:
    return AgentClient(harness.temporal, task_queue=harness.task_queue, principal=principal, operators=operators, store=harness.store)


async def _failed_and_waiting(rig: GraphRig, workspace: Path, tmp_path: Path, **fields: object) -> str:
    """A chain whose node a fails its only attempt (reviewer), so b and c are blocked; the graph
    waits an hour for a retry by hand."""
    script = write_graph_script(tmp_path, {
        "a": [{"turns": [answer("half a foundation")], "review": fail("only half")}, {"turns": [answer("foundation laid")], "review": PASS}],
        "b": [{"turns": [answer("built")]}],
        "c": [{"turns": [answer("painted")]}],
        "x": [{"turns": [answer("notes written")]}],
    })
    config = rig.config(workspace, script, graph=chain(), approve_plan="auto", max_retries=0, retry_window_seconds=3600, **fields)
    graph_id = await rig.start(config)
    await rig.wait_until(graph_id, lambda v: v.retry_until is not None)
    return graph_id


async def test_a_node_retried_by_hand_runs_again_and_the_dependants_it_blocked_then_run(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph_id = await _failed_and_waiting(rig, workspace, tmp_path)
    waiting = await rig.snapshot(graph_id)
    assert {n.id: n.status for n in waiting.nodes} == {"a": "failed", "b": "blocked", "c": "blocked", "x": "completed"}

    retried = await client_of(harness).graphs.retry_node(graph_id, "a", "the foundation tool is fixed")
    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert {n.id: n.status for n in retried.nodes}["b"] == "pending" and retried.retry_until is None
    assert result.status == "completed"
    assert result.nodes == {"a": "completed", "b": "completed", "c": "completed", "x": "completed"}
    by_hand = [e for e in await rig.events(graph_id) if isinstance(e, TaskRetried)]
    assert [(e.node_id, e.attempt, e.principal, e.reason, e.unblocked) for e in by_hand] == [
        ("a", 2, OWNER, "the foundation tool is fixed", ["b", "c"])
    ]
    assert "only half" in by_hand[0].feedback


async def test_a_graph_waiting_for_a_retry_by_hand_ends_failed_once_its_window_has_passed(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph_id = await _failed_and_waiting(rig, workspace, tmp_path)

    # Two virtual hours: the graph ends within them (fast_forward answers False: it ended first).
    await asyncio.wait_for(TimeSkipper(harness.temporal).fast_forward(rig.handle(graph_id), timedelta(hours=2)), 60)
    result = await rig.wait(graph_id)

    assert (result.status, result.failure_reason) == ("failed", "node_failed")
    assert result.nodes == {"a": "failed", "b": "blocked", "c": "blocked", "x": "completed"}
    assert (await rig.snapshot(graph_id)).retry_until is None


async def test_an_operator_without_a_reason_may_not_retry_a_node_and_the_graph_is_unchanged(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph_id = await _failed_and_waiting(rig, workspace, tmp_path, operators=["ops"])

    with pytest.raises(RequestRejected, match="reason"):
        await client_of(harness, "ops", operators=["ops"]).graphs.retry_node(graph_id, "a")
    with pytest.raises(GraphNotFound):
        await client_of(harness, "mallory").graphs.retry_node(graph_id, "a")

    view = await rig.snapshot(graph_id)
    assert {n.id: n.status for n in view.nodes} == {"a": "failed", "b": "blocked", "c": "blocked", "x": "completed"}
    assert not [e for e in await rig.events(graph_id) if isinstance(e, TaskRetried)]
    await client_of(harness).graphs.cancel(graph_id)


async def test_retrying_a_node_that_did_not_fail_or_does_not_exist_is_refused(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph_id = await _failed_and_waiting(rig, workspace, tmp_path)
    client = client_of(harness)

    with pytest.raises(RequestRejected, match="node x of graph .* is completed"):
        await client.graphs.retry_node(graph_id, "x")
    with pytest.raises(RequestRejected, match="has no node 'zz'"):
        await client.graphs.retry_node(graph_id, "zz")
    with pytest.raises(RequestRejected, match="1 to 64 characters"):
        await client.graphs.retry_node(graph_id, "n" * 65)

    assert (await rig.snapshot(graph_id)).retry_until is not None  # still waiting, nothing changed
    await client.graphs.cancel(graph_id)


async def test_a_node_whose_answer_is_an_error_report_is_retried_without_a_review(
    rig: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_graph_script(tmp_path, {
        "a": [{"turns": [answer("Error: the build tool crashed")], "review": PASS}, {"turns": [answer("built")], "review": PASS}],
    })
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "build it"}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto", max_retries=1))
    result = await rig.wait(graph_id)
    events = await rig.events(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "completed"
    failed = [e for e in events if isinstance(e, AgentTaskFailed)]
    assert [(e.attempt, e.final) for e in failed] == [(1, False)]
    assert "answered with an error: Error: the build tool crashed" in failed[0].error
    assert [e.attempt for e in events if isinstance(e, TaskReviewed)] == [2]


async def test_a_node_that_keeps_answering_an_error_fails_for_good_after_its_retries(
    rig: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer("  Error: no disk")]}, {"turns": [answer("Error: no disk")]}]})
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "build it"}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto", max_retries=1))
    result = await rig.wait(graph_id)
    events = await rig.events(graph_id)

    assert (result.status, result.nodes) == ("failed", {"a": "failed"})
    assert [(e.attempt, e.final) for e in events if isinstance(e, AgentTaskFailed)] == [(1, False), (2, True)]
    assert not [e for e in events if isinstance(e, TaskReviewed)]


async def test_the_reviewer_fails_an_answer_holding_a_destructive_command_with_a_high_finding(
    rig: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    text = "Cleaned the workspace:\n```diff\n+cleanup:\n+\trm -rf $HOME/*\n```\nAll done."
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer(text)], "review": PASS}]})
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "tidy up"}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto", max_retries=0))
    result = await rig.wait(graph_id)
    reviews = [e for e in await rig.events(graph_id) if isinstance(e, TaskReviewed)]

    assert (result.status, result.nodes) == ("failed", {"a": "failed"})
    assert [(r.passed, r.severity) for r in reviews] == [(False, "high")]
    assert reviews[0].findings[0].startswith("high: a destructive command in the node's answer: ") and "rm -rf" in reviews[0].findings[0]


async def test_the_cli_retries_a_failed_node_for_its_owner_and_a_stranger_sees_no_graph(
    rig: GraphRig, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph_id = await _failed_and_waiting(rig, workspace, tmp_path)

    waiting = await agentrt(harness, "graph", "status", graph_id, cwd=tmp_path)
    stranger = await agentrt(harness, "graph", "retry", graph_id, "a", cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
    done = await agentrt(harness, "graph", "retry", graph_id, "a", "--reason", "fixed", "--json", cwd=tmp_path)
    again = await agentrt(harness, "graph", "retry", graph_id, "x", cwd=tmp_path)
    result = await rig.wait(graph_id)
    audit = await agentrt(harness, "audit", "--target", graph_id, cwd=tmp_path)

    assert waiting.returncode == 0, waiting.stderr
    assert f"graph      {graph_id} (executing · waiting for a retry by hand)" in waiting.stdout
    assert "node a failed for good: waiting until " in waiting.stdout
    assert f"  agentrt graph retry {graph_id} a\n" in waiting.stdout.split("next steps", 1)[1]
    assert stranger.returncode == 2 and f"no task graph {graph_id!r}" in stranger.stderr
    assert done.returncode == 0, done.stderr
    assert {n["id"]: n["status"] for n in json.loads(done.stdout)["nodes"]}["b"] == "pending"
    assert again.returncode == 2 and "only a node that failed for good can be retried" in again.stderr
    assert result.status == "completed"
    assert audit.returncode == 0, audit.stderr
    assert f"alice  retry_node  graph {graph_id}" in audit.stdout and "reason: fixed" in audit.stdout


async def test_the_gateway_retries_a_failed_node_for_its_owner_and_refuses_a_bad_node_id(
    rig: GraphRig, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    graph_id = await _failed_and_waiting(rig, workspace, tmp_path)

    hidden = await http.post(f"/v1/runs/{graph_id}/nodes/a/retry", json={"reason": "x"}, headers=auth("mallory"))
    malformed = await http.post(f"/v1/runs/{graph_id}/nodes/-a/retry", headers=auth("alice"))
    retried = await http.post(f"/v1/runs/{graph_id}/nodes/a/retry", json={"reason": "fixed"}, headers=auth("alice"))
    again = await http.post(f"/v1/graphs/{graph_id}/nodes/x/retry", headers=auth("alice"))
    result = await rig.wait(graph_id)

    assert_problem(hidden, 404)
    assert_problem(malformed, 422)
    assert retried.status_code == 200, retried.text
    assert {n["id"]: n["status"] for n in retried.json()["nodes"]}["b"] == "pending"
    assert "only a node that failed for good" in assert_problem(again, 409)["detail"]
    assert result.status == "completed"
