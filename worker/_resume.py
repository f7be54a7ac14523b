"""ResumeInterceptor: a retry that follows a dead worker frees its workflow from that worker's sticky queue.

After a worker dies mid-call, Temporal retries the call once its heartbeat timeout passes,
and another worker runs it. Its result schedules the workflow's next workflow task, which
Temporal sends to the workflow's sticky queue: the dead worker's. It waits there for the
sticky schedule-to-start timeout before any worker may take it. The interceptor spares
that wait: when a retried attempt's previous attempt ran in another worker process (its
last heartbeat names that process, ``agentrt.activities._attempts``) or sent no heartbeat,
it asks Temporal to reset the workflow's sticky queue (``ResetStickyTaskQueue``, one RPC)
before the attempt runs, so the next workflow task goes to the task queue at once. A
reset workflow replays its history on the worker that takes the task, which costs that
worker a replay and nothing else; first attempts and local activities are untouched.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from agentrt.activities._attempts import previous_attempt_elsewhere

__all__ = ["ResumeInterceptor"]

logger = logging.getLogger(__name__)


class ResumeInterceptor(Interceptor):
    """Resets the workflow's sticky queue before an activity attempt that follows one run by
    another (possibly dead) worker process. ``client`` is the worker's client (its namespace)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ResumeInbound(next, self._client)


class _ResumeInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, client: Client) -> None:
        super().__init__(next)
        self._client = client

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.workflow_id and previous_attempt_elsewhere(info):
            await reset_sticky_queue(self._client, info.workflow_namespace or info.namespace, info.workflow_id, info.workflow_run_id)
        return await self.next.execute_activity(input)


async def reset_sticky_queue(client: Client, namespace: str, workflow_id: str, run_id: str | None) -> bool:
    """Ask Temporal to send the workflow's next workflow task to its task queue, not a sticky
    queue (``ResetStickyTaskQueue``). Returns False, after logging, when the RPC fails: the
    task then waits out the sticky schedule-to-start timeout as it would without the reset."""
    request = ResetStickyTaskQueueRequest(
        namespace=namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or "")
    )
    try:
        await client.workflow_service.reset_sticky_task_queue(request)
    except RPCError as err:
        logger.warning("could not reset the sticky queue of workflow %s: %s", workflow_id, err)
        return False
    return True
