"""Events of an autonomous task (``seq`` per task): its decisions, sessions, checks, waits and end."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from agentrt.schemas._autonomy import AutonomyDecisionKind, TaskCheckpoint
from agentrt.schemas._budget import Budget, BudgetCrossing, Spend
from agentrt.schemas._events_base import EventBase

__all__ = [
    "AutonomousTaskAcceptanceChecked",
    "AutonomousTaskBudgetExceeded",
    "AutonomousTaskBudgetRaised",
    "AutonomousTaskCancelled",
    "AutonomousTaskCheckpointed",
    "AutonomousTaskCompleted",
    "AutonomousTaskCreated",
    "AutonomousTaskFailed",
    "AutonomousTaskGoalAmended",
    "AutonomousTaskNudged",
    "AutonomousTaskPaused",
    "AutonomousTaskResumed",
    "AutonomousTaskSessionEnded",
    "AutonomousTaskSessionStarted",
    "AutonomousTaskStatusChanged",
    "AutonomousTaskWaiting",
    "AutonomyDecision",
]


class AutonomousTaskCreated(EventBase):
    """A task started: its goal, criteria, session bound, budget and schedule (as text).
    ``status_events``: the task records each status it takes as ``AutonomousTaskStatusChanged``
    (``status-events-v1``; False for a task an older build started)."""

    type: Literal["AutonomousTaskCreated"] = "AutonomousTaskCreated"
    task_id: str
    owner: str
    goal: str
    criteria: list[str] = Field(default_factory=list)
    max_sessions: int
    budget: Budget
    schedule: str
    status_events: bool = False


class AutonomousTaskStatusChanged(EventBase):
    """The task's status became ``status``, after ``previous`` (None: its first status): its
    ``change``-th status (1, 2, ... over the task's life, continue-as-new included). Every status the
    task shows (its ``AgentSessionStatus``, its store row) is recorded so, however short it lasted."""

    type: Literal["AutonomousTaskStatusChanged"] = "AutonomousTaskStatusChanged"
    status: str
    previous: str | None = None
    change: int


class AutonomyDecision(EventBase):
    """A wake's decision: ``execute`` a session now, ``defer`` (ask again in ``seconds``) or
    ``ignore`` (the run is dismissed: sleep until the next scheduled wake), with ``source``
    (``schedule``, ``trigger``, ``nudge``, ``continuation``) and why. ``dismissed``: an ``ignore``
    of a task whose schedule has no clock dismissed the run for good: no wake until a ``nudge``."""

    type: Literal["AutonomyDecision"] = "AutonomyDecision"
    decision: AutonomyDecisionKind
    source: str
    seconds: float | None = None
    reason: str = ""
    dismissed: bool = Field(default=False, exclude_if=lambda v: not v)


class AutonomousTaskSessionStarted(EventBase):
    type: Literal["AutonomousTaskSessionStarted"] = "AutonomousTaskSessionStarted"
    session_id: str
    number: int


class AutonomousTaskSessionEnded(EventBase):
    """A child session ended: its turn's ``status`` (or ``failed``/``cancelled`` for the session
    itself) and what it spent (added to the task's spend)."""

    type: Literal["AutonomousTaskSessionEnded"] = "AutonomousTaskSessionEnded"
    session_id: str
    number: int
    status: str
    spend: Spend
    error: str | None = None


class AutonomousTaskAcceptanceChecked(EventBase):
    """The acceptance check after session ``number``: ``kind`` ``command`` or ``review``, whether it ``passed``, and why."""

    type: Literal["AutonomousTaskAcceptanceChecked"] = "AutonomousTaskAcceptanceChecked"
    number: int
    kind: Literal["command", "review"]
    passed: bool
    detail: str = ""


class AutonomousTaskCheckpointed(EventBase):
    type: Literal["AutonomousTaskCheckpointed"] = "AutonomousTaskCheckpointed"
    checkpoint: TaskCheckpoint


class AutonomousTaskWaiting(EventBase):
    """The task sleeps on a durable timer until ``until`` (UTC): ``why`` says for what."""

    type: Literal["AutonomousTaskWaiting"] = "AutonomousTaskWaiting"
    until: datetime
    why: str = ""


class AutonomousTaskPaused(EventBase):
    """The task paused: by ``principal`` (``pause``), or because its session was cancelled (``principal`` None)."""

    type: Literal["AutonomousTaskPaused"] = "AutonomousTaskPaused"
    principal: str | None = None
    reason: str | None = None


class AutonomousTaskResumed(EventBase):
    type: Literal["AutonomousTaskResumed"] = "AutonomousTaskResumed"
    principal: str
    reason: str | None = None


class AutonomousTaskNudged(EventBase):
    type: Literal["AutonomousTaskNudged"] = "AutonomousTaskNudged"
    principal: str
    reason: str | None = None


class AutonomousTaskGoalAmended(EventBase):
    type: Literal["AutonomousTaskGoalAmended"] = "AutonomousTaskGoalAmended"
    principal: str
    goal: str
    criteria: list[str] = Field(default_factory=list)
    reason: str | None = None


class AutonomousTaskBudgetExceeded(EventBase):
    """The task's spend reached a limit: it waits for ``raise_budget`` (or ``cancel``)."""

    type: Literal["AutonomousTaskBudgetExceeded"] = "AutonomousTaskBudgetExceeded"
    crossing: BudgetCrossing


class AutonomousTaskBudgetRaised(EventBase):
    type: Literal["AutonomousTaskBudgetRaised"] = "AutonomousTaskBudgetRaised"
    principal: str
    budget: Budget
    max_sessions: int
    reason: str | None = None


class AutonomousTaskCompleted(EventBase):
    type: Literal["AutonomousTaskCompleted"] = "AutonomousTaskCompleted"
    sessions: int
    spend: Spend


class AutonomousTaskFailed(EventBase):
    """The task failed for good: ``reason`` is ``max_sessions`` (no session passed the acceptance
    check), ``invalid_config`` or ``session_failed``; ``error`` says more."""

    type: Literal["AutonomousTaskFailed"] = "AutonomousTaskFailed"
    reason: str
    error: str = ""
    sessions: int = 0


class AutonomousTaskCancelled(EventBase):
    type: Literal["AutonomousTaskCancelled"] = "AutonomousTaskCancelled"
    principal: str | None = None
    reason: str | None = None
    session_id: str | None = None
