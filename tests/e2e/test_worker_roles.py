"""Tool calls on their own task queue: a models-only worker runs the session and its model calls,
a tools-only worker (no provider keys needed) runs the tool calls."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import ConfigurationError
from agentrt.worker import AgentrtConfig, build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script
from tests.mcp_servers import probe_stdio


async def test_tool_calls_run_on_the_tools_worker_and_everything_else_on_the_models_worker(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, tool_task_queue=f"{queue}-tools",
        database_url=harness.config.database_url,
    )
    models = build_worker(harness.temporal, config, harness.store, default_registry(), role="models")
    tools = build_worker(harness.temporal, config, harness.store, default_registry(), role="tools")
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "echo hi > out.txt"}}]},
        {"text": "done"},
    ])
    sid = uuid.uuid4().hex[:12]
    async with models, tools:
        started = await client.start(
            session_config(client, sid, workspace, script, approval=ALLOW_ALL, tool_task_queue=config.tool_task_queue), "go"
        )
        outcome = await client.wait(sid, started.turn_id)

    assert outcome.status == "completed" and (workspace / "out.txt").read_text() == "hi\n"
    history = await harness.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
    scheduled = {
        (e.activity_task_scheduled_event_attributes.activity_type.name, e.activity_task_scheduled_event_attributes.task_queue.name)
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    # fs.read too: no local tools; the session's preparation and last store write stay with the models worker.
    assert scheduled == {
        ("provider.complete", queue), ("session.prepare", queue), ("store.append", queue), ("tool.execute", f"{queue}-tools")
    }
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert all(b"tool.execute" not in e.marker_recorded_event_attributes.SerializeToString() for e in markers)


def test_a_models_only_worker_needs_a_tool_task_queue(harness: Harness) -> None:
    config = AgentrtConfig(temporal_address=harness.server.address, task_queue="q", database_url=harness.config.database_url)

    with pytest.raises(ConfigurationError, match="tool_task_queue"):
        build_worker(harness.temporal, config, harness.store, default_registry(), role="models")


def test_the_tool_task_queue_comes_from_the_configuration(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text('[temporal]\ntask_queue = "agents"\ntool_task_queue = "agents-tools"\n')

    assert AgentrtConfig.load(file, env={}).tool_task_queue == "agents-tools"
    assert AgentrtConfig.load(file, env={"AGENTRT_TOOL_TASK_QUEUE": "other"}).tool_task_queue == "other"


async def test_mcp_servers_run_beside_the_tools_and_a_models_worker_starts_none(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, tool_task_queue=f"{queue}-tools",
        database_url=harness.config.database_url, mcp_servers={"probe": probe_stdio(tmp_path, start="eager")},
    )
    models = build_worker(harness.temporal, config, harness.store, default_registry(), role="models")
    tools = build_worker(harness.temporal, config, harness.store, default_registry(), role="tools")
    assert dict(models.mcp.servers) == {} and set(tools.mcp.servers) == {"probe"}
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, mcp_servers=["probe"])
    script = write_script(tmp_path, [{"tool_calls": [{"name": "probe.count", "arguments": {"steps": 2}}]}, {"text": "done"}])
    sid = uuid.uuid4().hex[:12]
    async with models, tools:
        started = await client.start(
            session_config(client, sid, workspace, script, tool_task_queue=config.tool_task_queue), "go"
        )
        assert (await client.wait(sid, started.turn_id)).status == "completed"

    history = await harness.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
    scheduled = {
        (e.activity_task_scheduled_event_attributes.activity_type.name, e.activity_task_scheduled_event_attributes.task_queue.name)
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    tool_queue = f"{queue}-tools"
    assert scheduled == {
        ("provider.complete", queue), ("session.prepare", queue), ("store.append", queue),
        ("mcp.list_tools", tool_queue), ("mcp.call_tool", tool_queue),
    }
