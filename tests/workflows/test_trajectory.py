"""TrajectoryRecorder (workflows/_trajectory.py): steps numbered per turn, inputs kept small, outcomes mapped."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from agentrt.schemas import TRAJECTORY_INPUT_CHARS, TurnOutcome, arguments_sha256
from agentrt.workflows._trajectory import MAX_INPUT_DEPTH, TrajectoryRecorder, trimmed_input

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_steps_are_numbered_from_zero_within_each_turn() -> None:
    recorder = TrajectoryRecorder()
    recorder.start("turn-1")
    first = recorder.step("turn-1", 1, "fs.list", {"path": "."}, "ok", "a.txt", T0, T0 + timedelta(milliseconds=12))
    second = recorder.step("turn-1", 2, "fs.read", {"path": "a.txt"}, "ok", "hello", None, T0)
    recorder.complete(TurnOutcome(turn_id="turn-1", status="completed", rounds=3))
    recorder.start("turn-2")
    third = recorder.step("turn-2", 1, "fs.list", {}, "ok", "", T0, T0)

    assert first is not None and second is not None and third is not None
    assert [first.index, second.index, third.index] == [0, 1, 0]
    assert (first.duration_ms, second.duration_ms) == (12, 0)


def test_a_step_outside_an_open_trajectory_records_nothing() -> None:
    recorder = TrajectoryRecorder()

    assert recorder.step("turn-1", 1, "fs.list", {}, "ok", "", T0, T0) is None
    assert recorder.complete(TurnOutcome(turn_id="turn-1", status="completed")) is None


def test_a_long_input_is_cut_but_its_sha256_is_of_the_whole() -> None:
    recorder = TrajectoryRecorder()
    recorder.start("t")
    arguments = {"path": "big.txt", "content": "x" * 100_000}

    step = recorder.step("t", 1, "fs.write", arguments, "ok", "wrote", T0, T0)

    assert step is not None
    assert len(step.action_input["content"]) == TRAJECTORY_INPUT_CHARS
    assert step.input_sha256 == arguments_sha256(arguments)


def test_deeply_nested_input_is_cut_at_the_depth_bound() -> None:
    nested: dict = {}
    inner = nested
    for _ in range(100):
        inner["a"] = {}
        inner = inner["a"]

    trimmed = trimmed_input(nested)

    depth = 0
    while isinstance(trimmed, dict):
        trimmed = trimmed["a"]
        depth += 1
    assert trimmed == "…" and depth == MAX_INPUT_DEPTH


def test_outcomes_map_to_success_failed_and_cancelled() -> None:
    recorder = TrajectoryRecorder()
    results = []
    for status, failure in [("completed", None), ("round_limit", None), ("failed", None), ("cancelled", None), ("completed", "advisor rejected: no")]:
        recorder.start("t")
        recorder.failure = failure
        done = recorder.complete(TurnOutcome(turn_id="t", status=status, error="why"))
        assert done is not None
        results.append((done.outcome, done.reason))

    assert results == [
        ("success", None), ("failed", "why"), ("failed", "why"), ("cancelled", "why"), ("failed", "advisor rejected: no"),
    ]


def test_a_long_action_name_is_cut() -> None:
    recorder = TrajectoryRecorder()
    recorder.start("t")

    step = recorder.step("t", 1, "x" * 300_000, {}, "unknown_tool", "", T0, T0)

    assert step is not None and len(step.action) == TRAJECTORY_INPUT_CHARS
