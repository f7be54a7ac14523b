"""diff_trajectories on hand-built trajectories: alignment, what counts as changed, the summary, the output."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from agentrt.client import TrajectoryDiff, diff_lines, diff_trajectories
from agentrt.schemas import Trajectory, TrajectoryStep, TurnTrajectory

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def step(index: int, action: str, *, sha: str | None = None, outcome: str = "ok", ms: int = 10) -> TrajectoryStep:
    return TrajectoryStep(
        index=index, round=index + 1, action=action, input_sha256=sha or f"sha-{action}", outcome=outcome, duration_ms=ms
    )


def turn(turn_id: str, *steps: TrajectoryStep, outcome: str | None = "success", seconds: float = 1.0) -> TurnTrajectory:
    return TurnTrajectory(
        turn_id=turn_id, started_at=T0, ended_at=T0 + timedelta(seconds=seconds), outcome=outcome,  # type: ignore[arg-type]
        rounds=len(steps) + 1, steps=list(steps),
    )


def trajectory(session_id: str, *turns: TurnTrajectory) -> Trajectory:
    return Trajectory(session_id=session_id, turns=list(turns))


def test_the_same_steps_with_other_durations_are_equivalent() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.list", ms=10), step(1, "fs.read", ms=20)))
    b = trajectory("b", turn("turn-1", step(0, "fs.list", ms=15), step(1, "fs.read", ms=5), seconds=2))

    diff = diff_trajectories(a, b)

    assert diff.summary.equivalent and diff.summary.same == 2
    assert [s.duration_delta_ms for s in diff.turns[0].steps] == [5, -15]
    assert diff.summary.duration_delta_ms == -10
    assert (diff.turns[0].duration_ms_a, diff.turns[0].duration_ms_b) == (1000, 2000)


def test_another_input_hash_is_a_changed_input() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.read", sha="x")))
    b = trajectory("b", turn("turn-1", step(0, "fs.read", sha="y")))

    diff = diff_trajectories(a, b)

    [only] = diff.turns[0].steps
    assert (only.status, only.changes) == ("changed", ["input"])
    assert not diff.summary.equivalent and diff.summary.changed_input == 1 and diff.summary.changed_outcome == 0


def test_another_outcome_is_a_changed_outcome() -> None:
    a = trajectory("a", turn("turn-1", step(0, "shell.run", outcome="ok")))
    b = trajectory("b", turn("turn-1", step(0, "shell.run", outcome="denied")))

    [only] = diff_trajectories(a, b).turns[0].steps

    assert (only.status, only.changes, only.outcome_a, only.outcome_b) == ("changed", ["outcome"], "ok", "denied")


def test_steps_are_aligned_by_action_so_an_inserted_step_is_only_in_b() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.list"), step(1, "fs.read")))
    b = trajectory("b", turn("turn-1", step(0, "fs.list"), step(1, "fs.search"), step(2, "fs.read")))

    steps = diff_trajectories(a, b).turns[0].steps

    assert [(s.status, s.action, s.index_a, s.index_b) for s in steps] == [
        ("same", "fs.list", 0, 0),
        ("only_b", "fs.search", None, 1),
        ("same", "fs.read", 1, 2),
    ]


def test_a_replaced_step_is_only_in_a_then_only_in_b() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.read"), step(1, "fs.write")))
    b = trajectory("b", turn("turn-1", step(0, "fs.read"), step(1, "shell.run")))

    diff = diff_trajectories(a, b)

    assert [(s.status, s.action) for s in diff.turns[0].steps] == [
        ("same", "fs.read"), ("only_a", "fs.write"), ("only_b", "shell.run"),
    ]
    assert (diff.summary.only_a, diff.summary.only_b) == (1, 1)


def test_turns_are_paired_in_order_and_a_missing_turn_is_only_on_one_side() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.read")), turn("turn-2", step(0, "fs.write")))
    b = trajectory("b", turn("turn-7", step(0, "fs.read")))

    diff = diff_trajectories(a, b)

    assert [(t.status, t.turn_id_a, t.turn_id_b) for t in diff.turns] == [("same", "turn-1", "turn-7"), ("only_a", "turn-2", None)]
    assert diff.turns[1].steps[0].status == "only_a"
    assert not diff.summary.equivalent and (diff.summary.turns_a, diff.summary.turns_b) == (2, 1)


def test_a_changed_turn_outcome_makes_the_trajectories_differ() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.read"), outcome="success"))
    b = trajectory("b", turn("turn-1", step(0, "fs.read"), outcome="failed"))

    diff = diff_trajectories(a, b)

    assert diff.turns[0].outcome_changed and diff.turns[0].status == "changed"
    assert diff.summary.turn_outcomes_changed == 1 and not diff.summary.equivalent


def test_an_unknown_turn_outcome_as_in_a_jsonl_export_is_not_a_change() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.read"), outcome="success"))
    b = trajectory("b", turn("turn-1", step(0, "fs.read"), outcome=None))

    assert diff_trajectories(a, b).summary.equivalent


def test_two_empty_trajectories_are_equivalent() -> None:
    diff = diff_trajectories(trajectory("a"), trajectory("b"))
    assert diff.summary.equivalent and diff.turns == []


def test_the_json_has_the_same_keys_whatever_the_diff_holds_and_reads_back() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.read")))
    b = trajectory("b", turn("turn-1", step(0, "fs.write")))
    diff = diff_trajectories(a, b)

    body = json.loads(diff.model_dump_json())

    assert body["format"] == "agentrt.trajectory-diff/v1"
    only_a, only_b = body["turns"][0]["steps"]
    assert list(only_a) == list(only_b)  # null where absent, never left out
    assert only_a["index_b"] is None and only_b["index_a"] is None
    assert TrajectoryDiff.model_validate(body) == diff


def test_the_human_output_marks_each_step_and_ends_with_a_summary() -> None:
    a = trajectory("a", turn("turn-1", step(0, "fs.list"), step(1, "fs.read", sha="x"), step(2, "fs.write")))
    b = trajectory("b", turn("turn-1", step(0, "fs.list"), step(1, "fs.read", sha="y"), step(2, "shell.run")))

    lines = diff_lines(diff_trajectories(a, b))

    markers = [line.split()[0] for line in lines if line.startswith("  ")]
    assert markers == ["=", "~", "-", "+"]
    assert "[input changed]" in lines[5]
    assert lines[-1].startswith("summary: 1 same, 1 changed (1 input, 0 outcome), 1 only in A, 1 only in B")
    assert lines[-1].endswith("different")


def test_turns_too_long_to_align_pair_by_position_and_finish() -> None:
    """Regression: step sequences shaped for the alignment took minutes (a model chooses the actions)."""
    from agentrt.client._trajectory_diff import MAX_ALIGNED_STEPS
    from agentrt.schemas import Trajectory, TrajectoryStep, TurnTrajectory

    def run(actions: list[str]) -> Trajectory:
        steps = [TrajectoryStep(index=i, round=1, action=x, outcome="ok") for i, x in enumerate(actions)]
        return Trajectory(session_id="s", turns=[TurnTrajectory(turn_id="turn-1", steps=steps)])

    a, b = run(["a", "b", "c"] * 1000), run(["c", "b", "a", "a"] * 750)

    diff = diff_trajectories(a, b)

    assert 3000 > MAX_ALIGNED_STEPS and not diff.summary.equivalent
    steps = diff.turns[0].steps
    assert sum(1 for s in steps if s.status == "same") == sum(1 for i in range(3000) if "abc"[i % 3] == "cbaa"[i % 4])
