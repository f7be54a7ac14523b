"""A session, task or graph started by any Temporal client with an input that does not validate
ends as a failed workflow that says why (``InvalidWorkflowInput``, worker/_input_check.py), instead
of a first workflow task that fails at every attempt for as long as the run lives."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    SESSION_WORKFLOW,
    TASK_GRAPH_WORKFLOW,
    AutonomousTaskInput,
    GraphConfig,
    GraphSpec,
    SessionInput,
    TaskConfig,
    TaskGraphInput,
)
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

BOUND = 60  # seconds: only so that a broken run fails the test instead of hanging it


async def failed_with(
    harness: Harness, workflow_type: str, body: dict[str, Any], workflow_id: str | None = None
) -> tuple[ApplicationError, int]:
    """Start ``workflow_type`` with ``body`` as plain JSON (as `temporal workflow start --input`
    does); the ApplicationError it failed with, and the number of its failed workflow tasks."""
    handle = await harness.temporal.start_workflow(
        workflow_type, body, id=workflow_id or f"invalid-{uuid.uuid4().hex}", task_queue=harness.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), BOUND)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    history = await handle.fetch_history()
    failed_tasks = sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events)
    return cause, failed_tasks


async def test_a_session_with_an_approval_timeout_of_1e308_fails_naming_the_field_and_the_worker_serves_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = harness.client_on(harness.task_queue)
    script = write_script(tmp_path, [{"text": "still here"}])
    body = SessionInput(config=session_config(client, harness.new_session_id(), workspace, script)).model_dump(mode="json")
    body["config"]["approval_timeout_seconds"] = 1e308

    error, failed_tasks = await failed_with(harness, SESSION_WORKFLOW, body)
    assert error.type == "InvalidWorkflowInput" and error.non_retryable
    assert "not a valid SessionInput: config.approval_timeout_seconds: Input should be less than or equal to" in error.message
    assert failed_tasks == 0
    # The worker that refused it serves the next session.
    good = session_config(client, harness.new_session_id(), workspace, script)
    started = await client.start(good, "hello")
    assert (await client.wait(good.session_id, started.turn_id)).answer == "still here"


@pytest.mark.parametrize("body", ["not json at all", ["a", "list"], {"config": "a string"}, {}])
async def test_a_session_whose_input_is_not_an_object_of_its_shape_fails_saying_so(harness: Harness, body: Any) -> None:
    error, failed_tasks = await failed_with(harness, SESSION_WORKFLOW, body)
    assert (error.type, failed_tasks) == ("InvalidWorkflowInput", 0)
    assert error.message.startswith("the workflow's input is not a valid SessionInput: ")


async def test_a_task_and_a_graph_with_invalid_inputs_fail_naming_the_fields(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    config = TaskConfig(owner=OWNER, task_id="t-invalid", goal="g", workspace=str(workspace), profile="scripted")
    task = AutonomousTaskInput(config=config).model_dump(mode="json")
    task["config"]["max_sessions"] = 0
    del task["config"]["goal"]
    error, failed_tasks = await failed_with(harness, AUTONOMOUS_TASK_WORKFLOW, task)
    assert (error.type, failed_tasks) == ("InvalidWorkflowInput", 0)
    assert "not a valid AutonomousTaskInput: " in error.message
    assert "config.max_sessions: Input should be greater than or equal to 1" in error.message
    assert "config.goal: Field required" in error.message

    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "p"}]})
    graph_config = GraphConfig(owner=OWNER, graph_id="g-invalid", workspace=str(workspace), profile="scripted", graph=spec)
    graph = TaskGraphInput(config=graph_config).model_dump(mode="json")
    graph["config"]["graph"]["nodes"] = "a, then b"
    error, failed_tasks = await failed_with(harness, TASK_GRAPH_WORKFLOW, graph)
    assert (error.type, failed_tasks) == ("InvalidWorkflowInput", 0)
    assert error.message.startswith("the workflow's input is not a valid TaskGraphInput: config.graph.nodes: Input should be a valid")


async def test_a_continuing_runs_state_this_build_cannot_read_waits_for_a_worker_that_can(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """An input with ``state`` is a run continued as new (perhaps by another build): not failed,
    its workflow task fails and is retried, so a worker that reads it (a rollback) carries on."""
    client = harness.client_on(harness.task_queue)
    body = SessionInput(config=session_config(client, harness.new_session_id(), workspace, "unused")).model_dump(mode="json")
    body["state"] = {"run": "the second", "from": "a build of tomorrow"}
    handle = await harness.temporal.start_workflow(
        SESSION_WORKFLOW, body, id=f"invalid-{uuid.uuid4().hex}", task_queue=harness.task_queue
    )
    try:
        async def task_failed() -> None:
            while not any(
                e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in (await handle.fetch_history()).events
            ):
                await asyncio.sleep(0.1)

        await asyncio.wait_for(task_failed(), BOUND)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    finally:
        await handle.terminate("test over")


@pytest.mark.parametrize(("field", "value"), [("model_timeout_seconds", 1e308), ("heartbeat_timeout_seconds", -1.0)])
async def test_a_session_with_a_call_timeout_no_activity_can_have_fails_naming_the_field(
    harness: Harness, workspace: Path, tmp_path: Path, field: str, value: float
) -> None:
    """1e308 s overflows the activity's ``timedelta``, and a negative or zero timeout is one the
    server refuses: either failed every workflow task of the run from its first call on."""
    client = harness.client_on(harness.task_queue)
    script = write_script(tmp_path, [{"text": "never"}])
    sid = harness.new_session_id()
    body = SessionInput(config=session_config(client, sid, workspace, script, prompt="hi")).model_dump(mode="json")
    body["config"][field] = value

    error, failed_tasks = await failed_with(harness, SESSION_WORKFLOW, body, workflow_id=f"session-{sid}")
    assert (error.type, failed_tasks) == ("InvalidWorkflowInput", 0)
    assert f"config.{field}: Input should be " in error.message
