"""Helpers for versioned deploys (Temporal's Worker Deployment Versioning) in tests and recordings:
a worker of one build, making a build current, and reading which build a run is pinned to."""

from __future__ import annotations

import asyncio
import json

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import WorkerDeploymentVersion

from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtWorker, build_worker
from bench.deployments import make_current as _make_current

WAIT = 60  # seconds: only so that a broken run fails the test instead of hanging it


def versioned_worker(temporal: Client, config: AgentrtConfig, store: Store, task_queue: str, deployment: str, build_id: str) -> AgentrtWorker:
    """A worker (``async with``) polling ``task_queue`` as version ``deployment``/``build_id``."""
    version = WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id)
    return build_worker(temporal, config, store, task_queue=task_queue, deployment=version)


async def make_current(temporal: Client, deployment: str, build_id: str) -> None:
    """Make ``build_id`` the current version of ``deployment`` once its workers' first poll has registered it."""
    await _make_current(temporal, deployment, build_id, identity="test")


async def pinned_build(temporal: Client, workflow_id: str) -> str:
    """The build the latest run of ``workflow_id`` is pinned to (AssertionError: not pinned yet)."""
    info = (await temporal.get_workflow_handle(workflow_id).describe()).raw_description.workflow_execution_info
    assert info.versioning_info.behavior == 1, info.versioning_info  # VERSIONING_BEHAVIOR_PINNED
    return info.versioning_info.deployment_version.build_id


async def pinned_run_build(handle: WorkflowHandle) -> str:
    """The build one run (``handle`` names its run id) was pinned to."""
    info = (await handle.describe()).raw_description.workflow_execution_info
    return info.versioning_info.deployment_version.build_id


async def settled_on(temporal: Client, workflow_id: str, build_id: str) -> None:
    """Wait until the latest run of ``workflow_id`` is pinned to ``build_id`` (bounded by WAIT)."""
    for _ in range(WAIT * 10):
        try:
            if await pinned_build(temporal, workflow_id) == build_id:
                return
        except AssertionError:
            pass  # a new run whose first task has not completed yet is not pinned yet
        await asyncio.sleep(0.1)
    assert await pinned_build(temporal, workflow_id) == build_id


async def run_handles(temporal: Client, workflow_id: str) -> list[WorkflowHandle]:
    """A handle of each run of ``workflow_id``, oldest first (each run's start event names the run it continued)."""
    handles: list[WorkflowHandle] = []
    run_id: str | None = None
    while True:
        handle = temporal.get_workflow_handle(workflow_id, run_id=run_id)
        history = await handle.fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        handles.insert(0, temporal.get_workflow_handle(workflow_id, run_id=started.original_execution_run_id))
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            return handles


async def patch_markers(temporal: Client, workflow_id: str) -> list[list[str]]:
    """The ``workflow.patched`` ids each run of ``workflow_id`` recorded (its ``core_patch``
    markers), oldest run first."""
    runs: list[list[str]] = []
    for handle in await run_handles(temporal, workflow_id):
        history = await handle.fetch_history()
        runs.append([
            json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and e.marker_recorded_event_attributes.marker_name == "core_patch"
        ])
    return runs
