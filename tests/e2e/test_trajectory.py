"""Trajectories of real turns: one step per tool invocation and approval wait, in order, with the
turn's outcome; the export folds them per turn."""

from __future__ import annotations

from pathlib import Path

from agentrt.schemas import (
    PermissionRequested,
    TrajectoryCompleted,
    TrajectoryStarted,
    TrajectoryStepRecorded,
    arguments_sha256,
    trajectory_from_events,
)
from tests.conftest import Harness
from tests.e2e._support import session_config, wait_for_event, write_script


async def test_a_turn_records_each_tool_step_and_approval_in_order(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    (workspace / "README.md").write_text("hello")
    write = {"path": "NOTES.md", "content": "notes " * 200}
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}, {"name": "nope.tool", "arguments": {}}]},
        {"tool_calls": [{"name": "fs.write", "arguments": write}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "take notes")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.approve(sid, requested.request.request_id, reason="fine")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    events = harness.store.events(sid, 0, 1000)
    types = [e.type for e in events]
    assert types.index("TrajectoryStarted") == types.index("TurnStarted") + 1
    assert types.index("TrajectoryCompleted") == types.index("TurnEnded") - 1
    steps = [e for e in events if isinstance(e, TrajectoryStepRecorded)]
    assert [(s.index, s.round, s.action, s.outcome) for s in steps] == [
        (0, 1, "fs.list", "ok"),
        (1, 2, "nope.tool", "unknown_tool"),  # refused at triage, before the batch's calls run
        (2, 2, "fs.read", "ok"),
        (3, 3, "approval", "grant"),
        (4, 3, "fs.write", "ok"),
    ]
    assert steps[2].observation == "hello" and steps[3].observation == "req-1: grant by alice: fine"
    assert steps[4].input_sha256 == arguments_sha256(write) and len(steps[4].action_input["content"]) < len(write["content"])
    assert steps[3].action_input["tool"] == "fs.write" and steps[3].action_input["arguments"]["path"] == "NOTES.md"
    assert steps[3].input_sha256 == arguments_sha256({"tool": "fs.write", "arguments": write})
    assert all(s.duration_ms >= 0 for s in steps)
    done = next(e for e in events if isinstance(e, TrajectoryCompleted))
    assert (done.outcome, done.steps, done.rounds) == ("success", 5, 4)

    exported = trajectory_from_events(sid, events)

    assert [t.turn_id for t in exported.turns] == [started.turn_id]
    turn = exported.turns[0]
    assert (turn.prompt, turn.outcome, len(turn.steps)) == ("take notes", "success", 5)
    assert turn.started_at is not None and turn.ended_at is not None and turn.ended_at >= turn.started_at


async def test_a_turn_at_its_round_limit_has_a_failed_trajectory(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    call = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
    script = write_script(tmp_path, [call, call, {"text": "late"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, max_rounds_per_turn=2), "go")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "round_limit"
    done = next(e for e in harness.store.events(sid, 0, 1000) if isinstance(e, TrajectoryCompleted))
    assert (done.outcome, done.steps) == ("failed", 2) and "2 rounds" in (done.reason or "")


async def test_a_cancelled_turn_has_a_cancelled_trajectory(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 60}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "wait")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, TrajectoryStarted))
    await harness.client.cancel(sid, started.turn_id, reason="changed my mind")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "cancelled"
    done = next(e for e in harness.store.events(sid, 0, 1000) if isinstance(e, TrajectoryCompleted))
    assert done.outcome == "cancelled" and "changed my mind" in (done.reason or "")


async def test_calls_with_different_malformed_arguments_have_different_input_hashes(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments_raw": "{\"path\": "}, {"name": "fs.read", "arguments_raw": "{rm -rf"}]},
        {"text": "gave up"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "read")

    await harness.client.wait(sid, started.turn_id)

    steps = [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, TrajectoryStepRecorded)]
    assert [s.outcome for s in steps] == ["invalid_arguments", "invalid_arguments"]
    assert steps[0].input_sha256 != steps[1].input_sha256 and steps[1].action_input == {"arguments_raw": "{rm -rf"}


async def test_a_turn_cancelled_during_an_approval_wait_records_the_wait_as_a_cancelled_step(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "never"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "write")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.cancel(sid, started.turn_id, reason="not now")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "cancelled"
    steps = [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, TrajectoryStepRecorded)]
    assert [(s.action, s.outcome) for s in steps] == [("approval", "cancelled"), ("fs.write", "cancelled")]
    assert steps[0].action_input == {"tool": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}
