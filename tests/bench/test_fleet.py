"""bench.fleet's reading of history: which sessions a killed worker held and when each took its next
step elsewhere; and its loopback model's answers."""

from __future__ import annotations

from typing import Any

import pytest

from temporalio.api.enums.v1 import EventType, TaskQueueKind
from temporalio.api.history.v1 import HistoryEvent

from bench.fleet import answer, held_session

KILL = 1_000.0
DEAD, LIVE = "111@host", "222@host"


def _event(event_id: int, at: float, kind: int, **attributes: Any) -> HistoryEvent:
    event = HistoryEvent(event_id=event_id, event_type=kind)  # type: ignore[arg-type]
    event.event_time.FromNanoseconds(int(at * 1e9))
    field = {
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED: "workflow_task_scheduled_event_attributes",
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED: "workflow_task_started_event_attributes",
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: "workflow_task_completed_event_attributes",
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT: "workflow_task_timed_out_event_attributes",
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity_task_scheduled_event_attributes",
        EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED: "activity_task_started_event_attributes",
    }[kind]
    target = getattr(event, field)
    for name, value in attributes.items():
        if name == "activity_type":
            target.activity_type.name = value
        elif name == "sticky":
            target.task_queue.kind = TaskQueueKind.TASK_QUEUE_KIND_STICKY if value else TaskQueueKind.TASK_QUEUE_KIND_NORMAL
        else:
            setattr(target, name, value)
    return event


def test_a_workflow_task_the_dead_worker_had_started_waits_until_it_times_out_then_queues() -> None:
    events = [
        _event(1, KILL - 1.0, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, sticky=True),
        _event(2, KILL - 0.5, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, scheduled_event_id=1, identity=DEAD),
        _event(3, KILL + 3.5, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT),
        _event(4, KILL + 3.5, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, sticky=False),
        _event(5, KILL + 3.75, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, scheduled_event_id=4, identity=LIVE),
    ]

    held = held_session("s1", events, "111@", KILL, activity_running=False)

    assert held is not None and held.kind == "workflow task" and held.next_step == "workflow task"
    assert (held.delay, held.queued, held.failover) == pytest.approx((3.75, 0.25, 3.5))


def test_an_idle_session_in_the_dead_workers_cache_counts_from_its_next_task_not_from_the_kill() -> None:
    events = [
        _event(1, KILL - 9.0, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, sticky=False),
        _event(2, KILL - 8.9, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, scheduled_event_id=1, identity=DEAD),
        _event(3, KILL - 8.8, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, identity=DEAD),
        # The next message, 20 s after the kill: on the sticky queue, which times out after 3 s.
        _event(4, KILL + 20.0, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, sticky=True),
        _event(5, KILL + 23.0, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT),
        _event(6, KILL + 23.0, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, sticky=False),
        _event(7, KILL + 23.5, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, scheduled_event_id=6, identity=LIVE),
    ]

    held = held_session("s2", events, "111@", KILL, activity_running=False)

    assert held is not None and held.kind == "sticky"
    assert (held.delay, held.queued) == pytest.approx((3.5, 0.5))


def test_a_retried_call_counts_from_the_kill_and_a_session_the_dead_worker_never_ran_is_not_held() -> None:
    retried = [
        _event(1, KILL - 2.0, EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
        _event(2, KILL - 1.9, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, scheduled_event_id=1, identity=LIVE),
        _event(3, KILL - 1.8, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, identity=LIVE),
        _event(4, KILL - 1.8, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, activity_type="provider.complete"),
        # Written with its result, stamped with the retry's start.
        _event(5, KILL + 3.6, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, scheduled_event_id=4, identity=LIVE, attempt=2),
    ]

    held = held_session("s3", retried, "111@", KILL, activity_running=True)

    assert held is not None and held.kind == "activity" and held.next_step == "provider.complete attempt 2"
    assert (held.delay, held.queued) == pytest.approx((3.6, 0.0))
    assert held_session("s4", retried, "111@", KILL, activity_running=False) is None


def test_the_loopback_model_calls_the_tool_for_the_users_line_then_answers() -> None:
    tools = [{"type": "function", "function": {"name": "fleet__append", "parameters": {}}}]
    first = answer({"messages": [{"role": "user", "content": "s1 turn 2: append s1 t2"}], "tools": tools})
    [call] = first[0]["choices"][0]["delta"]["tool_calls"]
    assert call["function"]["name"] == "fleet__append" and '"line": "s1 t2"' in call["function"]["arguments"]
    after = answer({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "appended"}], "tools": tools})
    assert after[0]["choices"][0]["delta"]["content"] == "done"
