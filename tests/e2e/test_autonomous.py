"""Autonomous tasks end to end on a virtual clock: days of durable timers pass in seconds
(``TimeSkipper``), while sessions, acceptance commands and store writes run for real."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path
from typing import Callable, Iterator

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from agentrt.schemas import (
    MIN_DEFER_SECONDS,
    AutonomousTaskBudgetExceeded,
    AutonomousTaskBudgetRaised,
    AutonomousTaskCancelled,
    AutonomousTaskCheckpointed,
    AutonomousTaskFailed,
    AutonomousTaskPaused,
    AutonomousTaskSessionStarted,
    AutonomousTaskWaiting,
    AutonomyDecision,
    Budget,
    Event,
    ModelRequestStarted,
    RequestRejected,
    SessionPaused,
    TaskNotFound,
    UserMessageAdded,
)
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._support import ALLOW_ALL, kill_hard, session_config, worker_process, write_script
from tests.e2e._tasks import OWNER, TaskRig, describe_event, write_file, write_task_script

DAY = 86_400.0
PASS = {"verdict": "pass", "summary": "the goal is met"}
FAIL = {"verdict": "fail", "findings": ["not finished"], "summary": "more to do"}


@pytest.fixture
def rig(harness: Harness) -> Iterator[TaskRig]:
    rig = TaskRig.on(harness)
    yield rig
    RECORDED_HISTORIES.extend(rig.workflow_handles())  # tests/test_replay.py replays them


async def test_a_daily_task_runs_three_sessions_over_three_days_and_completes_when_its_command_passes(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [
        [write_file("part1.txt", "one"), {"text": "wrote part 1; parts 2 and done remain"}],
        [write_file("part2.txt", "two"), {"text": "wrote part 2; done remains"}],
        [write_file("done.txt", "done"), {"text": "all parts written"}],
    ])
    config = rig.config(
        workspace, script, goal="write part1.txt, part2.txt and done.txt, one a day",
        acceptance={"command": "test -f done.txt"}, schedule={"every_seconds": DAY}, approval=ALLOW_ALL, max_sessions=5,
    )
    task_id = await rig.start(config)

    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 3
    events = rig.stored_events(task_id)
    print(f"\nevents of task {task_id}:")
    for event in events:
        print(describe_event(event))
    per_session = [
        "AutonomyDecision", "AutonomousTaskSessionStarted", "AutonomousTaskSessionEnded", "AutonomousTaskAcceptanceChecked",
        "AutonomousTaskCheckpointed",
    ]
    assert [e.type for e in events if e.type != "AutonomousTaskStatusChanged"] == [
        "AutonomousTaskCreated",
        *per_session, "AutonomousTaskWaiting",
        *per_session, "AutonomousTaskWaiting",
        *per_session, "AutonomousTaskCompleted",
    ]
    checkpoints = [e.checkpoint for e in events if isinstance(e, AutonomousTaskCheckpointed)]
    assert [(c.session_status, c.accepted) for c in checkpoints] == [("completed", False), ("completed", False), ("completed", True)]
    gaps = [later.at - earlier.at for earlier, later in zip(checkpoints, checkpoints[1:])]
    assert all(timedelta(days=1) <= gap < timedelta(days=1, minutes=5) for gap in gaps), gaps
    assert [c.number for c in rig.store.task_checkpoints(task_id)] == [1, 2, 3]
    assert sorted(p.name for p in workspace.glob("*.txt")) == ["done.txt", "part1.txt", "part2.txt"]


async def test_a_trigger_that_defers_holds_the_task_until_it_says_execute(rig: TaskRig, workspace: Path, tmp_path: Path) -> None:
    script = write_task_script(tmp_path, [[{"text": "went"}]])
    trigger = "if [ -f go ]; then echo execute the go file is there; else echo defer 3600 no go file yet; fi"
    config = rig.config(workspace, script, schedule={"trigger_command": trigger})
    task_id = await rig.start(config, skipping=False)

    first = await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomyDecision))
    assert (first.decision, first.source, first.seconds) == ("defer", "trigger", 3600.0)
    assert not any(isinstance(e, AutonomousTaskSessionStarted) for e in rig.stored_events(task_id))
    (workspace / "go").write_text("")
    await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id), timedelta(hours=1)), 60)
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 1
    events = rig.stored_events(task_id)
    decisions = [e for e in events if isinstance(e, AutonomyDecision)]
    assert [(d.decision, d.source) for d in decisions] == [("defer", "trigger"), ("execute", "trigger")]
    assert decisions[1].at - decisions[0].at >= timedelta(hours=1)
    assert decisions[1].reason == "the go file is there"
    started = [e for e in events if isinstance(e, AutonomousTaskSessionStarted)]
    assert [e.seq for e in started] == [decisions[1].seq + 1]


async def test_a_task_paused_while_it_sleeps_starts_no_session_until_it_is_resumed(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    config = rig.config(workspace, script, schedule={"every_seconds": DAY})
    task_id = await rig.start(config, skipping=False)
    await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed))
    await rig.wait_status(task_id, "waiting")

    paused = await rig.client.pause_task(task_id)
    assert (paused.status, paused.sessions, paused.paused_by) == ("paused", 1, OWNER)
    # Two virtual days pass: the day's wake would have come, but a paused task has no timer.
    assert await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id), timedelta(days=2)), 60)
    first = await rig.client.task_status(task_id)
    await asyncio.sleep(1.0)
    second = await rig.client.task_status(task_id)
    assert [(v.status, v.sessions, v.running_session) for v in (first, second)] == [("paused", 1, None)] * 2
    assert await _status_of(rig, task_id, 2) is None

    resumed = await rig.client.resume_task(task_id)
    assert resumed.status == "waiting"
    await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id)), 60)
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 2
    types = [e.type for e in rig.stored_events(task_id) if e.type != "AutonomousTaskStatusChanged"]
    assert types[types.index("AutonomousTaskPaused") :] == [
        "AutonomousTaskPaused", "AutonomousTaskResumed", "AutonomyDecision", "AutonomousTaskSessionStarted",
        "AutonomousTaskSessionEnded", "AutonomousTaskAcceptanceChecked", "AutonomousTaskCheckpointed",
        "AutonomousTaskCompleted",
    ]


async def test_a_task_paused_during_a_session_pauses_it_and_starts_no_call_check_or_session_until_resumed(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    listing = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}], "delay_seconds": 2.0}
    script = write_task_script(tmp_path, [[listing, {"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}))
    session_id = await rig.session_id(task_id, 1)
    await _session_event(rig, session_id, lambda e: isinstance(e, ModelRequestStarted))

    paused = await rig.client.pause_task(task_id, reason="hold on")
    assert (paused.status, paused.running_session) == ("paused", session_id)
    again = await rig.client.pause_task(task_id)  # a pause of a paused task is no error and changes nothing
    assert (again.status, again.paused_by) == ("paused", OWNER)
    # The session pauses with the task: its model call in flight ends, the tool call it asked for waits.
    pause = await _session_event(rig, session_id, lambda e: isinstance(e, SessionPaused))
    assert isinstance(pause, SessionPaused) and (pause.principal, pause.reason) == (OWNER, "hold on")
    await _session_event(rig, session_id, lambda e: e.type == "AssistantMessageCompleted")
    state = await rig.client.state(session_id)
    assert state.status == "paused" and state.active_turn_id is not None
    assert not [e for e in (await rig.client.events(session_id)).events if e.type == "ToolInvocationStarted"]
    view = await rig.client.task_status(task_id)
    assert (view.status, view.sessions, view.running_session, view.checkpoint) == ("paused", 1, session_id, None)

    resumed = await rig.client.resume_task(task_id)
    assert resumed.status == "running"  # its session goes on
    result = await rig.wait(task_id)
    assert result.status == "completed" and result.sessions == 2
    types = [e.type for e in rig.stored_events(task_id)]
    assert types.count("AutonomousTaskPaused") == 1 and types.index("AutonomousTaskResumed") < types.index("AutonomousTaskCheckpointed")


async def test_a_worker_killed_while_a_task_sleeps_is_replaced_and_each_session_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = TaskRig.on(harness, task_queue=harness.task_queue + "-proc")
    script = write_task_script(tmp_path, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}), skipping=False)
        await asyncio.wait_for(_timer_started(rig, task_id), 60)  # asleep until tomorrow
        kill_hard(first)
    with worker_process(harness, log):
        await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id)), 120)
        result = await rig.wait(task_id)
        queried = (await rig.client.task_events(task_id)).events
    RECORDED_HISTORIES.extend(rig.workflow_handles())

    assert result.status == "completed" and result.sessions == 2
    await _assert_ran_once(rig, task_id, queried, sessions=2)
    assert len(await _workflow_task_workers(rig.handle(task_id))) == 2


async def test_a_worker_killed_while_a_task_s_session_runs_is_replaced_and_each_session_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = TaskRig.on(harness, task_queue=harness.task_queue + "-proc")
    script = write_task_script(
        tmp_path, [[{"text": "half done", "delay_seconds": 4}], [{"text": "all done"}]], reviews=[FAIL, PASS]
    )
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}))
        session_id = await rig.session_id(task_id, 1)
        await _session_event(rig, session_id, lambda e: isinstance(e, ModelRequestStarted))
        await asyncio.sleep(1.0)  # the slow model call is in flight
        kill_hard(first)
    with worker_process(harness, log):
        result = await rig.wait(task_id, timeout=120)
        queried = (await rig.client.task_events(task_id)).events
    RECORDED_HISTORIES.extend(rig.workflow_handles())

    assert result.status == "completed" and result.sessions == 2
    await _assert_ran_once(rig, task_id, queried, sessions=2)
    answers = [m.text for _, m in rig.store.messages(session_id) if m.role == "assistant"]
    assert answers == ["half done"]
    first_session = await rig.session_handle(task_id, 1).fetch_history()
    retried = [
        e for e in first_session.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED and e.activity_task_started_event_attributes.attempt > 1
    ]
    assert retried, "the model call cut off by the kill ran again on the new worker"
    assert len(await _workflow_task_workers(rig.session_handle(task_id, 1))) == 2


async def test_a_task_whose_budget_runs_out_stops_until_the_budget_is_raised_and_its_spend_is_its_receipts(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [
        [write_file("a.txt", "a"), {"text": "never reached"}],
        [{"text": "done with a bigger budget"}],
    ])
    config = rig.config(workspace, script, approval=ALLOW_ALL, budget=Budget(max_tokens=1_000))
    task_id = await rig.start(config)

    await rig.wait_status(task_id, "budget_exceeded")
    stopped = await rig.client.task_status(task_id)
    assert stopped.sessions == 1 and stopped.checkpoint is not None
    assert stopped.checkpoint.session_status == "budget_exceeded"
    assert stopped.budget_crossing is not None and stopped.budget_crossing.dimension == "tokens"
    exceeded = [e for e in rig.stored_events(task_id) if isinstance(e, AutonomousTaskBudgetExceeded)]
    assert len(exceeded) == 1 and exceeded[0].crossing.limit == 1_000

    raised = await rig.client.raise_task_budget(task_id, Budget(max_tokens=1_000_000))
    assert raised.budget.max_tokens == 1_000_000
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 2
    view = await rig.client.task_status(task_id)
    assert [(r.number, r.kind) for r in view.receipts] == [(1, "session"), (2, "session"), (2, "review")]
    receipts = view.receipts
    assert view.spend.usage.input_tokens == sum(r.spend.usage.input_tokens for r in receipts) > 1_000
    assert view.spend.usage.output_tokens == sum(r.spend.usage.output_tokens for r in receipts)
    assert view.spend.tool_calls == sum(r.spend.tool_calls for r in receipts)
    assert view.spend.cost_usd == pytest.approx(sum(r.spend.cost_usd for r in receipts))
    assert not (workspace / "a.txt").exists()  # the first session stopped before its tool call ran


async def test_cancelling_a_task_mid_session_cancels_its_session_and_ends_the_task(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "too late", "delay_seconds": 120}], [{"text": "never"}]])
    task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}))
    session_id = await rig.session_id(task_id, 1)
    await _session_event(rig, session_id, lambda e: isinstance(e, ModelRequestStarted))

    view = await rig.client.cancel_task(task_id, reason="changed my mind")
    result = await rig.wait(task_id)

    assert view.status == "cancelled" and result.status == "cancelled"
    cancelled = [e for e in rig.stored_events(task_id) if isinstance(e, AutonomousTaskCancelled)]
    assert [(e.principal, e.reason, e.session_id) for e in cancelled] == [(OWNER, "changed my mind", session_id)]
    assert await _status_of(rig, task_id, 1) == WorkflowExecutionStatus.CANCELED
    assert await _status_of(rig, task_id, 2) is None


async def test_a_task_that_is_never_accepted_fails_after_its_last_session(rig: TaskRig, workspace: Path, tmp_path: Path) -> None:
    script = write_task_script(tmp_path, [[{"text": "tried"}], [{"text": "tried again"}]])
    config = rig.config(workspace, script, acceptance={"command": "test -f never.txt"}, max_sessions=2, schedule={"every_seconds": DAY})
    task_id = await rig.start(config)

    result = await rig.wait(task_id)

    assert (result.status, result.failure_reason, result.sessions) == ("failed", "max_sessions", 2)
    failed = [e for e in rig.stored_events(task_id) if isinstance(e, AutonomousTaskFailed)]
    assert [(e.reason, e.sessions) for e in failed] == [("max_sessions", 2)]
    view = await rig.client.task_status(task_id)
    assert view.status == "failed" and view.failure_reason == "max_sessions"
    assert await _status_of(rig, task_id, 3) is None


async def test_a_stranger_cannot_steer_a_task_and_an_operator_must_give_a_reason(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    config = rig.config(workspace, script, schedule={"every_seconds": DAY}, operators=["ops"])
    task_id = await rig.start(config, skipping=False)
    await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed))
    await rig.wait_status(task_id, "waiting")
    before = await rig.client.task_status(task_id)
    stranger, operator = rig.as_principal("mallory"), rig.as_principal("ops", operators=["ops"])

    with pytest.raises(TaskNotFound):  # another owner's task answers as a missing one
        await stranger.pause_task(task_id, reason="mine now")
    with pytest.raises(TaskNotFound):
        await stranger.cancel_task(task_id, reason="mine now")
    with pytest.raises(TaskNotFound):
        await stranger.raise_task_budget(task_id, Budget(max_tokens=10**9), reason="mine now")
    with pytest.raises(RequestRejected, match="operator 'ops' must give a reason to pause"):
        await operator.pause_task(task_id)
    after = await rig.client.task_status(task_id)
    assert after.model_dump(exclude={"spend", "remaining"}) == before.model_dump(exclude={"spend", "remaining"})

    paused = await operator.pause_task(task_id, reason="maintenance window")
    assert paused.status == "paused" and paused.paused_by == "ops"
    stored = rig.stored_events(task_id)
    last = [e for e in stored if e.type != "AutonomousTaskStatusChanged"][-1]
    assert isinstance(last, AutonomousTaskPaused) and (last.principal, last.reason) == ("ops", "maintenance window")
    assert [e.status for e in stored if e.type == "AutonomousTaskStatusChanged"][-1] == "paused"  # type: ignore[union-attr]
    await rig.client.cancel_task(task_id)


async def test_a_session_that_ends_at_its_round_limit_is_continued_by_the_next_session_at_once(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    listing = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
    script = write_task_script(tmp_path, [[listing, listing, {"text": "unreached"}], [{"text": "finished"}]])
    config = rig.config(workspace, script, max_rounds_per_session=2, schedule={"every_seconds": DAY})
    task_id = await rig.start(config)

    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 2
    events = rig.stored_events(task_id)
    decisions = [e for e in events if isinstance(e, AutonomyDecision)]
    assert [(d.decision, d.source) for d in decisions] == [("execute", "schedule"), ("execute", "continuation")]
    checkpoints = [e.checkpoint for e in events if isinstance(e, AutonomousTaskCheckpointed)]
    assert [c.session_status for c in checkpoints] == ["round_limit", "completed"]
    assert not any(isinstance(e, AutonomousTaskWaiting) for e in events)
    assert decisions[1].at - checkpoints[0].at < timedelta(minutes=1)


async def test_an_amended_goal_reaches_the_next_session_s_orientation_prompt(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "drafted in English"}], [{"text": "translated"}]], reviews=[FAIL, PASS])
    config = rig.config(workspace, script, goal="write the release notes", schedule={"every_seconds": DAY})
    task_id = await rig.start(config, skipping=False)
    await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed))
    await rig.wait_status(task_id, "waiting")

    amended = await rig.client.amend_task_goal(task_id, "write the release notes in French", criteria=["in French"])
    assert amended.goal == "write the release notes in French"
    await rig.client.nudge_task(task_id, reason="go now")
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 2
    first, second = (_first_prompt(rig, task_id, n) for n in (1, 2))
    assert "## Goal\nwrite the release notes\n" in first and "French" not in first
    assert "## Goal\nwrite the release notes in French\n" in second and "- in French" in second
    assert '<<<checkpoint\ndone: "drafted in English"\n' in second


async def test_a_trigger_that_defers_for_less_than_the_minimum_sleeps_the_minimum_and_does_not_spin(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "never"}]])
    config = rig.config(workspace, script, schedule={"trigger_command": "echo defer 0.0001 not yet"})
    task_id = await rig.start(config, skipping=False)

    first = await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomyDecision))
    assert (first.decision, first.seconds) == ("defer", MIN_DEFER_SECONDS)
    assert await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id), timedelta(minutes=1)), 60)
    await rig.client.cancel_task(task_id)

    decisions = [e for e in rig.stored_events(task_id) if isinstance(e, AutonomyDecision)]
    assert {(d.decision, d.seconds) for d in decisions} == {("defer", MIN_DEFER_SECONDS)}
    assert all(later.at - earlier.at >= timedelta(seconds=MIN_DEFER_SECONDS) for earlier, later in zip(decisions, decisions[1:]))
    in_the_minute = [d for d in decisions if d.at - first.at <= timedelta(minutes=1)]
    assert 2 <= len(in_the_minute) <= 7, [describe_event(d) for d in decisions]
    assert rig.session_ids(task_id) == {}


async def test_a_task_whose_cron_never_fires_fails_at_once_with_invalid_schedule_and_runs_no_session(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "never"}]])
    task_id = await rig.start(rig.config(workspace, script, schedule={"cron": "0 0 30 2 *"}))  # 30 February

    result = await rig.wait(task_id)

    assert (result.status, result.failure_reason, result.sessions) == ("failed", "invalid_schedule", 0)
    events = [e for e in rig.stored_events(task_id) if e.type != "AutonomousTaskStatusChanged"]
    assert [e.type for e in events] == ["AutonomousTaskCreated", "AutonomousTaskFailed"]
    assert isinstance(events[1], AutonomousTaskFailed) and events[1].reason == "invalid_schedule"
    assert (await rig.client.task_status(task_id)).failure_reason == "invalid_schedule"


async def test_a_raise_budget_that_lowers_a_limit_is_rejected_and_changes_nothing(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    config = rig.config(workspace, script, schedule={"every_seconds": DAY}, budget=Budget(max_tokens=1_000_000), max_sessions=5)
    task_id = await rig.start(config, skipping=False)
    await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed))
    await rig.wait_status(task_id, "waiting")
    before = await rig.client.task_status(task_id)

    with pytest.raises(RequestRejected, match=r"cannot lower a limit of task .*max_tokens 1,000,000 -> 1,000"):
        await rig.client.raise_task_budget(task_id, Budget(max_tokens=1_000))
    with pytest.raises(RequestRejected, match=r"cannot lower max_sessions of task .*\(5 -> 3\)"):
        await rig.client.raise_task_budget(task_id, max_sessions=3)

    after = await rig.client.task_status(task_id)
    assert after.model_dump(exclude={"spend", "remaining"}) == before.model_dump(exclude={"spend", "remaining"})
    assert (after.budget.max_tokens, after.max_sessions) == (1_000_000, 5)
    assert not any(isinstance(e, AutonomousTaskBudgetRaised) for e in rig.stored_events(task_id))
    await rig.client.cancel_task(task_id)


async def test_a_stranger_s_session_with_the_id_task_id_s2_does_not_touch_the_task(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    config = rig.config(workspace, write_task_script(tmp_path, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS]))
    task_id = config.task_id
    stranger = rig.as_principal("mallory")
    squatted = f"{task_id}-s2"  # session 2's id without the task's random token
    squatter = session_config(stranger, squatted, workspace, write_script(tmp_path, [{"text": "mine now"}]))
    started = await stranger.start(squatter, "take the task's session")
    assert (await stranger.wait(squatted, started.turn_id)).answer == "mine now"

    await rig.start(config)
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 2
    ids = rig.session_ids(task_id)
    assert sorted(ids) == [1, 2] and squatted not in ids.values()
    assert all(re.fullmatch(rf"{task_id}-s{n}-[0-9a-f]{{8}}", ids[n]) for n in ids), ids
    assert [await rig.session_status(task_id, n) for n in (1, 2)] == [WorkflowExecutionStatus.COMPLETED] * 2
    checkpoints = [e.checkpoint for e in rig.stored_events(task_id) if isinstance(e, AutonomousTaskCheckpointed)]
    assert [(c.session_id, c.session_status, c.error) for c in checkpoints] == [
        (ids[1], "completed", None), (ids[2], "completed", None)
    ]
    assert [m.text for _, m in rig.store.messages(squatted)] == ["take the task's session", "mine now"]
    assert (await stranger.state(squatted)).owner == "mallory"


async def _session_event(rig: TaskRig, session_id: str, predicate: Callable[[Event], bool], timeout: float = 60.0) -> Event:
    """Poll the store until one of a child session's events matches."""

    async def poll() -> Event:
        while True:
            for event in await asyncio.to_thread(rig.store.events, session_id):
                if predicate(event):
                    return event
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), timeout)


async def _status_of(rig: TaskRig, task_id: str, number: int) -> WorkflowExecutionStatus | None:
    """How child session ``number``'s workflow stands, or None when the task never started it."""
    try:
        return await rig.session_status(task_id, number)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _timer_started(rig: TaskRig, task_id: str) -> None:
    """Wait until the task's history holds a started timer (read from the server: no worker needed)."""
    while not any(e.event_type == EventType.EVENT_TYPE_TIMER_STARTED for e in (await rig.handle(task_id).fetch_history()).events):
        await asyncio.sleep(0.2)


async def _assert_ran_once(rig: TaskRig, task_id: str, queried: list[Event], *, sessions: int) -> None:
    """The task started each of its ``sessions`` child sessions once (each completed, none after),
    and the store holds each of its events once, as the workflow numbered them."""
    stored = rig.stored_events(task_id)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert [(e.seq, e.type) for e in stored] == [(e.seq, e.type) for e in queried]
    started = [e.number for e in stored if isinstance(e, AutonomousTaskSessionStarted)]
    assert started == list(range(1, sessions + 1))
    statuses = [await _status_of(rig, task_id, n) for n in range(1, sessions + 2)]
    assert statuses == [WorkflowExecutionStatus.COMPLETED] * sessions + [None]
    assert [c.number for c in rig.store.task_checkpoints(task_id)] == list(range(1, sessions + 1))


async def _workflow_task_workers(handle: WorkflowHandle) -> set[str]:
    """The identities of the workers that ran a workflow's workflow tasks."""
    history = await handle.fetch_history()
    return {
        e.workflow_task_started_event_attributes.identity
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    }


def _first_prompt(rig: TaskRig, task_id: str, number: int) -> str:
    """The first user message of the task's session ``number`` (its orientation prompt)."""
    added = [e for e in rig.store.events(rig.session_ids(task_id)[number]) if isinstance(e, UserMessageAdded)]
    return added[0].text
