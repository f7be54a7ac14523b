"""Autonomous tasks: a goal pursued for days by a workflow that runs sessions, checks acceptance,
writes checkpoints and sleeps on durable timers (``AutonomousTaskWorkflow``, id ``task-<id>``).

Here: its configuration and carried state, its control messages (updates, query), the activity
inputs and results it uses, and the checkpoint it writes after each session.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, Field, field_validator, model_validator

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, BudgetCrossing, Spend
from agentrt.schemas._config import ApprovalPolicy, SandboxPolicy
from agentrt.schemas._messages import Usage
from agentrt.schemas._template import SessionTemplate

TaskStatus = Literal["waiting", "running", "paused", "budget_exceeded", "completed", "failed", "cancelled"]
TERMINAL_TASK_STATUSES: tuple[str, ...] = ("completed", "failed", "cancelled")

# Bounds on text a task carries in history (characters): a checkpoint's ``done`` and ``remaining``,
# and a command's output kept for a reader.
CHECKPOINT_TEXT_CHARS = 4_000
COMMAND_OUTPUT_CHARS = 4_000
# The most checkpoints the workflow state keeps (every one is in the store).
CHECKPOINTS_KEPT = 5
# The most sessions a task may have, and the longest interval or defer between them (seconds).
MAX_TASK_SESSIONS = 10_000
MAX_TASK_INTERVAL_SECONDS = 366 * 86_400.0
# The shortest ``defer`` a task sleeps (seconds): a trigger saying less cannot make it spin.
MIN_DEFER_SECONDS = 10.0
# The longest task id (UTF-8 bytes): its sessions' workflow ids ``session-<id>-s10000-<8 hex>``
# must fit Temporal's id limit (``limit.maxIDLength``, 1,000 bytes by default).
MAX_TASK_ID_BYTES = 1_000 - len("session-") - len(f"-s{MAX_TASK_SESSIONS}-") - 8
# Characters a task id may not hold: control characters and bidirectional overrides, which
# would reach terminals and the Temporal UI as they are.
_UNPRINTABLE_ID = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


class TaskSchedule(Model):
    """When a task runs its next session.

    - ``every_seconds``: after each session, sleep this long (seconds) on a durable timer.
    - ``cron``: a five-field cron expression in UTC (``0 9 * * 1-5``); the next session runs at
      its next time after a session ends.
    - ``trigger_command``: a command run in the task's sandbox (in the workspace) at each wake,
      before any session; the first word of its output decides (``AutonomyDecision``):
      ``execute`` runs a session, ``ignore`` sleeps until the next scheduled wake,
      ``defer <seconds>`` sleeps that long (at least ``MIN_DEFER_SECONDS``) and asks again. A failing command (non-zero exit,
      no answer) is ``ignore`` with its output as the reason.

    Neither ``every_seconds`` nor ``cron``: sessions run back to back (a trigger's ``ignore`` then
    dismisses the run for good: the task sleeps until a ``nudge``).
    """

    every_seconds: float | None = Field(default=None, gt=0, le=MAX_TASK_INTERVAL_SECONDS, allow_inf_nan=False)
    cron: str | None = None
    trigger_command: str | None = None

    @model_validator(mode="after")
    def _one_clock(self) -> TaskSchedule:
        if self.every_seconds is not None and self.cron is not None:
            raise ValueError("give every_seconds or cron, not both")
        if self.cron is not None and len(self.cron.split()) != 5:
            raise ValueError(f"cron must have five fields (minute hour day month weekday), got {self.cron!r}")
        if self.trigger_command is not None and not self.trigger_command.strip():
            raise ValueError("trigger_command is empty")
        return self

    def describe(self) -> str:
        if self.cron is not None:
            clock = f"cron `{self.cron}` (UTC)"
        elif self.every_seconds is not None:
            clock = f"every {format_seconds(self.every_seconds)}"
        else:
            clock = "back to back"
        return clock + (f", when `{self.trigger_command}` says execute" if self.trigger_command else "")


class AcceptanceCheck(Model):
    """How a task knows its goal is met, checked after every session that completes.

    - ``command``: must exit 0 when run in the task's OS sandbox, in the workspace, within
      ``timeout_seconds``.
    - ``review``: criteria for a reviewer model (the task's ``reviewer_profile``, else its
      profile), which answers pass or fail with findings; an answer that is not a verdict fails.

    Both set: both must pass. Neither: a reviewer judges the session's answer against the goal
    and the task's criteria.
    """

    command: str | None = None
    review: str | None = None
    timeout_seconds: float = Field(default=300.0, gt=0, le=3600, allow_inf_nan=False)

    def describe(self) -> str:
        checks = []
        if self.command:
            checks.append(f"command `{self.command}` exits 0 (within {self.timeout_seconds:g} s)")
        if self.review or not self.command:
            checks.append(f"a reviewer passes it against: {self.review}" if self.review else "a reviewer passes it against the goal")
        return " and ".join(checks)

    @field_validator("command", "review")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value


# The flat ``TaskConfig`` fields a ``SessionTemplate`` holds too (``TaskConfig.session`` sets them).
TASK_TEMPLATE_FIELDS = (
    "profile", "script", "tools", "approval", "sandbox", "network", "mcp_servers", "tool_task_queue", "operators", "agent",
    "model_task_queue",
)


class TaskConfig(Model):
    """Everything an autonomous task needs to start; carried in the workflow input.

    - ``task_id``: the workflow id is ``task-<task_id>``; session ``N`` is ``<task_id>-s<N>``.
    - ``goal`` and ``criteria``: what the sessions work towards (each session's orientation
      prompt has both); ``acceptance``: how completion is checked (``AcceptanceCheck``).
    - ``max_sessions``: sessions before the task fails with reason ``max_sessions``.
    - ``max_rounds_per_session``: model calls a session may make (its ``max_rounds_per_turn``);
      a session that reaches it with sessions left is continued by the next one at once.
    - ``schedule``: when the next session runs (``TaskSchedule``).
    - ``budget``: limits on the spend of all sessions together (tokens, cost, tool calls, wall
      time); crossing one stops the task at ``budget_exceeded`` until ``raise_budget``.
    - ``profile`` / ``script``: the sessions' model (as for a session); ``tools``, ``approval``,
      ``sandbox``, ``network``, ``mcp_servers``, ``tool_task_queue``: the sessions' grants;
      ``agent``: the registered agent the sessions run as (docs/agents.md); ``model_task_queue``:
      where the sessions' model calls and the task's acceptance review run (None: the task's queue). No
      person answers a task's sessions: by default (``approval.mode = "never"``) a call the OS
      sandbox confines runs and a destructive or network one is denied; with another mode a call
      the policy would ask about is denied (``no_interactive_route``).
    - ``owner`` and ``operators``: who may control the task (operators with a reason).
    - ``session``: the template every session of the task is made from (``SessionTemplate``:
      system prompt, advisor, timeouts, local tools ... as well). Given, its values replace the
      flat ``profile``, ``script``, ``tools``, ``approval``, ``sandbox``, ``network``,
      ``mcp_servers``, ``tool_task_queue``, ``operators``, ``agent`` and ``model_task_queue``; None makes it from those
      (``template()``). A session still gets ``max_rounds_per_session`` rounds, what is left of the
      task's budget, and no person to ask (``interactive`` false).
    """

    task_id: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    goal: str = Field(min_length=1)
    workspace: str
    criteria: list[str] = Field(default_factory=list)
    acceptance: AcceptanceCheck = Field(default_factory=AcceptanceCheck)
    max_sessions: int = Field(default=10, ge=1, le=MAX_TASK_SESSIONS)
    max_rounds_per_session: int = Field(default=50, ge=1)
    schedule: TaskSchedule = Field(default_factory=TaskSchedule)
    budget: Budget = Field(default_factory=Budget)
    profile: str = "default"
    script: str | None = None
    reviewer_profile: str | None = None
    tools: list[str] | None = None
    approval: ApprovalPolicy = Field(default_factory=lambda: ApprovalPolicy(mode="never"))
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    mcp_servers: list[str] = Field(default_factory=list)
    tool_task_queue: str | None = None
    operators: list[str] = Field(default_factory=list)
    title: str | None = None
    # The registered agent every session of the task runs as (``SessionConfig.agent``); left out when None.
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)
    model_task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # Left out when None: a worker of an earlier version still reads the config.
    session: SessionTemplate | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _session_template_wins(self) -> TaskConfig:
        if self.session is not None:
            for name in TASK_TEMPLATE_FIELDS:
                setattr(self, name, getattr(self.session, name))
        return self

    def template(self) -> SessionTemplate:
        """The template of the task's sessions: ``session``, or one made from the flat fields."""
        if self.session is not None:
            return self.session
        return SessionTemplate(**{name: getattr(self, name) for name in TASK_TEMPLATE_FIELDS})

    @field_validator("task_id")
    @classmethod
    def _fits_every_workflow_id(cls, value: str) -> str:
        size = len(value.encode())
        if size > MAX_TASK_ID_BYTES:
            raise ValueError(f"a task id has at most {MAX_TASK_ID_BYTES} bytes (UTF-8), this one has {size}")
        if _UNPRINTABLE_ID.search(value):
            raise ValueError("a task id may not hold control characters or bidirectional overrides")
        return value


class TaskCheckpoint(Model):
    """What a task wrote after session ``number`` (``session_id``) ended: how it ended
    (``session_status``: a turn status, or ``failed`` with ``error``), what is ``done`` (the
    session's answer), what ``remaining`` (the acceptance check's findings), whether the goal
    was ``accepted``, and the task's ``spend`` so far. Texts are cut at ``CHECKPOINT_TEXT_CHARS``."""

    number: int
    session_id: str
    at: datetime
    session_status: str
    done: str = ""
    remaining: str = ""
    accepted: bool = False
    error: str | None = None
    spend: Spend = Field(default_factory=Spend)


class UsageReceipt(Model):
    """One session's spend as the task added it to its own: the audit trail of the task's totals
    (``sum(receipt.spend) == status.spend`` for tokens, cost and tool calls). ``kind`` says what
    spent it: a child ``session`` or the acceptance ``review``."""

    number: int
    session_id: str
    kind: Literal["session", "review"] = "session"
    spend: Spend
    at: datetime


class AutonomousTaskResult(Model):
    """How a task ended: ``completed`` (accepted), ``failed`` (``failure_reason``:
    ``max_sessions``, ``session_failed``...) or ``cancelled``."""

    task_id: str
    status: TaskStatus
    sessions: int
    spend: Spend
    checkpoint: TaskCheckpoint | None = None
    failure: str | None = None
    failure_reason: str | None = None


class TaskControlInput(Model):
    """Updates ``pause``, ``resume``, ``nudge`` (wake now) and ``cancel``: by the owner, or by an
    operator with a ``reason``.

    ``expires_at`` (every task and graph update's input has it; UTC): when its caller stops waiting
    for the answer. A worker that takes the update after it refuses it (type ``RequestExpired``), so
    a request its caller gave up on, while no worker ran, is never applied later. The client sets it;
    left out when None (never expires)."""

    principal: str
    reason: str | None = None
    expires_at: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)


class AmendGoalInput(Model):
    """Update ``amend_goal``: the goal (and, when given, the criteria) the next sessions work towards."""

    principal: str
    goal: str = Field(min_length=1)
    criteria: list[str] | None = None
    reason: str | None = None
    expires_at: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)  # as TaskControlInput's


class TaskStatusView(Model):
    """Answer of query ``status``: the goal, where the task is, its last checkpoint, what it spent
    (``spend``, with a ``receipts`` line per session) against its ``budget``, ``remaining``, and
    when it wakes next (``next_wake``, UTC)."""

    task_id: str
    owner: str
    goal: str
    criteria: list[str] = Field(default_factory=list)
    status: TaskStatus
    sessions: int
    max_sessions: int
    running_session: str | None = None
    checkpoint: TaskCheckpoint | None = None
    spend: Spend
    budget: Budget
    remaining: Budget
    budget_crossing: BudgetCrossing | None = None
    next_wake: datetime | None = None
    schedule: str = ""
    acceptance: str = ""
    workspace: str = ""
    profile: str = ""
    paused_by: str | None = None
    failure: str | None = None
    failure_reason: str | None = None
    receipts: list[UsageReceipt] = Field(default_factory=list)
    last_seq: int = 0
    run: int = 1


# ---------------------------------------------------------------- activities


class TaskCommandInput(Model):
    """Activities ``task.check_command`` (acceptance) and ``task.evaluate_trigger``: run ``command``
    with ``/bin/sh -c`` in the OS sandbox, in ``workspace``, for at most ``timeout_seconds``."""

    task_id: str
    session_number: int
    workspace: str
    command: str
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    timeout_seconds: float = 300.0


class CommandCheckResult(Model):
    """A command's exit code (None: it timed out or could not start), whether it ``passed``
    (exit 0), and the tail of its output (stdout then stderr, at most ``COMMAND_OUTPUT_CHARS``)."""

    passed: bool
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False


AutonomyDecisionKind = Literal["execute", "defer", "ignore"]


class TriggerVerdict(Model):
    """What a trigger command decided: ``execute``, ``defer`` (for ``seconds``) or ``ignore``, and why."""

    decision: AutonomyDecisionKind
    seconds: float | None = None
    reason: str = ""


class ReviewInput(Model):
    """Activity ``task.review``: a reviewer model (``profile``, ``script``) judges ``answer`` (the
    session's final answer) against the goal and ``criteria``; ``review_index`` numbers the task's
    reviews (the scripted model's step)."""

    task_id: str
    session_id: str
    profile: str
    script: str | None = None
    goal: str
    criteria: list[str] = Field(default_factory=list)
    answer: str
    review_index: int = 0


class ReviewVerdict(Model):
    """The reviewer's verdict: ``passed`` with ``findings`` (what is missing or wrong) and a
    ``summary``; ``usage`` of the review call (tokens) and its ``cost_usd``; ``error``: why the
    answer could not be read as a verdict (a graph node's review then passes: fail-open)."""

    passed: bool
    findings: list[str] = Field(default_factory=list)
    summary: str = ""
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # ``high``: a finding is of high severity (a graph node's answer holds a destructive command).
    severity: Literal["low", "medium", "high"] | None = Field(default=None, exclude_if=lambda v: v is None)


class WorkspaceCommitInput(Model):
    """Activity ``task.workspace_commit``: the git commit of task ``task_id``'s ``workspace`` (a path
    on the worker of the task's tool queue)."""

    task_id: str
    workspace: str


class WorkspaceCommit(Model):
    """Result of ``task.workspace_commit``: ``commit``, the id HEAD names (40 or 64 lower-case hex
    digits), or None when the workspace is no git repository or HEAD names no commit."""

    commit: str | None = None


class NextWakeInput(Model):
    """Local activity ``task.next_wake``: the first time of ``cron`` (UTC) strictly after ``after``."""

    cron: str
    after: datetime


def format_seconds(seconds: float) -> str:
    """``90`` -> ``1m 30s``, ``93600`` -> ``1d 2h``: a duration for summaries."""
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    text = " ".join(p for p in parts if p)
    return text or "0s"


__all__ = [
    "AcceptanceCheck",
    "AmendGoalInput",
    "AutonomousTaskResult",
    "AutonomyDecisionKind",
    "CHECKPOINTS_KEPT",
    "CHECKPOINT_TEXT_CHARS",
    "COMMAND_OUTPUT_CHARS",
    "CommandCheckResult",
    "MAX_TASK_ID_BYTES",
    "MAX_TASK_INTERVAL_SECONDS",
    "MAX_TASK_SESSIONS",
    "MIN_DEFER_SECONDS",
    "NextWakeInput",
    "ReviewInput",
    "ReviewVerdict",
    "TERMINAL_TASK_STATUSES",
    "TaskCheckpoint",
    "TaskCommandInput",
    "TaskConfig",
    "TaskControlInput",
    "TaskSchedule",
    "TaskStatus",
    "TaskStatusView",
    "TriggerVerdict",
    "UsageReceipt",
    "WorkspaceCommit",
    "WorkspaceCommitInput",
    "format_seconds",
]
