"""AgentrtPlugin: one plugin gives the client, the worker and the replayer the same converter,
workflows, sandbox and failure policy; workers advertise their payload storage."""

from __future__ import annotations

import dataclasses

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType, TaskQueueKind
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient, connect
from agentrt.schemas import ConfigurationError
from agentrt.store import Store
from agentrt.worker import (
    PASSTHROUGH_MODULES,
    WORKFLOWS,
    AgentrtConfig,
    AgentrtPlugin,
    DevServer,
    LegacyQueryGuard,
    PayloadConfig,
    build_worker,
    plugin_of,
)
from agentrt.workflows.autonomous import AutonomousTaskWorkflow
from agentrt.workflows.graph import TaskGraphWorkflow
from agentrt.workflows.session import SessionWorkflow
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script


def test_the_plugin_gives_a_replayer_the_workflows_sandbox_converter_and_no_failure_types() -> None:
    plugin = AgentrtPlugin(AgentrtConfig())
    config = Replayer(workflows=[], plugins=[plugin]).config(active_config=True)
    assert list(config["workflows"]) == WORKFLOWS == [SessionWorkflow, AutonomousTaskWorkflow, TaskGraphWorkflow]
    runner = config["workflow_runner"]
    assert isinstance(runner, LegacyQueryGuard)
    assert isinstance(runner.runner, SandboxedWorkflowRunner)
    assert set(PASSTHROUGH_MODULES) <= set(runner.runner.restrictions.passthrough_modules)
    assert config["data_converter"] is plugin.data_converter
    assert config["data_converter"].external_storage is not None
    assert list(config["workflow_failure_exception_types"]) == []


async def test_build_worker_throttles_heartbeats_to_one_second_so_a_cancel_arrives_fast(harness: Harness) -> None:
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=f"tq-{uuid.uuid4().hex[:8]}")
    config = worker.config(active_config=True)
    assert config["max_heartbeat_throttle_interval"] == timedelta(seconds=1)
    assert config["default_heartbeat_throttle_interval"] == timedelta(seconds=1)
    assert list(config["workflows"]) == [SessionWorkflow, AutonomousTaskWorkflow, TaskGraphWorkflow]
    assert list(config["workflow_failure_exception_types"]) == []


async def test_build_worker_refuses_a_client_connected_without_the_plugin(temporal_server: DevServer, store: Store) -> None:
    plain = await Client.connect(temporal_server.address)
    with pytest.raises(ConfigurationError, match="connected with AgentrtPlugin"):
        build_worker(plain, AgentrtConfig(), store)


async def test_a_worker_that_runs_sessions_without_their_local_activities_says_what_is_missing(
    temporal_client: Client, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Sessions run store writes and short steps as local activities on the worker that runs them."""
    from temporalio.worker import WorkerConfig

    without_store = AgentrtPlugin(AgentrtConfig())
    with caplog.at_level("WARNING", logger="agentrt.worker._plugin"):
        without_store.configure_worker(WorkerConfig(client=temporal_client, task_queue="q"))
    assert "store.append, tools.list, profiles.describe, effects.reconcile, tool.execute, memory.decide" in caplog.text
    assert "give AgentrtPlugin a store" in caplog.text

    caplog.clear()
    with_store = AgentrtPlugin(AgentrtConfig(), store, registry=default_registry())
    with caplog.at_level("WARNING", logger="agentrt.worker._plugin"):
        with_store.configure_worker(WorkerConfig(client=temporal_client, task_queue="q"))
    assert "local activities" not in caplog.text


async def test_a_models_worker_whose_tool_calls_run_on_a_tools_queue_warns_of_nothing(
    temporal_client: Client, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A models (or workflows) worker has no tool.execute: its sessions send their tool calls to a tools queue."""
    config = AgentrtConfig(task_queue="q", tool_task_queue="q-tools")
    with caplog.at_level("WARNING", logger="agentrt.worker._plugin"):
        build_worker(temporal_client, config, store, default_registry(), role="models")
    assert "local activities" not in caplog.text, caplog.text


async def test_a_plain_sdk_worker_on_a_client_with_the_plugin_runs_a_session(
    temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    config = AgentrtConfig(database_url=store_url, task_queue=f"plain-{uuid.uuid4().hex[:8]}")
    plugin = AgentrtPlugin(config, store, registry=default_registry())
    temporal = await Client.connect(temporal_server.address, plugins=[plugin])
    agent = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": "read it"},
    ])
    async with Worker(temporal, task_queue=config.task_queue):  # everything else comes from the plugin
        started = await agent.start(session_config(agent, uuid.uuid4().hex[:12], workspace, script), "read the readme")
        outcome = await agent.wait(started.session_id, started.turn_id, timeout_seconds=60)
    assert (outcome.status, outcome.answer, outcome.tool_calls) == ("completed", "read it", 1)


def test_fingerprints_differ_for_different_stores_and_directories_and_match_for_the_same(tmp_path: Path) -> None:
    def fingerprint(**kwargs: object) -> str | None:
        return AgentrtPlugin(AgentrtConfig(**kwargs)).payload_storage.writer_fingerprint  # type: ignore[arg-type]

    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    assert fingerprint(database_url=a) == fingerprint(database_url=a)
    assert fingerprint(database_url=a) != fingerprint(database_url=b)
    directory = PayloadConfig(driver="directory", path=str(tmp_path / "p"))
    other = PayloadConfig(driver="directory", path=str(tmp_path / "q"))
    assert fingerprint(payloads=directory).startswith("agentrt.directory@")
    assert fingerprint(payloads=directory) != fingerprint(payloads=other)
    assert fingerprint(payloads=PayloadConfig(driver="none")) is None
    bucket_a = PayloadConfig(driver="s3", bucket="bucket-a", endpoint_url="http://127.0.0.1:9000")
    assert fingerprint(payloads=bucket_a).startswith("aws.s3driver@")
    assert fingerprint(payloads=bucket_a) == fingerprint(payloads=dataclasses.replace(bucket_a, region="eu-west-1"))
    assert fingerprint(payloads=bucket_a) != fingerprint(payloads=dataclasses.replace(bucket_a, bucket="bucket-b"))
    assert fingerprint(payloads=bucket_a) != fingerprint(payloads=dataclasses.replace(bucket_a, endpoint_url="http://127.0.0.1:9001"))


def test_a_postgresql_fingerprint_does_not_depend_on_the_password() -> None:
    def fingerprint(url: str) -> str | None:
        return AgentrtPlugin(AgentrtConfig(database_url=url)).payload_storage.writer_fingerprint

    assert fingerprint("postgresql+psycopg://agentrt:one@db/agentrt") == fingerprint("postgresql+psycopg://agentrt:two@db/agentrt")
    assert fingerprint("postgresql+psycopg://agentrt:one@db/agentrt") != fingerprint("postgresql+psycopg://agentrt:one@db/other")


async def test_connect_without_a_plugin_reads_the_configuration_of_agentrt_home(
    temporal_server: DevServer, agentrt_home: Path
) -> None:
    temporal = await connect(temporal_server.address)
    plugin = plugin_of(temporal)
    assert plugin is not None
    assert plugin.config.database_url == f"sqlite:///{agentrt_home / 'agentrt.db'}"


def test_a_worker_given_only_activities_gets_no_workflows_and_one_given_nothing_gets_them_all(
    temporal_client: Client,
) -> None:
    """Tool activities may run on a queue of their own, in a worker without the workflows."""
    from temporalio import activity
    from temporalio.worker import WorkerConfig

    @activity.defn(name="tools.only")
    def only() -> None: ...

    plugin = AgentrtPlugin(AgentrtConfig())

    def workflows(**given: Any) -> list[type]:
        return list(plugin.configure_worker(WorkerConfig(client=temporal_client, task_queue="q", **given))["workflows"])  # type: ignore[typeddict-item]

    assert workflows(activities=[only]) == []
    assert workflows() == WORKFLOWS
    assert workflows(workflows=WORKFLOWS, activities=[only]) == WORKFLOWS


@activity.defn(name="test.flaky")
async def _flaky() -> int:
    if activity.info().attempt == 1:
        raise ApplicationError("first attempt fails at once")
    return activity.info().attempt


@workflow.defn(name="TestFlakyWorkflow", sandboxed=False)
class _FlakyWorkflow:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(
            "test.flaky",
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
            result_type=int,
        )


async def test_a_retried_activity_of_another_workflow_leaves_its_sticky_queue_alone(
    temporal_server: DevServer, store: Store, store_url: str
) -> None:
    # ResumeInterceptor looks only at a session's model and tool calls: a user workflow's
    # retried activity (no heartbeat, another workflow type) keeps its sticky worker.
    config = AgentrtConfig(database_url=store_url, task_queue=f"flaky-{uuid.uuid4().hex[:8]}")
    temporal = await Client.connect(temporal_server.address, plugins=[AgentrtPlugin(config, store, registry=default_registry())])
    async with Worker(temporal, task_queue=config.task_queue, workflows=[_FlakyWorkflow], activities=[_flaky]) as worker:
        assert any(type(i).__name__ == "ResumeInterceptor" for i in worker.config(active_config=True)["interceptors"])
        handle = await temporal.start_workflow(_FlakyWorkflow.run, id=f"flaky-{uuid.uuid4().hex[:8]}", task_queue=config.task_queue)
        assert await handle.result() == 2
    kinds = [
        e.workflow_task_scheduled_event_attributes.task_queue.kind
        for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
    ]
    assert kinds == [TaskQueueKind.TASK_QUEUE_KIND_NORMAL, TaskQueueKind.TASK_QUEUE_KIND_STICKY]


async def test_a_plugin_worker_runs_every_workflow_inside_the_legacy_query_guard(harness: Harness) -> None:
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=f"tq-{uuid.uuid4().hex[:8]}")
    config = worker.config(active_config=True)
    assert isinstance(config["workflow_runner"], LegacyQueryGuard)
    assert isinstance(config["unsandboxed_workflow_runner"], LegacyQueryGuard)
