"""An autonomous task's carried state, its workflow input and its store write: the types that
hold ``Event``s (``_autonomy`` is imported by ``_events``, so they cannot live there)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from agentrt.schemas._autonomy import TaskCheckpoint, TaskConfig, TaskStatus, UsageReceipt
from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, BudgetCrossing, Spend
from agentrt.schemas._events import Event

__all__ = [
    "AutonomousTaskInput",
    "TaskRecordInput",
    "TaskState",
]


class TaskState(Model):
    """Everything a task carries through continue-as-new (the config travels beside it).

    ``goal``, ``criteria``, ``budget`` and ``max_sessions`` start from the config and change with
    ``amend_goal`` and ``raise_budget``; ``spend`` is the sum of ``receipts``; ``checkpoints`` keeps
    the latest ``CHECKPOINTS_KEPT`` (the store has them all); ``continue_now``: the last session
    stopped at its round limit, so the next runs without waiting for the schedule; ``dismissed``: see below.
    """

    run: int = 1
    seq: int = 0
    status: TaskStatus = "waiting"
    goal: str = ""
    criteria: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    max_sessions: int = 0
    sessions_started: int = 0
    reviews: int = 0
    started_at: datetime | None = None
    next_wake: datetime | None = None
    running_session: str | None = None
    paused_by: str | None = None
    continue_now: bool = False
    # A trigger said ``ignore`` and the schedule has no clock: the run is dismissed for good and the
    # task sleeps with no wake (``next_wake`` None) until a ``nudge`` (ignore-dismisses-v1).
    dismissed: bool = False
    spend: Spend = Field(default_factory=Spend)
    receipts: list[UsageReceipt] = Field(default_factory=list)
    checkpoints: list[TaskCheckpoint] = Field(default_factory=list)
    budget_crossing: BudgetCrossing | None = None
    failure: str | None = None
    failure_reason: str | None = None
    unflushed_events: list[Event] = Field(default_factory=list)
    # The last status recorded as AutonomousTaskStatusChanged and how many were (status-events-v1).
    recorded_status: str | None = None
    status_changes: int = 0


class AutonomousTaskInput(Model):
    """Input of ``AutonomousTaskWorkflow.run``: ``state`` is None for a new task and the carried
    state when it continues as new."""

    config: TaskConfig
    state: TaskState | None = None


class TaskRecordInput(Model):
    """Local activity ``task.record``: the task's row (status, goal, spend), its new events
    (idempotent by (task_id, seq)) and a checkpoint (idempotent by (task_id, number))."""

    task_id: str
    owner: str
    goal: str
    status: TaskStatus
    workspace: str = ""
    spend: Spend = Field(default_factory=Spend)
    events: list[Event] = Field(default_factory=list)
    checkpoint: TaskCheckpoint | None = None
