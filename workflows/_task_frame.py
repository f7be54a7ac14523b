"""What an autonomous task's run shows and records of itself, and when it continues as new: its
journal of events, the status board and status log (``AutonomousTaskStatusChanged``), the store
writes (``task.record``: staged events, the latest checkpoint, the task's row) and the next run
(``NextRun``: Temporal suggests it, or a newer build is current).

Workflow code only; ``TaskFrame`` is held by ``AutonomousTaskWorkflow``, made in the run's first
activation, where it asks the frame's patches in the order a task always has: ``console-v1``,
``status-events-v1``, ``regular-activities-v1``, ``frame-v1``, ``upgrade-at-turn-boundary-v1``.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn

from temporalio import workflow

from agentrt.schemas import (
    AutonomousTaskInput,
    AutonomousTaskStatusChanged,
    Event,
    TaskCheckpoint,
    TaskConfig,
    TaskRecordInput,
    TaskState,
    TaskStatus,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _task_parts as parts
from agentrt.workflows._children import FRAME_PATCH
from agentrt.workflows._frame import STATUS_EVENTS_PATCH, NextRun, StatusBoard, StatusLog, frame_patches
from agentrt.workflows._journal import Journal


class TaskFrame:
    """The journal, status board, status log, store writes and next run of the task with ``config``
    and ``state``. ``local_activities``: the store writes and cron lookups are local activities (runs
    from before ``regular-activities-v1``: the SDK's local-activity/query race); ``parent_close``:
    what a child session gets when the task closes (``REQUEST_CANCEL`` from ``frame-v1``)."""

    def __init__(self, config: TaskConfig, state: TaskState) -> None:
        self._config = config
        self._state = state
        self.journal = Journal(state)
        self.patches = frame_patches()  # none asked by a run started pinned
        self.board = StatusBoard("task", config.owner, config.profile, self.patches)
        self.statuses = StatusLog(self.patches.has(STATUS_EVENTS_PATCH), state, AutonomousTaskStatusChanged, self.emit)
        self.local_activities = not self.patches.has(options.REGULAR_ACTIVITIES_PATCH)
        recorded = self.patches.has(FRAME_PATCH)
        self.parent_close = workflow.ParentClosePolicy.REQUEST_CANCEL if recorded else workflow.ParentClosePolicy.TERMINATE
        self.next_run = NextRun(self.patches)  # asks upgrade-at-turn-boundary-v1: a newer build takes the next run
        self.checkpoint_unwritten: TaskCheckpoint | None = None
        self._write_lock = asyncio.Lock()  # one store write at a time: the run's and the updates'

    def emit(self, event: Event) -> None:
        self.journal.emit(event, workflow.now())

    def set_status(self, status: TaskStatus) -> None:
        """Record ``status`` (an event when it changed), show the details, write the search attributes that changed."""
        self._state.status = status
        self.statuses.seen(status)
        details = parts.current_details(self._config, self._state, workflow.now())
        self.board.set(status, details, cost_usd=self._state.spend.cost_usd)

    async def flush(self) -> None:
        """Write staged events, the latest checkpoint and the task's row to the store (activity
        ``task.record``; a local one in runs from before ``regular-activities-v1``)."""
        async with self._write_lock:
            await self._write()

    async def _write(self) -> None:
        self.set_status(self._state.status)
        events = self.journal.take()
        config, checkpoint, state = self._config, self.checkpoint_unwritten, self._state
        record = TaskRecordInput(task_id=config.task_id, owner=config.owner, goal=state.goal, status=state.status,
                                 workspace=config.workspace, spend=parts.spend_now(state, workflow.now()), events=events,
                                 checkpoint=checkpoint)
        await options.TASK_RECORD.execute(record, local=self.local_activities, summary=f"store {len(events)} task events")
        self.journal.written(events)
        if self.checkpoint_unwritten is checkpoint:
            self.checkpoint_unwritten = None

    async def continue_as_new(self) -> NoReturn:
        """Once every handler has finished and what is staged is written: the next run, with the state."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self.flush()
        self._state.run += 1
        self.next_run.go(AutonomousTaskInput(config=self._config, state=self._state))
