"""Pieces of ``AgentClient``'s starts and ``send_and_wait`` calls: the session's start for
update-with-start, and the outcome of a ``send_and_wait`` update asked again."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from agentrt.client._turns import update_failure_cause
from agentrt.schemas import SESSION_OWNER, SESSION_STATUS, RequestRejected, SessionConfig, SessionInput, TurnOutcome
from agentrt.workflows.session import SessionWorkflow, workflow_id_for

# The server's default ``limit.maxIDLength``: a longer workflow id fails a start with a bare RPC error.
MAX_WORKFLOW_ID_CHARS = 1000


# A session's workflow task timeout (Temporal's default is 10 s). A task a worker held when it
# died (with the local activities it ran: store writes, fast read-only tools) is given to
# another worker only after this, so it bounds how soon a killed worker's session resumes
# (``python -m bench.recovery``). A live worker completes a task in milliseconds (a replay of
# a session's whole history after continue-as-new keeps it short: well under a second); a
# local activity that runs longer heartbeats the task, so it does not time out.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)


def start_operation(config: SessionConfig, task_queue: str) -> WithStartWorkflowOperation:
    """The session's start, for update-with-start: its id, search attributes and summaries.
    Raises ``RequestRejected`` (nothing started) for a session id too long for a workflow id."""
    if len(workflow_id_for(config.session_id)) > MAX_WORKFLOW_ID_CHARS:
        limit = MAX_WORKFLOW_ID_CHARS - len(workflow_id_for(""))
        raise RequestRejected(
            config.session_id[:40] + "...", "start",
            f"a session id may have at most {limit} characters (Temporal's workflow id limit), this one has "
            f"{len(config.session_id)}",
        )
    return WithStartWorkflowOperation(
        SessionWorkflow.run,
        SessionInput(config=config),
        id=workflow_id_for(config.session_id),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # An ended session is not restarted under its id: its transcript positions would collide.
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        task_timeout=WORKFLOW_TASK_TIMEOUT,
        static_summary=f"session {config.session_id} · {config.profile}",
        static_details=f"owner `{config.owner}` · workspace `{config.workspace}`",
        # Set here once: the workflow writes search attributes only when they change.
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SESSION_OWNER, config.owner), SearchAttributePair(SESSION_STATUS, "idle")]
        ),
    )


async def ended_session(session_id: str, operation: WithStartWorkflowOperation) -> RequestRejected:
    """The error for a start under the id of a session that has ended."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await operation.workflow_handle()  # retrieve the start's own failure: no "never retrieved" warning
    return RequestRejected(session_id, "start", "a session with this id has ended; start a new session")


async def update_result(handle: WorkflowHandle, session_id: str, update_id: str) -> TurnOutcome:
    """The outcome of the accepted ``send_and_wait`` update ``update_id``, asked again while its
    RPCs time out (the update is in history: asking again finds the same one). Raises
    ``RequestRejected`` if the update failed, ``asyncio.CancelledError`` when cancelled."""
    update = handle.get_update_handle(update_id, result_type=TurnOutcome)
    while True:
        try:
            return await update.result()
        except WorkflowUpdateFailedError as err:
            raise RequestRejected(session_id, "send_and_wait", update_failure_cause(err)) from err
        except WorkflowUpdateRPCTimeoutOrCancelledError as err:
            raise_if_cancelled(err)


def raise_if_cancelled(err: Exception) -> None:
    """Raise ``asyncio.CancelledError`` when the current task is being cancelled (the SDK reports
    a cancelled update call as a timeout)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from err
