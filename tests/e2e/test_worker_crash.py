"""A worker killed with SIGKILL in the middle of a turn: the turn completes on a new worker, effects once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import WorkflowHistory

from agentrt.schemas import PROVIDER_COMPLETE, ModelRequestStarted, PermissionRequested, TurnEnded, TurnOutcome
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, kill_hard, session_config, wait_for_event, worker_process, write_script


async def test_worker_killed_mid_turn_is_replaced_and_the_turn_completes_with_the_file_written_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "log.txt", "content": "once\n", "append": True}}]},
        {"text": "finished after the crash", "delay_seconds": 4},
    ])
    client = harness.client_on(harness.task_queue + "-proc")
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        config = session_config(client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
        started = await client.start(config, "append a line, then think slowly")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.round == 2)
        await asyncio.sleep(1.0)  # the slow model call is in flight
        kill_hard(first)
    with worker_process(harness, log):
        # The store, not Temporal: a query would itself move the session off the dead worker's sticky queue.
        await asyncio.wait_for(_turn_ended_in_store(harness, sid, started.turn_id), timeout=120)
        history = await harness.handle(sid).fetch_history()
        outcome: TurnOutcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=120)

    assert outcome.status == "completed"
    assert outcome.answer == "finished after the crash"
    assert (workspace / "log.txt").read_text() == "once\n"
    roles = [m.role for _, m in harness.store.messages(sid)]
    assert roles == ["user", "assistant", "tool", "assistant"]
    # The retried model call ran on the new worker and freed the session from the dead
    # worker's sticky queue (ResumeInterceptor): no workflow task waited there for the sticky
    # schedule-to-start timeout.
    history = await harness.handle(sid).fetch_history()
    assert _retried(history, PROVIDER_COMPLETE)
    assert not [
        e for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
        and e.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
    ]


async def _turn_ended_in_store(harness: Harness, session_id: str, turn_id: str) -> None:
    while not any(isinstance(e, TurnEnded) for e in await asyncio.to_thread(harness.store.turn_events, session_id, turn_id)):
        await asyncio.sleep(0.1)


def _retried(history: WorkflowHistory, activity_type: str) -> bool:
    """Whether an attempt after the first of an ``activity_type`` activity started."""
    types = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    return any(
        e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.attempt > 1
        and types[e.activity_task_started_event_attributes.scheduled_event_id] == activity_type
        for e in history.events
    )


async def test_worker_killed_during_an_approval_wait_runs_the_approved_call_exactly_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "log.txt", "content": "approved\n", "append": True}}]},
        {"text": "done"},
    ])
    client = harness.client_on(harness.task_queue + "-proc")
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        started = await client.start(session_config(client, sid, workspace, script, heartbeat_timeout_seconds=2.0), "go")
        requested = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
        kill_hard(first)
        # Decided while no worker runs: the signal waits in history.
        body = {"request_id": requested.request.request_id, "decision": "grant", "principal": client.principal}
        await harness.handle(sid).signal("permission_decision", body)
        await harness.handle(sid).signal("permission_decision", body)
    with worker_process(harness, log):
        outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=120)
    assert outcome.status == "completed"
    assert (workspace / "log.txt").read_text() == "approved\n"
