"""Tool calls on their own task queue: a models-only worker runs the session and its model calls,
a tools-only worker (no provider keys needed) runs the tool calls. Model calls on a third: a
workflows-only worker runs the session, a providers-only worker its model calls."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import ConfigurationError
from agentrt.worker import AgentrtConfig, build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, worker_process, write_script
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


async def test_workflow_provider_and_tool_workers_each_on_its_own_queue_run_a_session_end_to_end(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    queues = {"AGENTRT_TASK_QUEUE": queue, "AGENTRT_MODEL_TASK_QUEUE": f"{queue}-models", "AGENTRT_TOOL_TASK_QUEUE": f"{queue}-tools"}
    logs = {role: tmp_path / f"{role}.log" for role in ("workflows", "providers", "tools")}
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "echo pooled > out.txt"}}]},
        {"text": "done"},
    ])
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, model_task_queue=f"{queue}-models")
    sid = uuid.uuid4().hex[:12]
    with (
        worker_process(harness, logs["workflows"], "--workflows-only", env=queues) as workflows,
        worker_process(harness, logs["providers"], "--providers-only", env=queues) as providers,
        worker_process(harness, logs["tools"], "--tools-only", env=queues) as tools,
    ):
        for log in logs.values():
            await _polling(log)
        config = session_config(client, sid, workspace, script, approval=ALLOW_ALL, tool_task_queue=f"{queue}-tools")
        assert config.model_task_queue == f"{queue}-models"  # new_config takes the client's
        _, outcome = await asyncio.wait_for(client.start_and_wait(config, "go"), 90)

    assert outcome.status == "completed" and (workspace / "out.txt").read_text() == "pooled\n"
    history = await harness.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
    scheduled = {
        e.event_id: (e.activity_task_scheduled_event_attributes.activity_type.name, e.activity_task_scheduled_event_attributes.task_queue.name)
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    assert set(scheduled.values()) == {
        ("session.prepare", queue), ("store.append", queue), ("provider.complete", f"{queue}-models"), ("tool.execute", f"{queue}-tools"),
    }
    pids = {"workflows": workflows.pid, "providers": providers.pid, "tools": tools.pid}
    ran = {
        (scheduled[e.activity_task_started_event_attributes.scheduled_event_id][0], e.activity_task_started_event_attributes.identity.split("@")[0])
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    }
    assert ran == {
        ("session.prepare", str(pids["workflows"])), ("store.append", str(pids["workflows"])),
        ("provider.complete", str(pids["providers"])), ("tool.execute", str(pids["tools"])),
    }
    tasks = {
        e.workflow_task_started_event_attributes.identity.split("@")[0]
        for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        and e.workflow_task_started_event_attributes.identity
    }
    assert tasks == {str(pids["workflows"])}


async def _polling(log: Path) -> None:
    """Until the worker process writing ``log`` says it polls (bounded: 60 s)."""
    async def wait() -> None:
        while "worker polling" not in (log.read_text(errors="replace") if log.exists() else ""):
            await asyncio.sleep(0.1)

    await asyncio.wait_for(wait(), 60)


def test_a_worker_takes_its_workflow_task_slots_and_sticky_timeout_from_the_configuration(harness: Harness) -> None:
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue="q", database_url=harness.config.database_url,
        max_concurrent_workflow_tasks=8, sticky_schedule_to_start_seconds=1.5,
    )
    settings = build_worker(harness.temporal, config, harness.store, default_registry()).config()

    assert settings.get("max_concurrent_workflow_tasks") == 8
    assert settings.get("sticky_queue_schedule_to_start_timeout") == timedelta(seconds=1.5)
