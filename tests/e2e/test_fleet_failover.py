"""Two worker processes on one task queue: the one running a session's model call is SIGKILLed, and
the other takes the session on; the turn completes once, its effect written once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest

from agentrt.schemas import ModelRequestStarted
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, kill_hard, session_config, wait_for_event, worker_process, write_script


async def test_a_killed_workers_session_goes_on_on_the_other_worker_of_its_queue_and_its_turn_ends_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "log.txt", "content": "once\n", "append": True}}]},
        {"text": "finished elsewhere", "delay_seconds": 4},
    ])
    client = harness.client_on(harness.task_queue + "-proc")
    sid = harness.new_session_id()
    with (
        worker_process(harness, tmp_path / "first.log") as first,
        worker_process(harness, tmp_path / "second.log") as second,
    ):
        config = session_config(client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
        started = await client.start(config, "append a line, then think slowly")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.round == 2)
        holder = await asyncio.wait_for(_running_the_model_call(harness, sid), 30)
        victim, survivor = (first, second) if holder == first.pid else (second, first)
        assert holder == victim.pid
        kill_hard(victim)
        outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=90)

    assert outcome.status == "completed" and outcome.answer == "finished elsewhere"
    assert (workspace / "log.txt").read_text() == "once\n"
    assert [m.role for _, m in harness.store.messages(sid)] == ["user", "assistant", "tool", "assistant"]
    history = await harness.handle(sid).fetch_history()
    # The model call ran again on the survivor, and no workflow task waited out a dead worker's
    # sticky queue: the retried call freed the session from it (ResumeInterceptor).
    retried = [
        e.activity_task_started_event_attributes for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED and e.activity_task_started_event_attributes.attempt > 1
    ]
    assert [a.identity.split("@")[0] for a in retried] == [str(survivor.pid)]
    assert not [
        e for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
        and e.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
    ]


async def _running_the_model_call(harness: Harness, session_id: str) -> int:
    """The pid of the worker process running the session's model call (its last worker identity)."""
    while True:
        described = await harness.temporal.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(
                namespace=harness.temporal.namespace, execution=WorkflowExecution(workflow_id=f"session-{session_id}")
            )
        )
        for activity in described.pending_activities:
            if activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and activity.activity_type.name == "provider.complete":
                return int(activity.last_worker_identity.split("@")[0])
        await asyncio.sleep(0.1)
