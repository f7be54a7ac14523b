"""Which sessions a killed worker held, and how soon each took its next step elsewhere, read from history.

A worker *held* a session at the kill when, in the session's history as it stands at the
kill time ``K``:

- ``workflow task``: a ``WorkflowTaskStarted`` whose identity is the dead worker's has no
  ``WorkflowTaskCompleted``/``Failed``/``TimedOut`` before ``K`` (the task was in the worker);
- ``activity``: one of its activities was running there: ``Describe`` right after the kill
  showed it ``STARTED`` with the dead worker as ``last_worker_identity`` (history records an
  activity's ``ActivityTaskStarted`` only with its result, naming only the last attempt's
  worker, and a heartbeat timeout's failure carries no heartbeat details). A session described
  too late to tell (``described_late``: after the heartbeat timeout, when a retry may have
  started) counts as held this way also when an attempt of an activity scheduled before the kill
  timed out on its heartbeat and the next attempt started after the kill;
- ``sticky``: neither, but the last ``WorkflowTaskCompleted`` before ``K`` is the dead
  worker's: the session's next workflow task goes to that worker's sticky queue.

Its *next step* is the first ``WorkflowTaskStarted`` or ``ActivityTaskStarted`` at or after
``K`` by another worker. (The server writes an ``ActivityTaskStarted`` with its result, but
stamps it with the time the attempt started.) The step's *delay* counts from when it was due:
the kill, or, when the session had nothing to do then (a model or tool call running on a live
worker, an idle session waiting for its next message), the first ``WorkflowTaskScheduled``
after the kill that started the chain of workflow tasks this step ends (a sticky timeout
reschedules a task: the chain starts at the first). So the delay is how long the dead worker
held the session up, and never counts a model call, a tool or a user's pause.

Of that delay, ``queued`` is the part the step's task spent on the task queue every live worker
polls (a workflow task: from its last ``WorkflowTaskScheduled``; an activity: from its
``ActivityTaskScheduled`` when that came after the kill, else unknown and 0): waiting for a free
worker, which is capacity, not failover. The rest (a timed-out workflow task, a sticky timeout,
a heartbeat timeout and a retry interval) is ``failover``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType, TaskQueueKind, TimeoutType

KINDS = ("workflow task", "activity", "sticky")
_WF_STARTED = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
_WF_SCHEDULED = EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
_WF_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
_ACT_STARTED = EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
_ACT_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
_STICKY = TaskQueueKind.TASK_QUEUE_KIND_STICKY
_TASK_ENDS = {_WF_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT}


@dataclass(frozen=True)
class HeldSession:
    """A session the dead worker held (``kind``, one of ``KINDS``): ``delay`` from when its next
    step was due to that step starting on another worker (None: none came), of it ``queued`` on
    the shared task queue, and what the step was."""

    session_id: str
    kind: str
    delay: float | None
    queued: float
    next_step: str

    @property
    def failover(self) -> float | None:
        return None if self.delay is None else max(0.0, self.delay - self.queued)


def event_seconds(event: Any) -> float:
    """A history event's time as seconds since the epoch."""
    return event.event_time.seconds + event.event_time.nanos / 1e9


def _identity(event: Any) -> str:
    if event.event_type == _WF_STARTED:
        return event.workflow_task_started_event_attributes.identity
    if event.event_type == _WF_COMPLETED:
        return event.workflow_task_completed_event_attributes.identity
    if event.event_type == _ACT_STARTED:
        return event.activity_task_started_event_attributes.identity
    return ""


def held_session(
    session_id: str, events: Iterable[Any], dead: str, kill_time: float, activity_running: bool,
    described_late: bool = False,
) -> HeldSession | None:
    """How the worker whose identity starts with ``dead`` (``<pid>@``) held this session at
    ``kill_time`` (``activity_running``: Describe showed one of its activities running there), and
    its next step elsewhere; None when it did not hold it."""
    events = list(events)
    if described_late and not activity_running:
        activity_running = _retried_after_heartbeat_timeout(events, kill_time)
    open_task = None
    last_completed = ""
    for event in (e for e in events if event_seconds(e) < kill_time):
        if event.event_type == _WF_STARTED:
            open_task = event
        elif event.event_type in _TASK_ENDS:
            open_task = None
            if event.event_type == _WF_COMPLETED:
                last_completed = _identity(event)
    if open_task is not None and _identity(open_task).startswith(dead):
        kind = "workflow task"
    elif activity_running:
        kind = "activity"
    elif last_completed.startswith(dead):
        kind = "sticky"
    else:
        return None
    by_id = {e.event_id: e for e in events}
    steps: list[tuple[float, float, float, str]] = []  # (started, due, queued, what)
    chain_start: float | None = None  # the first WorkflowTaskScheduled since the last completed task
    for event in events:
        if event.event_type == _WF_SCHEDULED and chain_start is None:
            chain_start = event_seconds(event)
        elif event.event_type == _WF_COMPLETED:
            chain_start = None
        if event.event_type not in (_WF_STARTED, _ACT_STARTED) or event_seconds(event) < kill_time:
            continue
        if _identity(event).startswith(dead):
            continue
        started = event_seconds(event)
        if event.event_type == _WF_STARTED:
            due = max(kill_time, chain_start if chain_start is not None else kill_time)
            scheduled = by_id.get(event.workflow_task_started_event_attributes.scheduled_event_id)
            shared = scheduled is not None and scheduled.workflow_task_scheduled_event_attributes.task_queue.kind != _STICKY
            queued = started - max(event_seconds(scheduled), due) if shared and scheduled is not None else 0.0
            steps.append((started, due, queued, "workflow task"))
            continue
        attributes = event.activity_task_started_event_attributes
        scheduled = by_id.get(attributes.scheduled_event_id)
        ready = event_seconds(scheduled) if scheduled is not None else kill_time
        due = max(kill_time, ready)
        # A retry's attempt became ready at a time history does not keep: all of its wait is failover.
        queued = started - due if attributes.attempt == 1 or ready >= kill_time else 0.0
        name = scheduled.activity_task_scheduled_event_attributes.activity_type.name if scheduled is not None else "?"
        steps.append((started, due, queued, f"{name} attempt {attributes.attempt}"))
    if not steps:
        return HeldSession(session_id, kind, None, 0.0, "none")
    started, due, queued, what = min(steps)
    return HeldSession(session_id, kind, started - due, max(0.0, queued), what)


def _retried_after_heartbeat_timeout(events: list[Any], kill_time: float) -> bool:
    """Whether an activity scheduled before ``kill_time`` had an attempt time out on its heartbeat
    and the next one start after ``kill_time``."""
    scheduled = {e.event_id: event_seconds(e) for e in events if e.event_type == _ACT_SCHEDULED}
    for event in events:
        if event.event_type != _ACT_STARTED or event_seconds(event) < kill_time:
            continue
        attributes = event.activity_task_started_event_attributes
        if (
            attributes.attempt > 1
            and attributes.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
            and scheduled.get(attributes.scheduled_event_id, kill_time) < kill_time
        ):
            return True
    return False


def timeline(events: Iterable[Any], kill_time: float, around: float = 15.0) -> list[str]:
    """The events within ``around`` seconds of ``kill_time``, one line each: offset from the kill,
    type, the worker's identity (its pid) where the event names one, an activity's type."""
    names: dict[int, str] = {}
    lines = []
    for event in events:
        if event.event_type == _ACT_SCHEDULED:
            names[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        offset = event_seconds(event) - kill_time
        if abs(offset) > around:
            continue
        kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        extra = _identity(event).split(" ")[0]
        if event.event_type == _ACT_SCHEDULED:
            extra = names[event.event_id]
        elif event.event_type == _ACT_STARTED:
            attributes = event.activity_task_started_event_attributes
            extra += f" {names.get(attributes.scheduled_event_id, '?')} attempt {attributes.attempt}"
        lines.append(f"{offset:+7.2f}s {kind} {extra}".rstrip())
    return lines


def live_task_timeouts(events: Iterable[Any], dead: str) -> int:
    """Workflow tasks a live worker (identity not starting with ``dead``) had started and did not
    complete within the workflow task timeout: a starved worker's, not the kill's."""
    started = ""
    count = 0
    for event in events:
        if event.event_type == _WF_STARTED:
            started = _identity(event)
        elif (
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
            and event.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
            and started and not started.startswith(dead)
        ):
            count += 1
    return count
