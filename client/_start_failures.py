"""Sessions that failed at their start because their worker lacks a name they use: the typed
error (``AgentNotRegistered``, ``ToolNotRegistered``) a client raises instead of a bare
"the session ended" once it finds the workflow failed so."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from agentrt.schemas import AgentNotRegistered, ConfigurationError, ToolNotRegistered

# How long a client waits for a closed workflow's result (seconds): it is there already.
RESULT_SECONDS = 10.0


def start_failure_from(cause: BaseException | None) -> ConfigurationError | None:
    """The typed error a session workflow's failure ``cause`` stands for, or None."""
    if not isinstance(cause, ApplicationError) or cause.type not in ("AgentNotRegistered", "ToolNotRegistered"):
        return None
    details: dict[str, Any] = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
    queue = str(details.get("task_queue", "?"))
    if cause.type == "AgentNotRegistered":
        return AgentNotRegistered(str(details.get("agent", "?")), queue, [str(n) for n in details.get("registered", [])])
    return ToolNotRegistered([str(n) for n in details.get("tools", [])], queue)


async def start_failure(handle: WorkflowHandle[Any, Any]) -> ConfigurationError | None:
    """The typed error of the closed session workflow ``handle`` when it failed for a missing agent
    or tool; None for any other end (or when its result cannot be read)."""
    try:
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.FAILED:
            return None  # running (a refused update), or ended otherwise
        await asyncio.wait_for(handle.result(follow_runs=False), RESULT_SECONDS)
    except WorkflowFailureError as err:
        return start_failure_from(err.cause)
    except Exception:  # noqa: BLE001 - any other end: the caller reports it as before
        return None
    return None
