"""``StatusLog`` (workflows/_frame.py): the statuses a task or graph shows become events, each
change once, numbered and naming the one before; pure bookkeeping over the carried state."""

from __future__ import annotations

from agentrt.schemas import AutonomousTaskStatusChanged, GraphState, TaskGraphStatusChanged, TaskState
from agentrt.workflows._frame import StatusLog


def test_each_status_change_is_one_event_numbered_with_the_status_before() -> None:
    state, emitted = GraphState(), []
    log = StatusLog(True, state, TaskGraphStatusChanged, emitted.append)

    for status in ["planning", "planning", "approved", "executing", "executing", "completed"]:
        log.seen(status)

    assert [(e.status, e.previous, e.change) for e in emitted] == [  # type: ignore[attr-defined]
        ("planning", None, 1), ("approved", "planning", 2), ("executing", "approved", 3), ("completed", "executing", 4),
    ]
    assert (state.recorded_status, state.status_changes) == ("completed", 4)


def test_a_continued_run_goes_on_counting_from_the_carried_state() -> None:
    first, emitted = TaskState(), []
    StatusLog(True, first, AutonomousTaskStatusChanged, emitted.append).seen("waiting")
    carried = TaskState.model_validate_json(first.model_dump_json())  # through continue-as-new
    log = StatusLog(True, carried, AutonomousTaskStatusChanged, emitted.append)

    log.seen("waiting")
    log.seen("running")

    assert [(e.status, e.change) for e in emitted] == [("waiting", 1), ("running", 2)]  # type: ignore[attr-defined]


def test_without_the_patch_no_status_is_recorded() -> None:
    state, emitted = TaskState(), []
    log = StatusLog(False, state, AutonomousTaskStatusChanged, emitted.append)

    log.seen("running")

    assert emitted == [] and (state.recorded_status, state.status_changes) == (None, 0)
