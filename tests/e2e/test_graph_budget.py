"""A task graph's own budget, end to end: its node sessions draw from it (each gets what is left as
its budget), a node that spends it stops and no node starts after it, the graph fails
``budget_exceeded``; a cancelled node's spend counts against it. And a tenant at its quota cannot
spend through a graph's nodes: their model calls are refused before they are sent."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

from agentrt.client import AgentClient
from agentrt.schemas import (
    AgentTaskFailed,
    Budget,
    GraphControlInput,
    GraphSnapshot,
    GraphSpec,
    Quota,
    QuotaPolicy,
    TurnEnded,
    quota_day,
)
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._graphs import PASS, GraphRig, write_graph_script
from tests.e2e._support import ALLOW_ALL
from tests.e2e.test_cancelled_child_spend import SPEND_THEN_STALL, _spent, _stalled

LIST = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
CHAIN = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "list twice"}, {"id": "b", "prompt": "then this", "depends_on": ["a"]}]})


async def test_a_graph_s_budget_stops_the_child_that_spends_it_and_starts_no_node_after_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    script = write_graph_script(tmp_path, {
        "a": [{"turns": [LIST, LIST, {"text": "listed twice"}], "review": PASS}],
        "b": [{"turns": [{"text": "never"}], "review": PASS}],
    })
    config = rig.config(workspace, script, graph=CHAIN, approve_plan="auto", approval=ALLOW_ALL, budget=Budget(max_tool_calls=1))
    graph_id = await rig.start(config)

    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "failed" and result.failure_reason == "budget_exceeded"
    assert result.failure is not None and "tool_calls budget of 1 tool calls reached" in result.failure
    [session_id] = await rig.session_ids(graph_id)  # node a, once: no retry, and b never started
    child = await harness.client.state(session_id)
    assert child.budget == Budget(max_tool_calls=1)  # what was left of the graph's when it started
    ended = [e for e in (await harness.client.events(session_id)).events if isinstance(e, TurnEnded)]
    assert [e.status for e in ended] == ["budget_exceeded"]
    failed = [e for e in await rig.events(graph_id) if isinstance(e, AgentTaskFailed)]
    assert [(e.node_id, e.final) for e in failed] == [("a", True)]
    view = await rig.snapshot(graph_id)
    assert {n.id: n.status for n in view.nodes} == {"a": "failed", "b": "blocked"}
    assert view.budget == Budget(max_tool_calls=1) and view.remaining is not None and view.remaining.max_tool_calls == 0
    assert view.spend.tool_calls == 2  # the second call was asked for (counted), and not run


async def test_a_cancelled_node_s_spend_counts_against_the_graph_s_budget(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "list the files"}]})
    script = write_graph_script(tmp_path, {"a": [{"turns": SPEND_THEN_STALL}]})
    config = rig.config(workspace, script, graph=spec, approve_plan="auto", approval=ALLOW_ALL, budget=Budget(max_tool_calls=5))
    graph_id = await rig.start(config)
    await rig.wait_until(graph_id, lambda v: v.running == 1)
    [session_id] = await rig.session_ids(graph_id)
    await _stalled(harness, session_id)

    await rig.handle(graph_id).execute_update("cancel", GraphControlInput(principal="alice", reason="enough"), result_type=GraphSnapshot)
    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "cancelled"
    spent = await _spent(harness, session_id)
    view = await rig.snapshot(graph_id)
    assert view.spend.usage == spent.usage and view.spend.tool_calls == 1
    assert view.remaining is not None and view.remaining.max_tool_calls == 4


async def test_a_tenant_at_its_quota_cannot_spend_through_a_graph_s_nodes(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    tenant, owner = f"acme-{tag}", f"alice-{tag}"
    harness.config.quotas = QuotaPolicy(tenants={tenant: Quota(tokens_per_day=5)}, owners={owner: tenant})
    client = AgentClient(
        harness.temporal, task_queue=harness.task_queue, principal=owner, store=harness.store, quotas=harness.config.quotas
    )
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "spend"}]})
    script = write_graph_script(tmp_path, {"a": [{"turns": [{"text": "never sent"}], "review": PASS}] * 2})

    graph_id = await client.start_graph(graph=spec, workspace=str(workspace), script=script, approve_plan="auto")  # used 0 < 5
    result = await asyncio.wait_for(client.wait_graph(graph_id), 120)

    assert result.status == "failed" and result.failure_reason == "node_failed"
    failed = [e for e in (await client.graph_events(graph_id)).events if isinstance(e, AgentTaskFailed)]
    assert len(failed) == 2 and all("QuotaExceeded" in e.error or "tokens_per_day" in e.error for e in failed)
    assert harness.store.tenant_usage([owner], quota_day(datetime.now(UTC))[0]) == (0, 0.0, 0)
