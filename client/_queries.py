"""Queries that a worker refused for having come ahead of a workflow task are asked again.

A worker refuses a legacy query that reached it before a workflow task the query waits behind
(``LegacyQueryGuard``, worker/_query_guard.py): the query fails with ``QUERY_RAN_AHEAD`` and
succeeds once that task ran, which takes at most the sticky schedule-to-start timeout (a task
on a dead worker's sticky queue moves on after it; agentrt's workers set 3 s), or, for a run
that ended while a task was pending, once the guard sees no task is coming (15 s).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowQueryFailedError

from agentrt.schemas import QUERY_RAN_AHEAD

__all__ = ["query_workflow"]

# The pauses before asking again (seconds): 18.85 s in all, past the guard's 15 s.
RETRY_PAUSES = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0)


async def query_workflow(handle: WorkflowHandle[Any, Any], query: Any, *args: Any, **kwargs: Any) -> Any:
    """``handle.query(query, *args, **kwargs)``, asked again after each ``RETRY_PAUSES`` pause while a
    worker refuses it with ``QUERY_RAN_AHEAD``. Raises what ``handle.query`` raises otherwise, and
    the last refusal's ``WorkflowQueryFailedError`` when every ask was refused."""
    for pause in (*RETRY_PAUSES, None):
        try:
            return await handle.query(query, *args, **kwargs)
        except WorkflowQueryFailedError as err:
            if pause is None or QUERY_RAN_AHEAD not in str(err):
                raise
        await asyncio.sleep(pause)
