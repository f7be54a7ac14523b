"""Pause or resume everything one owner runs, the operator's kill switch (``AgentClient.pause_owner``,
``agentrt pause --owner``, ``POST /v1/pause``): every running session, task and graph whose
``AgentOwner`` is the owner, found in Temporal visibility, each paused through its own update.

Sessions that a task, a graph or a session started are left to their parent, which pauses and
resumes them with itself (signal ``set_paused``). Each workflow still checks the principal itself
(the owner, or one of its operators with a reason); what one refuses is reported, not raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import WorkflowExecution

from agentrt.client._addressed import visibility_literal
from agentrt.client._connection import Connection
from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    GRAPH_ID_PREFIX,
    SESSION_ID_PREFIX,
    SESSION_OWNER,
    SESSION_STATUS,
    SESSION_WORKFLOW,
    TASK_GRAPH_WORKFLOW,
    TASK_ID_PREFIX,
    ClientError,
    GraphNotFound,
    OwnerPauseReport,
    PauseItem,
    PauseItemKind,
    PauseNotAllowed,
    RequestRejected,
    SessionNotFound,
    TaskNotFound,
)

__all__ = ["MAX_OWNER_ITEMS", "OWNER_PAUSE_CONCURRENCY", "change_owner"]

# The most workflows one owner-wide pause or resume acts on, and how many updates it has in flight at once.
MAX_OWNER_ITEMS = 10_000
OWNER_PAUSE_CONCURRENCY = 8

_KINDS: dict[str, tuple[PauseItemKind, str]] = {
    SESSION_WORKFLOW: ("session", SESSION_ID_PREFIX),
    AUTONOMOUS_TASK_WORKFLOW: ("task", TASK_ID_PREFIX),
    TASK_GRAPH_WORKFLOW: ("graph", GRAPH_ID_PREFIX),
}
Change = Callable[[str, str | None], Awaitable[Any]]


def check_standing(connection: Connection, owner: str, reason: str | None, action: str) -> None:
    """Raise ``PauseNotAllowed`` unless the client's principal is ``owner``, or one of the client's
    operators giving a ``reason``."""
    principal = connection.principal
    if principal == owner:
        return
    if principal not in connection.operators:
        raise PauseNotAllowed(principal, owner, action, "it is neither that owner nor an operator")
    if not (reason or "").strip():
        raise PauseNotAllowed(principal, owner, action, "an operator must give a reason")


async def running_of(connection: Connection, owner: str, only_paused: bool) -> list[WorkflowExecution]:
    """``owner``'s running sessions, tasks and graphs (``AgentOwner``), their children left out; only
    those whose ``AgentSessionStatus`` is ``paused`` when ``only_paused``."""
    types = ", ".join(f"'{t}'" for t in _KINDS)
    query = f"{SESSION_OWNER.name} = {visibility_literal(owner)} AND ExecutionStatus = 'Running' AND WorkflowType IN ({types})"
    if only_paused:
        query += f" AND {SESSION_STATUS.name} = 'paused'"
    found: dict[str, WorkflowExecution] = {}
    async for execution in connection.temporal.list_workflows(query, limit=MAX_OWNER_ITEMS):
        if execution.parent_id is None and execution.workflow_type in _KINDS:
            found.setdefault(execution.id, execution)
    return list(found.values())


async def change_owner(
    connection: Connection, owner: str, reason: str | None, *, paused: bool, changes: dict[PauseItemKind, Change]
) -> OwnerPauseReport:
    """Pause (``paused``) or resume every running session, task and graph of ``owner`` with
    ``changes[kind](id, reason)`` (the sub-clients' ``pause`` or ``resume``), at most
    ``OWNER_PAUSE_CONCURRENCY`` at once. Raises ``PauseNotAllowed`` (``check_standing``)."""
    action = "pause" if paused else "resume"
    check_standing(connection, owner, reason, action)
    executions = await running_of(connection, owner, only_paused=not paused)
    gate = asyncio.Semaphore(OWNER_PAUSE_CONCURRENCY)

    async def one(execution: WorkflowExecution) -> PauseItem:
        kind, prefix = _KINDS[execution.workflow_type]
        item_id = execution.id.removeprefix(prefix)
        status = (execution.search_attributes or {}).get(SESSION_STATUS.name) or []
        if paused and "paused" in status:
            return PauseItem(kind=kind, id=item_id, outcome="already")
        async with gate:
            try:
                await changes[kind](item_id, reason)
            except RequestRejected as err:
                return PauseItem(kind=kind, id=item_id, outcome="refused", detail=err.reason)
            except (SessionNotFound, TaskNotFound, GraphNotFound):
                return PauseItem(kind=kind, id=item_id, outcome="gone", detail="it ended meanwhile")
            except ClientError as err:
                return PauseItem(kind=kind, id=item_id, outcome="failed", detail=str(err))
        return PauseItem(kind=kind, id=item_id, outcome="paused" if paused else "resumed")

    items = await asyncio.gather(*(one(e) for e in executions))
    order = {"graph": 0, "task": 1, "session": 2}
    return OwnerPauseReport(owner=owner, action=action, items=sorted(items, key=lambda i: (order[i.kind], i.id)))
