"""Plain-text rendering of autonomous tasks for `agentrt task`: a task's status, its events and its
result, each a line or a few."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from agentrt.cli._render import describe, printable, usage_text
from agentrt.schemas import (
    AutonomousTaskAcceptanceChecked,
    AutonomousTaskBudgetExceeded,
    AutonomousTaskBudgetRaised,
    AutonomousTaskCancelled,
    AutonomousTaskCheckpointed,
    AutonomousTaskCompleted,
    AutonomousTaskCreated,
    AutonomousTaskFailed,
    AutonomousTaskGoalAmended,
    AutonomousTaskNudged,
    AutonomousTaskPaused,
    AutonomousTaskResult,
    AutonomousTaskResumed,
    AutonomousTaskSessionEnded,
    AutonomousTaskSessionStarted,
    AutonomousTaskStatusChanged,
    AutonomousTaskWaiting,
    AutonomyDecision,
    Event,
    Spend,
    TaskCheckpoint,
    TaskStatusView,
    format_seconds,
)

# Characters of a task's texts (goal, checkpoint) on one line of `task status` and `task events`.
LINE_CHARS = 200


def cut(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` on one line, terminal-safe (``printable``), cut to ``limit`` characters."""
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usd_text(value: float) -> str:
    return f"${value:,.4f}".rstrip("0").rstrip(".") if value else "$0"


def spend_text(spend: Spend) -> str:
    """``1200 in / 80 out tokens, $0.012, 3 tool call(s), 5m 2s wall time``."""
    return (
        f"{usage_text(spend.usage)}, {usd_text(spend.cost_usd)}, {spend.tool_calls} tool call(s), "
        f"{format_seconds(spend.wall_seconds)} wall time"
    )


def relative_text(when: datetime, now: datetime) -> str:
    """``in 5h 59m`` or ``2m 3s ago``."""
    seconds = (when - now).total_seconds()
    return f"in {format_seconds(seconds)}" if seconds >= 0 else f"{format_seconds(-seconds)} ago"


def utc_text(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _by(principal: str | None, reason: str | None) -> str:
    return (f" by {principal}" if principal else "") + (f": {cut(reason)}" if reason else "")


def _criteria(criteria: list[str]) -> str:
    return "1 criterion" if len(criteria) == 1 else f"{len(criteria)} criteria"


def _checkpoint_text(cp: TaskCheckpoint) -> str:
    verdict = "accepted" if cp.accepted else "not accepted"
    error = f", error: {cut(cp.error)}" if cp.error else ""
    return f"#{cp.number} after {cp.session_id} ({cp.session_status}{error}) at {utc_text(cp.at)}: {verdict}"


def task_event_text(event: Event) -> str:
    """What a task event says, on one line (the session renderer's for other events)."""
    match event:
        case AutonomousTaskCreated():
            criteria = f"; {_criteria(event.criteria)}" if event.criteria else ""
            return (
                f"task created for {event.owner}: {cut(event.goal)}{criteria}; at most {event.max_sessions} "
                f"session(s); budget {event.budget.describe()}; {event.schedule}"
            )
        case AutonomyDecision():
            after = f" (ask again in {format_seconds(event.seconds)})" if event.seconds is not None else ""
            return f"{event.decision} [{event.source}]{after}" + (f": {cut(event.reason)}" if event.reason else "")
        case AutonomousTaskSessionStarted():
            return f"session {event.number} started: {event.session_id}"
        case AutonomousTaskSessionEnded():
            error = f": {cut(event.error)}" if event.error else ""
            return f"session {event.number} ({event.session_id}) ended {event.status}{error} · spent {spend_text(event.spend)}"
        case AutonomousTaskAcceptanceChecked():
            detail = f": {cut(event.detail)}" if event.detail else ""
            return f"acceptance {event.kind} after session {event.number} {'passed' if event.passed else 'failed'}{detail}"
        case AutonomousTaskCheckpointed():
            cp = event.checkpoint
            remaining = f"; remaining: {cut(cp.remaining)}" if cp.remaining else ""
            return f"checkpoint {_checkpoint_text(cp)}{remaining}"
        case AutonomousTaskWaiting():
            return f"sleeping until {utc_text(event.until)}" + (f" ({cut(event.why)})" if event.why else "")
        case AutonomousTaskPaused():
            return "paused" + (_by(event.principal, event.reason) if event.principal else " (its session was cancelled)")
        case AutonomousTaskResumed():
            return "resumed" + _by(event.principal, event.reason)
        case AutonomousTaskNudged():
            return "nudged" + _by(event.principal, event.reason)
        case AutonomousTaskGoalAmended():
            criteria = f" ({_criteria(event.criteria)})" if event.criteria else ""
            return f"goal amended by {event.principal}: {cut(event.goal)}{criteria}" + (f"; why: {cut(event.reason)}" if event.reason else "")
        case AutonomousTaskBudgetExceeded():
            return f"{event.crossing.text()}; waits for raise-budget or cancel"
        case AutonomousTaskBudgetRaised():
            return f"budget raised by {event.principal}: {event.budget.describe()}; at most {event.max_sessions} session(s)" + (
                f"; why: {cut(event.reason)}" if event.reason else "")
        case AutonomousTaskStatusChanged():
            return f"status {event.status}" + (f" (was {event.previous})" if event.previous else "")
        case AutonomousTaskCompleted():
            return f"completed after {event.sessions} session(s) · spent {spend_text(event.spend)}"
        case AutonomousTaskFailed():
            error = f": {cut(event.error)}" if event.error else ""
            return f"failed ({event.reason}) after {event.sessions} session(s){error}"
        case AutonomousTaskCancelled():
            session = f"; session {event.session_id} cancelled" if event.session_id else ""
            return "cancelled" + _by(event.principal, event.reason) + session
    return describe(event)


def task_event_line(event: Event) -> str:
    """``seq  time (UTC)  type  what it says``."""
    at = event.at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if event.at else "-"
    return printable(f"{event.seq:>4}  {at:<19}  {event.type:<31} {task_event_text(event)}")


def status_json(view: TaskStatusView) -> str:
    """The ``TaskStatusView`` as JSON, with ``usage`` (the same object as ``spend``) beside ``spend``."""
    body = view.model_dump(mode="json")
    body["usage"] = body["spend"]
    return json.dumps(body)


def status_lines(view: TaskStatusView, now: datetime) -> list[str]:
    """``task status`` for people: goal, status, sessions, next wake (UTC and from ``now``), the
    last checkpoint, spend against the budget, and the receipts."""
    lines = [
        f"task       {view.task_id} ({view.status}) owner {view.owner}" + (f" · paused by {view.paused_by}" if view.paused_by else ""),
        f"goal       {cut(view.goal, 400)}",
    ]
    lines += [f"criterion  {cut(c)}" for c in view.criteria]
    lines.append(f"sessions   {view.sessions} of {view.max_sessions} used; running {view.running_session or '-'}")
    lines.append(f"schedule   {view.schedule or '-'}")
    if view.acceptance:
        lines.append(f"accept     {view.acceptance}")
    if view.workspace:
        lines.append(f"workspace  {view.workspace} · profile {view.profile or '-'}")
    wake = f"{utc_text(view.next_wake)} ({relative_text(view.next_wake, now)})" if view.next_wake else "-"
    lines.append(f"next wake  {wake}")
    cp = view.checkpoint
    if cp is None:
        lines.append("checkpoint -")
    else:
        lines.append(f"checkpoint {_checkpoint_text(cp)}")
        lines.append(f"  done      {cut(cp.done) or '-'}")
        lines.append(f"  remaining {cut(cp.remaining) or '-'}")
    lines.append(f"spend      {spend_text(view.spend)}")
    budget = view.budget.describe()
    left = f" (left: {view.remaining.describe()})" if not view.budget.is_unbounded() else ""
    lines.append(f"budget     {budget}{left}")
    if view.budget_crossing is not None:
        lines.append(f"crossed    {view.budget_crossing.text()}")
    if view.failure or view.failure_reason:
        lines.append(f"failure    {view.failure_reason or '-'}: {cut(view.failure or '')}")
    for r in view.receipts:
        lines.append(f"receipt    #{r.number} {r.kind} {r.session_id} at {utc_text(r.at)}: {spend_text(r.spend)}")
    if view.status == "budget_exceeded":
        lines.append(f"next step  agentrt task raise-budget {view.task_id} --budget-tokens N (or cancel it)")
    elif view.status == "paused":
        lines.append(f"next step  agentrt task resume {view.task_id}")
    if view.receipts:
        lines.append(f"transcript agentrt session events {view.receipts[-1].session_id}  (any session above)")
    return [printable(line) for line in lines]  # ids, principals and the schedule are the task author's text


def result_lines(result: AutonomousTaskResult) -> list[str]:
    lines = [f"task {result.task_id} {result.status} after {result.sessions} session(s) · spent {spend_text(result.spend)}"]
    if result.failure or result.failure_reason:
        lines.append(f"failure: {result.failure_reason or '-'}: {cut(result.failure or '', 400)}")
    if result.checkpoint is not None:
        lines.append(f"last checkpoint {_checkpoint_text(result.checkpoint)}")
        if result.checkpoint.done:
            lines.append(f"done: {cut(result.checkpoint.done, 400)}")
    return [printable(line) for line in lines]  # ids, principals and the schedule are the task author's text
