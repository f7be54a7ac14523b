"""Lanes on a real server: what a client starts carries its lane's priority and its tenant's fairness
key, its activities are queued under that priority, and its child sessions inherit both."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.api.common.v1 import Priority as PriorityProto
from temporalio.api.history.v1 import ActivityTaskScheduledEventAttributes as ActivityScheduled
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowHandle

from agentrt.client import AgentClient
from agentrt.schemas import GraphSpec, Lanes, QuotaPolicy, graph_workflow_id, task_workflow_id
from agentrt.worker import AgentrtConfig
from tests.conftest import Harness
from tests.e2e._graphs import answer, write_graph_script
from tests.e2e._support import session_config, write_script
from tests.e2e._tasks import write_task_script


def tenant_client(harness: Harness, lanes: Lanes | None = None, **config: object) -> tuple[AgentClient, str, str]:
    """A client as the CLI and the gateway make one (``for_config``, then ``with_principal``) for a
    new owner of a new tenant; returns it, the owner and the tenant."""
    tag = uuid.uuid4().hex[:8]
    owner, tenant = f"alice-{tag}", f"acme-{tag}"
    configured = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=harness.task_queue, database_url=harness.config.database_url,
        quotas=QuotaPolicy(owners={owner: tenant}), lanes=lanes or Lanes(weights={tenant: 2.0}), **config,  # type: ignore[arg-type]
    )
    return AgentClient.for_config(harness.temporal, configured, store=harness.store).with_principal(owner), owner, tenant


async def priority_of(handle: WorkflowHandle) -> PriorityProto:
    return (await handle.describe()).raw_description.workflow_execution_info.priority


async def child_ids(handle: WorkflowHandle, at_least: int = 1, timeout: float = 60.0) -> list[str]:
    """The workflow ids of the children ``handle``'s workflow started, once it started ``at_least``."""
    async def poll() -> list[str]:
        while True:
            found = [
                e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                for e in (await handle.fetch_history()).events
                if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
            ]
            if len(found) >= at_least:
                return found
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), timeout)


async def scheduled_activities(handle: WorkflowHandle, name: str, timeout: float = 60.0) -> list[ActivityScheduled]:
    """The activities ``handle``'s workflow scheduled, once it scheduled one called ``name``."""
    async def poll() -> list[ActivityScheduled]:
        while True:
            found = [
                e.activity_task_scheduled_event_attributes for e in (await handle.fetch_history()).events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            ]
            if any(a.activity_type.name == name for a in found):
                return found
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), timeout)


async def backlog_by_priority(temporal: Client, task_queue: str, timeout: float = 30.0) -> dict[int, int]:
    """The activity tasks waiting on ``task_queue`` (no worker polls it), by priority key, once there are some."""
    request = DescribeTaskQueueRequest(
        namespace=temporal.namespace, task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, report_stats=True,
    )

    async def poll() -> dict[int, int]:
        while True:  # the server keeps its answer for a few seconds: a first one may be from before the task came
            stats = (await temporal.workflow_service.describe_task_queue(request)).stats_by_priority_key
            waiting = {key: s.approximate_backlog_count for key, s in stats.items() if s.approximate_backlog_count}
            if waiting:
                return waiting
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), timeout)


async def test_a_session_runs_in_the_interactive_lane_of_its_tenant_and_its_activities_are_queued_in_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    tools = f"{harness.task_queue}-tools-nobody-polls"
    client, _, tenant = tenant_client(harness, tool_task_queue=tools)
    script = write_script(tmp_path, [{"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]}, {"text": "read"}])
    sid = uuid.uuid4().hex[:12]
    started = await client.start(session_config(client, sid, workspace, script, tool_task_queue=tools), "read the readme")
    handle = harness.temporal.get_workflow_handle(started.workflow_id)
    try:
        scheduled = await scheduled_activities(handle, "tool.execute")
        waiting = await backlog_by_priority(harness.temporal, tools)  # the tool call, waiting for a tools worker

        assert await priority_of(handle) == PriorityProto(priority_key=2, fairness_key=tenant, fairness_weight=2.0)
        # No activity sets a priority of its own: each inherits the session's, as the tool call's queue shows.
        assert {a.activity_type.name for a in scheduled} >= {"provider.complete", "tool.execute"}
        assert all(a.priority == PriorityProto() for a in scheduled)
        assert waiting == {2: 1}
    finally:
        await handle.terminate("test over")


async def test_a_task_and_the_sessions_it_starts_run_in_the_task_lane(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    client, _, tenant = tenant_client(harness)
    script = write_task_script(tmp_path, [[{"text": "working"}]], reviews=[{"verdict": "fail", "findings": ["not yet"]}])
    task_id = await client.start_task("note it", workspace=str(workspace), script=script, every_seconds=3600)
    try:
        handle = harness.temporal.get_workflow_handle(task_workflow_id(task_id))
        (session,) = await child_ids(handle)

        lane = PriorityProto(priority_key=3, fairness_key=tenant, fairness_weight=2.0)
        assert await priority_of(handle) == lane
        assert await priority_of(harness.temporal.get_workflow_handle(session)) == lane
    finally:
        await client.cancel_task(task_id)


async def test_a_graph_and_its_node_sessions_run_in_the_graph_lane(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    client, _, tenant = tenant_client(harness, lanes=Lanes(graph=5, fairness="owner"))
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer("done")]}]})
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "do a"}]})

    graph_id = await client.start_graph(graph=spec, workspace=str(workspace), script=script, approve_plan="auto")
    result = await asyncio.wait_for(client.wait_graph(graph_id), 120)

    handle = harness.temporal.get_workflow_handle(graph_workflow_id(graph_id))
    (node,) = await child_ids(handle)
    lane = PriorityProto(priority_key=5, fairness_key=client.principal)  # fairness by owner: no weight for it
    assert result.status == "completed" and client.principal != tenant
    assert await priority_of(handle) == lane
    assert await priority_of(harness.temporal.get_workflow_handle(node)) == lane


async def test_with_lanes_off_a_session_starts_at_the_servers_default_priority(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client, _, _ = tenant_client(harness, lanes=Lanes(enabled=False))
    sid = uuid.uuid4().hex[:12]

    started, outcome = await client.start_and_wait(session_config(client, sid, workspace, write_script(tmp_path, [{"text": "hi"}])), "hi")

    assert outcome.status == "completed"
    assert await priority_of(harness.temporal.get_workflow_handle(started.workflow_id)) == PriorityProto()
