"""An update the server rejects because the worker that took its workflow task did not process it
(``UnprocessedUpdate``) is asked again by the client: the workflow never saw it.

The chaos test met this once under a server restart (``message 3 rejected: ... Workflow Update is
not supported by the worker``). Here a raw poller plays that worker: it takes the workflow task
that carries the update and completes it with nothing, as a worker that dropped the message would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import PollWorkflowTaskQueueRequest, RespondWorkflowTaskCompletedRequest

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.worker import build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

WAIT = 60  # seconds: only so that a broken session fails the test instead of hanging it


async def complete_without_processing(harness: Harness, queue: str) -> list[str]:
    """Take the next workflow task of ``queue`` and complete it with no command and no message;
    returns the ids of the updates it carried."""
    service = harness.temporal.workflow_service
    while True:
        task = await service.poll_workflow_task_queue(
            PollWorkflowTaskQueueRequest(namespace=harness.temporal.namespace, task_queue=TaskQueue(name=queue), identity="drops-updates")
        )
        if task.task_token:
            break
    await service.respond_workflow_task_completed(
        RespondWorkflowTaskCompletedRequest(namespace=harness.temporal.namespace, task_token=task.task_token, identity="drops-updates")
    )
    return [m.protocol_instance_id for m in task.messages]


@pytest.mark.parametrize("call", ["send", "send_and_wait"])
async def test_a_message_whose_update_no_worker_processed_is_sent_again_and_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path, call: str
) -> None:
    sid = harness.new_session_id()
    queue = f"{harness.task_queue}-unprocessed"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        started = await client.start(session_config(client, sid, workspace, script), "first")
        assert (await client.wait(sid, started.turn_id, timeout_seconds=WAIT)).status == "completed"

    # No worker: the message's update waits; the raw poller completes its task without it.
    sent = asyncio.create_task(getattr(client, call)(sid, "second", idempotency_key="second-1"))
    [update_id] = await asyncio.wait_for(complete_without_processing(harness, queue), WAIT)
    assert update_id.startswith({"send": "send_message-", "send_and_wait": "send_and_wait-"}[call])

    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        second = await asyncio.wait_for(sent, WAIT)
        outcome = second if call == "send_and_wait" else await client.wait(sid, second.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "completed" and outcome.answer == "two"
    texts = [m.text for _, m in harness.store.messages(sid) if m.role == "user"]
    assert texts == ["first", "second"]
