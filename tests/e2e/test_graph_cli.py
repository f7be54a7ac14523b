"""`agentrt graph` against the real TaskGraphWorkflow, as a user runs it: a graph file of three nodes
(a, then b and c after it), each node on its own scripted-model file; run with automatic approval
and waited for, run with approval asked (no terminal: approved from a second process), cancelled
mid-run, and hidden from a stranger."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Callable

from temporalio.service import RPCError

from agentrt.schemas import AgentrtError, GraphSnapshot
from tests.cli.test_cli import agentrt
from tests.conftest import Harness


def write_graph(directory: Path, *, a_delay: float = 0.0) -> Path:
    """``graph.json`` beside one script per node (named relative to it): a writes ``facts.md``,
    b and c answer after it."""
    scripts = directory / "scripts"
    scripts.mkdir(exist_ok=True)
    (scripts / "a.json").write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "facts.md", "content": "the facts"}}], "delay_seconds": a_delay},
        {"text": "wrote facts.md"},
    ]}))
    (scripts / "b.json").write_text(json.dumps({"turns": [{"text": "the summary is written"}]}))
    (scripts / "c.json").write_text(json.dumps({"turns": [{"text": "the links are checked"}]}))
    graph = directory / "graph.json"
    graph.write_text(json.dumps({"max_parallel": 2, "nodes": [
        {"id": "a", "prompt": "collect the facts into facts.md", "script": "scripts/a.json", "tools": ["fs.write"]},
        {"id": "b", "prompt": "write the summary", "depends_on": ["a"], "script": "scripts/b.json", "tools": ["fs.read"]},
        {"id": "c", "prompt": "check the links", "depends_on": ["a"], "script": "scripts/c.json", "tools": ["fs.read"]},
    ]}))
    return graph


TOOLS = ["--tool", "fs.read", "--tool", "fs.write"]


async def until(harness: Harness, graph_id: str, predicate: Callable[[GraphSnapshot], bool]) -> GraphSnapshot | None:
    """The graph's snapshot once ``predicate`` holds (None after 30 s); asked again while the
    graph is not started yet or its worker not ready."""
    view: GraphSnapshot | None = None
    for _ in range(300):
        try:
            view = await harness.client.graph_status(graph_id)
        except (AgentrtError, RPCError):
            view = None
        if view is not None and predicate(view):
            return view
        await asyncio.sleep(0.1)
    return view


async def test_a_graph_run_from_a_file_with_automatic_approval_completes_every_node(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph = write_graph(tmp_path)
    graph_id = f"cli-{uuid.uuid4().hex[:8]}"

    started = await agentrt(
        harness, "graph", "run", str(graph), "-w", str(workspace), "--approve-plan", "auto", *TOOLS, "--id", graph_id, "--json",
        cwd=tmp_path,
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"graph_id": graph_id}

    waited = await agentrt(harness, "graph", "wait", graph_id, "--json", cwd=tmp_path)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    result = json.loads(waited.stdout)
    assert result["status"] == "completed" and result["nodes"] == {"a": "completed", "b": "completed", "c": "completed"}

    status = await agentrt(harness, "graph", "status", graph_id, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["status"] == "completed" and body["owner"] == "alice" and body["approve_plan"] == "auto"
    assert [(n["id"], n["status"]) for n in body["nodes"]] == [("a", "completed"), ("b", "completed"), ("c", "completed")]
    assert (workspace / "facts.md").read_text() == "the facts"

    human = await agentrt(harness, "graph", "status", graph_id, cwd=tmp_path)
    assert f"graph      {graph_id} (completed) owner alice" in human.stdout and "<- a" in human.stdout

    events = await agentrt(harness, "graph", "events", graph_id, cwd=tmp_path)
    assert events.returncode == 0, events.stderr
    types = [line.split()[3] for line in events.stdout.splitlines()]
    assert types[0] == "TaskGraphCreated" and types[-1] == "TaskGraphCompleted"
    assert "TaskPlanApproved" in types and types.count("AgentTaskStarted") == 3 and types.count("AgentTaskCompleted") == 3

    listed = await agentrt(harness, "graph", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr

    for command in (["status", graph_id], ["events", graph_id], ["wait", graph_id]):
        stranger = await agentrt(harness, "graph", *command, cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
        assert stranger.returncode == 2, stranger.stdout
        assert f"no task graph '{graph_id}'" in stranger.stderr
    missing = await agentrt(harness, "graph", "status", "no-such-graph", cwd=tmp_path)
    assert missing.returncode == 2 and "no task graph 'no-such-graph'" in missing.stderr


async def test_a_followed_run_without_a_terminal_waits_for_an_approval_from_another_process(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    graph = write_graph(tmp_path)
    graph_id = f"cli-{uuid.uuid4().hex[:8]}"

    shown = tmp_path / "follower.out"
    follower = asyncio.create_task(
        agentrt(harness, "graph", "run", str(graph), "-w", str(workspace), *TOOLS, "--id", graph_id, cwd=tmp_path, stdout=shown)
    )
    view = await until(harness, graph_id, lambda v: v.status == "pending_approval")
    assert view is not None and view.status == "pending_approval", view
    # The follower says how to approve once it has seen the plan wait (it polls): approved sooner, it need not.
    for _ in range(600):
        if shown.exists() and "the plan waits for approval" in shown.read_text() or follower.done():
            break
        await asyncio.sleep(0.1)

    refused = await agentrt(harness, "graph", "approve", graph_id, cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
    assert refused.returncode == 2 and f"no task graph {graph_id!r}" in refused.stderr  # a stranger sees no graph
    approved = await agentrt(harness, "graph", "approve", graph_id, "--reason", "looks right", cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert f"graph {graph_id}: plan approved" in approved.stdout

    followed = await follower
    assert followed.returncode == 0, followed.stdout + followed.stderr
    out = followed.stdout
    assert f"the plan waits for approval: agentrt graph approve {graph_id}" in out
    assert "plan:" in out and "TaskPlanApproved" in out and "plan approved by alice: looks right" in out
    assert f"graph      {graph_id} (completed) owner alice" in out
    again = await agentrt(harness, "graph", "approve", graph_id, cwd=tmp_path)
    assert again.returncode == 2 and f"graph {graph_id} rejected approve_plan" in again.stderr


async def test_a_graph_cancelled_from_the_cli_ends_cancelled(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    graph = write_graph(tmp_path, a_delay=60)
    graph_id = f"cli-{uuid.uuid4().hex[:8]}"
    started = await agentrt(
        harness, "graph", "run", str(graph), "-w", str(workspace), "--approve-plan", "auto", *TOOLS, "--id", graph_id, "--json",
        cwd=tmp_path,
    )
    assert started.returncode == 0, started.stderr
    view = await until(harness, graph_id, lambda v: v.status == "executing" and any(n.status == "delegated" for n in v.nodes))
    assert view is not None and view.status == "executing", view

    cancelled = await agentrt(harness, "graph", "cancel", graph_id, "--reason", "test over", "--json", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    body = json.loads(cancelled.stdout)
    assert body["status"] == "cancelled" and {n["status"] for n in body["nodes"]} == {"cancelled"}

    waited = await agentrt(harness, "graph", "wait", graph_id, "--json", cwd=tmp_path)
    assert waited.returncode == 1 and json.loads(waited.stdout)["status"] == "cancelled"
    assert not (workspace / "facts.md").exists()
