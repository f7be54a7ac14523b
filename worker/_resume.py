"""ResumeInterceptor: a retry that follows a dead worker frees its workflow from that worker's sticky queue.

After a worker dies mid-call, Temporal retries the call once its heartbeat timeout passes,
and another worker runs it. Its result schedules the workflow's next workflow task, which
Temporal sends to the workflow's sticky queue: the dead worker's. It waits there for the
sticky schedule-to-start timeout before any worker may take it. The interceptor spares
that wait: when a retried attempt's previous attempt ran in another worker process (its
last heartbeat names that process, ``agentrt.activities._attempts``) or sent no heartbeat,
it asks Temporal to reset the workflow's sticky queue (``ResetStickyTaskQueue``, one RPC)
while the attempt runs, and the attempt's result waits for that (at most ``RESET_TIMEOUT``),
so the next workflow task goes to the task queue at once. A reset session replays its
history on the worker that takes the task, which costs that worker a replay and nothing
else; a call that failed before its first heartbeat (half a second) resets on its retry
too, since nothing says where it ran. Only the session's calls that heartbeat (model and tool
calls, store writes, its preparation: ``RESUMING_ACTIVITIES``) of ``SessionWorkflow`` are looked at.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from agentrt.activities import previous_attempt_elsewhere
from agentrt.schemas import (
    CONTEXT_COMPACT,
    PROVIDER_COMPLETE,
    SESSION_PREPARE,
    SESSION_WORKFLOW,
    STORE_APPEND,
    TOOL_EXECUTE,
)

__all__ = ["ResumeInterceptor"]

logger = logging.getLogger(__name__)

# The session's calls that heartbeat (with the worker process's id) and so can tell a dead worker.
RESUMING_ACTIVITIES = frozenset({PROVIDER_COMPLETE, TOOL_EXECUTE, CONTEXT_COMPACT, STORE_APPEND, SESSION_PREPARE})
# How long the reset may take; past it the call's result goes out anyway.
RESET_TIMEOUT = timedelta(seconds=1)


class ResumeInterceptor(Interceptor):
    """Resets a session's sticky queue while a retried model, tool or store call runs whose previous
    attempt ran in another (possibly dead) worker process or sent no heartbeat. Activities of
    other workflows, first attempts and local activities pass untouched. ``client`` is the
    worker's client (its namespace)."""

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
        if not (
            info.workflow_type == SESSION_WORKFLOW
            and info.activity_type in RESUMING_ACTIVITIES
            and info.workflow_id
            and previous_attempt_elsewhere(info)
        ):
            return await self.next.execute_activity(input)
        # Beside the call, not before it: the reset must land before the result schedules the
        # next workflow task, and must not hold up the call (its heartbeats) meanwhile.
        reset = asyncio.create_task(
            reset_sticky_queue(self._client, info.workflow_namespace or info.namespace, info.workflow_id, info.workflow_run_id)
        )
        try:
            return await self.next.execute_activity(input)
        finally:
            await asyncio.wait({reset}, timeout=RESET_TIMEOUT.total_seconds())


async def reset_sticky_queue(client: Client, namespace: str, workflow_id: str, run_id: str | None) -> None:
    """Ask Temporal to send the workflow's next workflow task to its task queue, not a sticky
    queue (``ResetStickyTaskQueue``, bounded by ``RESET_TIMEOUT``). Never raises: a failure is
    logged, and the task then waits out the sticky schedule-to-start timeout as it would
    without the reset."""
    request = ResetStickyTaskQueueRequest(
        namespace=namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or "")
    )
    try:
        await client.workflow_service.reset_sticky_task_queue(request, timeout=RESET_TIMEOUT)
    except Exception as err:  # noqa: BLE001 - an optimisation: never the reason a call fails
        logger.warning("could not reset the sticky queue of workflow %s: %s", workflow_id, err)
