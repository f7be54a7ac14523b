"""Autonomous tasks on the client side (``AgentClient.tasks``): start one, steer it with its updates
(``pause``, ``resume``, ``nudge``, ``cancel``, ``amend_goal``, ``raise_budget``), read it with its
queries (``status``, ``events``), list a principal's tasks and wait for a task's result.

The workflow is addressed by its type name (``AUTONOMOUS_TASK_WORKFLOW``) and its id
``task-<task_id>``, so this module does not import the workflow class.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, get_args

from croniter import CroniterError, croniter
from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowHandle,
)

from agentrt.client._addressed import WorkflowKind, listing_fields
from agentrt.client._connection import Connection
from agentrt.client._quotas import Quotas
from agentrt.client._visibility import check_visible
from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    MAX_TASK_ID_BYTES,
    TASK_ID_PREFIX,
    AmendGoalInput,
    ApprovalPolicy,
    AutonomousTaskInput,
    AutonomousTaskResult,
    Budget,
    EventsPage,
    EventsQuery,
    RaiseBudgetInput,
    SandboxPolicy,
    TaskConfig,
    TaskControlInput,
    TaskNotFound,
    TaskStatus,
    TaskStatusView,
    code_span,
    task_workflow_id,
)

__all__ = ["TASK_STATUSES", "TaskListing", "Tasks", "task_details", "task_summary"]

TASK_STATUSES: tuple[str, ...] = get_args(TaskStatus)
# Characters of the goal in a task's static summary (the Temporal UI's one-line label).
SUMMARY_GOAL_CHARS = 80
# Characters of the goal, and of each criterion or check, in a task's static details (each a code
# span: text a caller chose is never rendered as markdown).
DETAILS_GOAL_CHARS = 2000
DETAILS_TEXT_CHARS = 500


@dataclass
class TaskListing:
    """One task in ``AgentClient.list_tasks``: ``status`` is its ``AgentSessionStatus`` search
    attribute (a task status), or, for a workflow that closed without completing, how it closed
    (``terminated``, ``timed_out``, ``failed``, ``canceled``); ``started_at`` is when its latest run
    started (UTC)."""

    task_id: str
    workflow_id: str
    status: str
    owner: str | None
    started_at: datetime | None
    closed: bool


def task_summary(config: TaskConfig) -> str:
    """The workflow's static summary: ``task <id> · <goal on one line, cut to ~80 characters>``."""
    return f"task {config.task_id} · {code_span(config.goal, SUMMARY_GOAL_CHARS)}"


def task_details(config: TaskConfig) -> str:
    """The workflow's static details (markdown): goal, criteria, acceptance, schedule, budget,
    sessions, owner and workspace."""
    acceptance = config.acceptance
    checks = []
    if acceptance.command is not None:
        checks.append(f"command {code_span(acceptance.command, DETAILS_TEXT_CHARS)} exits 0 (within {acceptance.timeout_seconds:g} s)")
    if acceptance.review is not None:
        checks.append(f"a reviewer finds: {code_span(acceptance.review, DETAILS_TEXT_CHARS)}")
    if not checks:
        checks.append("a reviewer judges each session's answer against the goal and criteria")
    lines = [f"**Goal**: {code_span(config.goal, DETAILS_GOAL_CHARS)}", ""]
    if config.criteria:
        lines += ["**Criteria**:", *(f"- {code_span(c, DETAILS_TEXT_CHARS)}" for c in config.criteria), ""]
    lines += [
        f"**Acceptance**: {'; and '.join(checks)}",
        f"**Schedule**: {config.schedule.describe()}",
        f"**Budget**: {config.budget.describe()}",
        f"**Max sessions**: {config.max_sessions} ({config.max_rounds_per_session} model calls each)",
        f"**Owner**: {code_span(config.owner, 200)}",
        f"**Workspace**: {code_span(config.workspace, 500)}",
    ]
    return "\n".join(lines)


class Tasks:
    """A client's autonomous tasks (``AgentClient.tasks``), over its ``Connection``.

    Every method that names a task raises ``TaskNotFound`` when no workflow ``task-<task_id>``
    exists, ``RequestRejected`` when the task refuses the request (its message names the task and
    says why: not the owner, an operator without a reason, nothing to change, the task has ended),
    and ``WorkerUnavailable`` when no worker answers (queries and updates need one). A task shows
    itself only to its owner and the operators: to anyone else every call answers ``TaskNotFound``
    as for a missing task (``check_visible``); changes are the owner's, or an operator's with a reason.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    # ------------------------------------------------------------ start

    async def start(
        self,
        goal: str,
        *,
        workspace: str,
        task_id: str | None = None,
        criteria: Sequence[str] = (),
        accept_command: str | None = None,
        accept_review: str | None = None,
        every_seconds: float | None = None,
        cron: str | None = None,
        trigger_command: str | None = None,
        max_sessions: int = 10,
        max_rounds_per_session: int = 50,
        budget: Budget | None = None,
        profile: str | None = None,
        script: str | None = None,
        tools: Sequence[str] | None = None,
        sandbox: SandboxPolicy = "workspace_write",
        network: bool = False,
        reviewer_profile: str | None = None,
        approval: ApprovalPolicy | None = None,
        title: str | None = None,
        idempotency_key: str | None = None,
        agent: str | None = None,
    ) -> str:
        """Start an autonomous task owned by this client's principal working towards ``goal``;
        returns its task id (the workflow id is ``task-<task_id>``).

        - ``workspace``: the directory its sessions and commands work in (made real: ``os.path.realpath``);
          ``task_id``: default one derived from ``idempotency_key``, else a new random 12-character id.
        - ``idempotency_key`` (1 to 200 characters of ``A-Z a-z 0-9 . _ : -``): a repeat of this start
          returns the first one's task id and starts nothing; the same key with other arguments raises
          ``RequestRejected`` (docs/idempotency.md).
        - ``criteria``: texts the goal must meet; ``accept_command``: a shell command that must
          exit 0 in the workspace (OS sandbox); ``accept_review``: criteria a reviewer model
          checks (``reviewer_profile``, else the task's profile). Neither: a reviewer judges
          each session's answer against the goal and criteria.
        - ``every_seconds`` (seconds from the end of a session to the next) or ``cron`` (five
          fields, UTC), not both; neither: sessions run back to back. ``trigger_command``: asked
          at each wake whether to run (``execute`` / ``ignore`` / ``defer <seconds>``).
        - ``max_sessions`` (1 to 10,000), ``max_rounds_per_session`` (model calls per session),
          ``budget`` (``Budget``: tokens, US dollars, tool calls, wall seconds; default unbounded).
        - ``profile`` (default: ``scripted`` with a ``script``, else the client's
          ``default_profile``), ``script`` (a scripted-model file, made absolute), ``tools``
          (None: every tool), ``sandbox``, ``network``, ``title``; ``approval`` (default mode ``never``:
          no person answers a task, so a call the sandbox confines runs and a destructive or network
          call is denied). MCP servers, the tool task queue
          and operators are the client's (``for_config``: the configuration's). ``agent``: a
          registered agent every session runs as (docs/agents.md).

        The workflow starts on the client's task queue; it waits there until a worker runs.
        Raises ``QuotaExceeded`` (nothing started) when the principal's tenant is at a quota;
        ``RequestRejected`` (request ``start``, nothing started) for invalid arguments, or
        for a task id already used (by a running task or one that ended: ids are not reused);
        ``PayloadCodecMismatch`` (nothing started) when the task queue's workers hold no key of this
        client's, or encrypt and this client has no codec keys (docs/encryption.md).
        """
        await Quotas(self._connection).check_start()
        task_id = TASK.start_id(task_id, self._connection.principal, idempotency_key)
        if not task_id or len(task_id.encode()) > MAX_TASK_ID_BYTES:
            raise task_rejected(
                task_id[:40], "start", f"a task id has 1 to {MAX_TASK_ID_BYTES} bytes (UTF-8), this one {len(task_id.encode())}"
            )
        if not goal.strip():
            raise task_rejected(task_id, "start", "the goal is empty")
        if isinstance(criteria, str):
            raise task_rejected(task_id, "start", "criteria is a list of texts, not one text")
        blank = [n for n, c in enumerate(criteria, 1) if not c.strip()]
        if blank:
            raise task_rejected(task_id, "start", f"criterion {blank[0]} is empty")
        if cron is not None:
            why = _cron_problem(cron)
            if why is not None:
                raise task_rejected(task_id, "start", f"cron {cron!r} {why}")
        config = _build(
            task_id, "start", TaskConfig,
            task_id=task_id,
            owner=self._connection.principal,
            goal=goal,
            workspace=os.path.realpath(workspace),
            criteria=list(criteria),
            acceptance={"command": accept_command, "review": accept_review},
            max_sessions=max_sessions,
            max_rounds_per_session=max_rounds_per_session,
            schedule={"every_seconds": every_seconds, "cron": cron, "trigger_command": trigger_command},
            budget=budget or Budget(),
            profile=profile or ("scripted" if script else self._connection.default_profile),
            script=os.path.realpath(script) if script else None,  # a worker opens it by its real path only
            reviewer_profile=reviewer_profile,
            tools=list(tools) if tools is not None else None,
            sandbox=sandbox,
            network=network,
            approval=approval if approval is not None else ApprovalPolicy(mode="never"),
            mcp_servers=list(self._connection.mcp_servers),
            tool_task_queue=self._connection.tool_task_queue,
            model_task_queue=self._connection.model_task_queue,
            operators=list(self._connection.operators),
            title=title,
            agent=agent,
        )
        await TASK.start(
            self._connection.temporal, AUTONOMOUS_TASK_WORKFLOW, AutonomousTaskInput(config=config), task_id,
            workflow_id=task_workflow_id(task_id), task_queue=self._connection.task_queue,
            owner=config.owner, status="waiting", summary=task_summary(config), details=task_details(config),
            idempotency_key=idempotency_key, store=self._connection.store,
            priority=self._connection.lane("task", config.owner),
        )
        return task_id

    # ------------------------------------------------------------ reads

    async def status(self, task_id: str) -> TaskStatusView:
        """Query ``status``: goal, status, sessions used of ``max_sessions``, the running session,
        the last checkpoint, spend (with a receipt per session) against the budget, and the next
        wake (UTC). Works on a task that has ended too."""
        return await self._query(task_id, "status", None, TaskStatusView)

    async def events(self, task_id: str, since_seq: int = 0, limit: int = 1000) -> EventsPage:
        """Query ``events``: the task's events with ``seq > since_seq`` (at most ``limit``, 1 to
        10,000), in order. The workflow holds the events of its current run, from
        ``page.first_seq`` on; earlier ones (before a continue-as-new) are not in the page."""
        return await self._query(task_id, "events", EventsQuery(since_seq=since_seq, limit=limit), EventsPage)

    async def list(self, status: str | None = None, limit: int = 50) -> builtins.list[TaskListing]:
        """This client's principal's tasks (``AgentOwner``), one row per task (its latest run), most
        recently started first, at most ``limit``; ``status``: only tasks whose ``AgentSessionStatus``
        is that task status (``TASK_STATUSES``). Raises ``ConfigurationError`` for an unknown status."""
        executions = await TASK.listed(self._connection.temporal, AUTONOMOUS_TASK_WORKFLOW, self._connection.principal, status, TASK_STATUSES, limit)
        return [task_listing(e) for e in executions]

    async def wait(self, task_id: str) -> AutonomousTaskResult:
        """Wait, without a bound, until the task ends (through its continue-as-new runs) and return
        how: ``completed``, ``failed`` (``failure_reason``) or ``cancelled``. Raises ``TaskNotFound``;
        ``RequestRejected`` (request ``wait``) when its workflow ended without a result
        (terminated, timed out)."""
        await self._check_visible(task_id)
        handle = self._connection.temporal.get_workflow_handle(task_workflow_id(task_id), result_type=AutonomousTaskResult)
        return await TASK.result(handle, task_id)

    # ------------------------------------------------------------ changes

    async def pause(self, task_id: str, reason: str | None = None) -> TaskStatusView:
        """Update ``pause``: no new session starts (a running one finishes) until ``resume``.
        Returns the task's status after it. An operator (not the owner) must give a ``reason``."""
        return await self._control(task_id, "pause", reason)

    async def resume(self, task_id: str, reason: str | None = None) -> TaskStatusView:
        """Update ``resume``: a paused task goes on from where it was."""
        return await self._control(task_id, "resume", reason)

    async def nudge(self, task_id: str, reason: str | None = None) -> TaskStatusView:
        """Update ``nudge``: a waiting task wakes now instead of at ``next_wake``."""
        return await self._control(task_id, "nudge", reason)

    async def cancel(self, task_id: str, reason: str | None = None) -> TaskStatusView:
        """Update ``cancel``: the running session is cancelled and the task ends ``cancelled``."""
        return await self._control(task_id, "cancel", reason)

    async def amend_goal(
        self, task_id: str, goal: str, criteria: Sequence[str] | None = None, reason: str | None = None
    ) -> TaskStatusView:
        """Update ``amend_goal``: the next sessions work towards ``goal`` (and ``criteria`` when
        given; None keeps the current ones)."""
        if not goal.strip():
            raise task_rejected(task_id, "amend_goal", "the goal is empty")
        amend = _build(task_id, "amend_goal", AmendGoalInput, principal=self._connection.principal, goal=goal,
                       criteria=list(criteria) if criteria is not None else None, reason=reason)
        return await self._update(task_id, "amend_goal", amend)

    async def raise_budget(
        self, task_id: str, budget: Budget | None = None, max_sessions: int | None = None, reason: str | None = None
    ) -> TaskStatusView:
        """Update ``raise_budget``: every limit ``budget`` sets replaces the task's (unset ones
        stay), ``max_sessions`` replaces its session bound; a task stopped at ``budget_exceeded``
        goes on. Raises ``RequestRejected`` when neither raises anything."""
        raise_ = _build(task_id, "raise_budget", RaiseBudgetInput, principal=self._connection.principal,
                        budget=budget or Budget(), max_sessions=max_sessions, reason=reason)
        return await self._update(task_id, "raise_budget", raise_)

    # ------------------------------------------------------------ plumbing

    def _handle(self, task_id: str) -> WorkflowHandle[Any, Any]:
        return self._connection.temporal.get_workflow_handle(task_workflow_id(task_id))

    async def _control(self, task_id: str, update: str, reason: str | None) -> TaskStatusView:
        return await self._update(task_id, update, TaskControlInput(principal=self._connection.principal, reason=reason))

    async def _check_visible(self, task_id: str) -> None:
        await check_visible(
            self._connection, task_workflow_id(task_id), lambda: TaskNotFound(task_id), lambda err: _task_error(task_id, err)
        )

    async def _update(self, task_id: str, update: str, argument: BaseModel) -> TaskStatusView:
        await self._check_visible(task_id)
        return await TASK.update(
            self._handle(task_id), task_id, update, argument, TaskStatusView, self._connection.decision_seconds,
            expire=not self._connection.virtual_clock,
        )

    async def _query(self, task_id: str, query: str, argument: BaseModel | None, result_type: type[Any]) -> Any:
        await self._check_visible(task_id)
        return await TASK.query(self._handle(task_id), task_id, query, argument, result_type)

def _cron_problem(expression: str) -> str | None:
    """Why the five-field ``expression`` never gives a next time (croniter refuses it, or no date
    matches, as ``0 0 30 2 *``), or None."""
    if len(expression.split()) != 5:
        return "must have five fields (minute hour day month weekday)"
    try:
        croniter(expression, datetime.now(timezone.utc)).get_next(datetime)
    except (CroniterError, ValueError, KeyError, OverflowError) as err:
        return f"is not a cron expression that fires: {err or type(err).__name__}"
    return None


TASK = WorkflowKind("task", TaskNotFound)
task_rejected = TASK.rejected
_no_worker = TASK.no_worker
_task_error = TASK.error
_build = TASK.build

def task_listing(execution: WorkflowExecution) -> TaskListing:
    """A task's row from its workflow execution's search attributes (see ``TaskListing``)."""
    return TaskListing(task_id=execution.id.removeprefix(TASK_ID_PREFIX), **listing_fields(execution, "waiting"))
