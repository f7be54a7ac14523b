"""An update the server rejects because the worker that took its workflow task did not process it
(``UnprocessedUpdate``), or aborts because that task failed (``WorkflowNotReady``: a run continuing
as new while the update came is one way), is asked again by the client: the workflow never saw it.

The chaos test met this once under a server restart (``message 3 rejected: ... Workflow Update is
not supported by the worker``). Here a raw poller plays that worker: it takes the workflow task
that carries the update and completes it with nothing, as a worker that dropped the message would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.command.v1 import Command, ScheduleActivityTaskCommandAttributes
from temporalio.api.enums.v1 import CommandType
from temporalio.api.workflowservice.v1 import PollWorkflowTaskQueueRequest, RespondWorkflowTaskCompletedRequest
from temporalio.service import RPCError

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.worker import build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

WAIT = 60  # seconds: only so that a broken session fails the test instead of hanging it


async def complete_without_processing(harness: Harness, queue: str, *, fail: bool = False) -> list[str]:
    """Take the next workflow task of ``queue`` and complete it with no command and no message (or,
    with ``fail``, with a command the server refuses, so that the completion fails as a persistence
    error would fail it); returns the ids of the updates it carried."""
    service = harness.temporal.workflow_service
    while True:
        task = await service.poll_workflow_task_queue(
            PollWorkflowTaskQueueRequest(namespace=harness.temporal.namespace, task_queue=TaskQueue(name=queue), identity="drops-updates")
        )
        if task.task_token:
            break
    if fail:
        malformed = Command(
            command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
            schedule_activity_task_command_attributes=ScheduleActivityTaskCommandAttributes(),
        )
        try:
            await service.respond_workflow_task_completed(RespondWorkflowTaskCompletedRequest(
                namespace=harness.temporal.namespace, task_token=task.task_token, identity="drops-updates", commands=[malformed],
            ))
        except RPCError:
            pass  # refused, as meant: the task failed while it was being completed
    else:
        await service.respond_workflow_task_completed(
            RespondWorkflowTaskCompletedRequest(namespace=harness.temporal.namespace, task_token=task.task_token, identity="drops-updates")
        )
    return [m.protocol_instance_id for m in task.messages]


async def session_after_its_first_turn(harness: Harness, workspace: Path, tmp_path: Path, queue: str) -> tuple[str, AgentClient]:
    """A session on ``queue`` whose first turn ("first" -> "one") completed; its worker stopped since.
    Its script answers "two" next."""
    sid = harness.new_session_id()
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        started = await client.start(session_config(client, sid, workspace, script), "first")
        assert (await client.wait(sid, started.turn_id, timeout_seconds=WAIT)).status == "completed"
    return sid, client


async def assert_sent_once_a_worker_runs(
    harness: Harness, client: AgentClient, sid: str, queue: str, call: str, sent: asyncio.Task[Any]
) -> None:
    """Once a worker runs the session again, the client's ``call`` of "second" (``sent``) answers
    "two", and the session holds each message once."""
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        second = await asyncio.wait_for(sent, WAIT)
        outcome = second if call == "send_and_wait" else await client.wait(sid, second.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "completed" and outcome.answer == "two"
    texts = [m.text for _, m in harness.store.messages(sid) if m.role == "user"]
    assert texts == ["first", "second"]


@pytest.mark.parametrize("call", ["send", "send_and_wait"])
async def test_a_message_whose_update_no_worker_processed_is_sent_again_and_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path, call: str
) -> None:
    queue = f"{harness.task_queue}-unprocessed"
    sid, client = await session_after_its_first_turn(harness, workspace, tmp_path, queue)

    # No worker: the message's update waits; the raw poller completes its task without it.
    sent = asyncio.create_task(getattr(client, call)(sid, "second", idempotency_key="second-1"))
    [update_id] = await asyncio.wait_for(complete_without_processing(harness, queue), WAIT)
    assert update_id.startswith({"send": "send_message-", "send_and_wait": "send_and_wait-"}[call])

    await assert_sent_once_a_worker_runs(harness, client, sid, queue, call, sent)


@pytest.mark.parametrize("call", ["send", "send_and_wait"])
async def test_a_message_whose_workflow_task_failed_before_the_session_saw_it_is_sent_again_and_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path, call: str
) -> None:
    """Without an idempotency key too: the server aborted the update (``WorkflowNotReady``: its workflow
    task failed while being completed; under load a persistence timeout does it), so the session
    never saw it. Found by bench.rolling_deploy, where a send met a run continuing as new."""
    queue = f"{harness.task_queue}-aborted"
    sid, client = await session_after_its_first_turn(harness, workspace, tmp_path, queue)

    sent = asyncio.create_task(getattr(client, call)(sid, "second"))
    [update_id] = await asyncio.wait_for(complete_without_processing(harness, queue, fail=True), WAIT)
    assert update_id.startswith("send")

    await assert_sent_once_a_worker_runs(harness, client, sid, queue, call, sent)
