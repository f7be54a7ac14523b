"""Where a watched task's or run's status changes are read, for ``WebhookDispatcher``.

A task or graph started by this build records each status it shows as an event
(``AutonomousTaskStatusChanged``, ``TaskGraphStatusChanged``; its ``...Created`` event says so with
``status_events``), and its events reach the store (``task.record``, ``graph.record``). Those events
are read: every status is notified, however short it lasted, in the order the workflow took them,
numbered as the workflow numbered them. The watch's cursor is then the seq of the last status
event notified.

The workflow's description (``describe``: its ``AgentSessionStatus`` search attribute and how it
closed) is read only for what the log cannot tell: a workflow that closed without recording a final
status (terminated, timed out, failed), a workflow that is gone, and a run whose log records no
status (started by an older build, or whose log is still empty after ``log_wait_seconds``). On that
path a status that lasts less than a poll may be passed over, and the cursor counts status changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from agentrt.gateway._webhook_notes import Note, status_changed
from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    TERMINAL_GRAPH_STATUSES,
    TERMINAL_TASK_STATUSES,
    AutonomousTaskCreated,
    AutonomousTaskStatusChanged,
    Event,
    TaskGraphCreated,
    TaskGraphStatusChanged,
    graph_workflow_id,
    task_workflow_id,
)
from agentrt.store import Store, WebhookWatch

log = logging.getLogger("agentrt.webhooks")

# Status events read per watch and poll; the rest come in the next polls.
STATUS_PAGE = 200
_WORKFLOW_ID = {"task": task_workflow_id, "run": graph_workflow_id}
_TERMINAL = {"task": TERMINAL_TASK_STATUSES, "run": TERMINAL_GRAPH_STATUSES}
_INITIAL_STATUS = {"task": "waiting", "run": "planning"}
_STATUS_TYPE = {"task": "AutonomousTaskStatusChanged", "run": "TaskGraphStatusChanged"}

Describe = Callable[[str], Awaitable[WorkflowExecutionDescription | None]]


@dataclass(frozen=True)
class StatusStep:
    """What one read of a watch found: ``notes`` to queue, the watch's new ``cursor`` and
    ``last_status``, and whether the watch ``ended``."""

    notes: list[Note]
    cursor: int
    last_status: str | None
    ended: bool


class StatusReader:
    """Reads the status changes a task or run watch owes (``step``). ``describe`` gives a workflow's
    description by workflow id (None: no such workflow); ``log_wait_seconds``: how long an empty
    event log holds a watch before the description is read instead (a new run writes its first
    events at once; a graph from before ``frame-v1`` never does); ``closed_check_seconds``: how often
    a quiet run's workflow is described to see whether it closed without a final status."""

    def __init__(self, store: Store, describe: Describe, *, log_wait_seconds: float, closed_check_seconds: float) -> None:
        self._store = store
        self._describe = describe
        self._log_wait = log_wait_seconds
        self._closed_check = closed_check_seconds
        self._owners: dict[str, str] = {}  # watch id -> owner, for a run whose log records its statuses
        self._empty_since: dict[str, float] = {}  # watch id -> when its log was first seen empty (monotonic)
        self._closed_checked: dict[str, float] = {}  # watch id -> when its workflow was last described

    def forget(self, watch_id: str) -> None:
        """Drop what is kept about an ended watch."""
        for kept in (self._owners, self._empty_since, self._closed_checked):
            kept.pop(watch_id, None)

    async def step(self, watch: WebhookWatch) -> StatusStep | None:
        """The notes a task or run watch owes now and where its cursor goes; None: nothing to do."""
        owner = self._owners.get(watch.watch_id)
        if owner is None:
            first = await asyncio.to_thread(self._events, watch, 0, 1)
            created = first[0] if first else None
            if isinstance(created, AutonomousTaskCreated | TaskGraphCreated) and created.status_events:
                owner = self._owners[watch.watch_id] = created.owner
            elif not first:
                began = self._empty_since.setdefault(watch.watch_id, time.monotonic())
                if time.monotonic() - began < self._log_wait:
                    return None  # its first write is under way
        if owner is not None:
            return await self._from_log(watch, owner)
        return await self._from_description(watch)

    def _events(self, watch: WebhookWatch, since_seq: int, limit: int, *, statuses: bool = False) -> list[Event]:
        read = self._store.task_events if watch.kind == "task" else self._store.graph_events
        return read(watch.target_id, since_seq, limit, types=[_STATUS_TYPE[watch.kind]] if statuses else None)

    async def _from_log(self, watch: WebhookWatch, owner: str) -> StatusStep | None:
        """The status events after the cursor (a seq), each one notification numbered as recorded."""
        events = await asyncio.to_thread(self._events, watch, watch.cursor, STATUS_PAGE, statuses=True)
        changes = [e for e in events if isinstance(e, AutonomousTaskStatusChanged | TaskGraphStatusChanged)]
        if not changes:
            return await self._closed_otherwise(watch, owner)
        terminal = _TERMINAL[watch.kind]
        notes = [
            status_changed(watch.kind, watch.target_id, e.change, e.status, e.previous, owner, e.status in terminal)
            for e in changes
        ]
        last = changes[-1]
        return StatusStep(notes, last.seq, last.status, ended=last.status in terminal)

    async def _closed_otherwise(self, watch: WebhookWatch, owner: str) -> StatusStep | None:
        """A quiet run's workflow described (at most every ``closed_check_seconds``): gone, or closed
        with no final status in its log (terminated, timed out), it ends the watch."""
        now = time.monotonic()
        if now - self._closed_checked.get(watch.watch_id, float("-inf")) < self._closed_check:
            return None
        self._closed_checked[watch.watch_id] = now
        description = await self._describe(_WORKFLOW_ID[watch.kind](watch.target_id))
        if description is None:
            return _gone(watch)
        if description.close_time is None:
            return None
        if await asyncio.to_thread(self._events, watch, watch.cursor, 1, statuses=True):
            return None  # its last statuses reached the store meanwhile: the next poll reads them
        status = _status_of(description, watch.last_status or _INITIAL_STATUS[watch.kind])
        if status == watch.last_status:
            return StatusStep([], watch.cursor, status, ended=True)
        last = await asyncio.to_thread(self._events, watch, watch.cursor - 1, 1, statuses=True) if watch.cursor else []
        change = last[0].change + 1 if last and isinstance(last[0], AutonomousTaskStatusChanged | TaskGraphStatusChanged) else 1
        note = status_changed(watch.kind, watch.target_id, change, status, watch.last_status, owner, True)
        return StatusStep([note], watch.cursor, status, ended=True)

    async def _from_description(self, watch: WebhookWatch) -> StatusStep | None:
        """The status its workflow shows now (``AgentSessionStatus``), one notification when it
        differs from the last one; the cursor counts the changes seen."""
        description = await self._describe(_WORKFLOW_ID[watch.kind](watch.target_id))
        if description is None:
            return _gone(watch)
        status = _status_of(description, _INITIAL_STATUS[watch.kind])
        closed = description.close_time is not None
        ended = closed or status in _TERMINAL[watch.kind]
        if status == watch.last_status:
            return StatusStep([], watch.cursor, status, ended=True) if ended else None
        cursor = watch.cursor + 1
        owner = description.typed_search_attributes.get(SESSION_OWNER)
        note = status_changed(watch.kind, watch.target_id, cursor, status, watch.last_status, owner, closed)
        return StatusStep([note], cursor, status, ended=ended)


def _gone(watch: WebhookWatch) -> StatusStep:
    """The watch ends, as it stands: its workflow is gone."""
    log.warning("webhook watch %s %s: its workflow is gone; the watch ends", watch.kind, watch.target_id)
    return StatusStep([], watch.cursor, watch.last_status, ended=True)


def _status_of(description: WorkflowExecutionDescription, initial: str) -> str:
    """The workflow's ``AgentSessionStatus`` (``initial`` before it set one), or how it closed when
    it closed otherwise than completing (``terminated``, ``timed_out``, ``failed``, ``canceled``)."""
    status = description.typed_search_attributes.get(SESSION_STATUS) or initial
    if description.close_time is not None and description.status not in (None, WorkflowExecutionStatus.COMPLETED):
        status = description.status.name.lower()
    return status
