"""Trajectory exports read back from files, and AgentClient.trajectories folding a session's events."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrt.client import load_trajectory, trajectory_jsonl
from agentrt.client import Trajectories
from agentrt.client._trajectories import select_turn
from agentrt.schemas import (
    Event,
    InvalidTrajectoryFile,
    ModelRequestStarted,
    Trajectory,
    TrajectoryCompleted,
    TrajectoryStarted,
    TrajectoryStep,
    TrajectoryStepRecorded,
    TurnNotFound,
    TurnTrajectory,
    UserMessageAdded,
)

AT = datetime(2025, 1, 1, tzinfo=timezone.utc)


def sample() -> Trajectory:
    steps = [
        TrajectoryStep(index=0, round=1, action="fs.read", action_input={"path": "README.md"}, input_sha256="ab", outcome="ok",
                       observation="# agentrt", duration_ms=12, call_id="c1", at=AT),
        TrajectoryStep(index=1, round=2, action="shell.run", input_sha256="cd", outcome="denied", duration_ms=3),
    ]
    return Trajectory(session_id="s1", turns=[
        TurnTrajectory(turn_id="turn-1", prompt="read it", outcome="success", rounds=3, steps=steps, started_at=AT, ended_at=AT),
        TurnTrajectory(turn_id="turn-2", outcome="failed", steps=[steps[0]]),
    ])


def test_a_json_export_reads_back_as_the_same_trajectory(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(sample().model_dump_json(indent=2))
    assert load_trajectory(path) == sample()


def test_a_jsonl_export_has_one_line_per_step_with_session_and_turn() -> None:
    lines = [json.loads(line) for line in trajectory_jsonl(sample())]
    assert [(line["session_id"], line["turn_id"], line["index"]) for line in lines] == [
        ("s1", "turn-1", 0), ("s1", "turn-1", 1), ("s1", "turn-2", 0),
    ]
    assert lines[0]["duration_ms"] == 12 and lines[0]["at"] == "2025-01-01T00:00:00Z"


def test_a_jsonl_export_reads_back_with_its_steps_but_no_turn_outcomes(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(trajectory_jsonl(sample())) + "\n")

    loaded = load_trajectory(path)

    assert loaded.session_id == "s1"
    assert [t.turn_id for t in loaded.turns] == ["turn-1", "turn-2"]
    assert [t.steps for t in loaded.turns] == [t.steps for t in sample().turns]
    assert all(t.outcome is None for t in loaded.turns)


def test_a_one_step_jsonl_file_is_read_as_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(trajectory_jsonl(sample())[0])
    assert len(load_trajectory(path).turns[0].steps) == 1


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "holds no step"),
        ("not json\n", "line 1 is not JSON"),
        ('{"session_id": "s1", "turn_id": "t"}\n', "line 1 is not a trajectory step"),
        ('[1, 2]\n', "line 1 is not a step with session_id and turn_id"),
        ('{"format": "agentrt.trajectory/v9", "session_id": "s1"}', "not an agentrt.trajectory/v1 document"),
    ],
)
def test_a_file_that_is_no_export_is_refused_with_the_reason(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(InvalidTrajectoryFile, match=reason):
        load_trajectory(path)


def test_a_jsonl_file_mixing_sessions_is_refused(tmp_path: Path) -> None:
    first, second = trajectory_jsonl(sample())[:2]
    path = tmp_path / "mixed.jsonl"
    path.write_text(first + "\n" + second.replace('"s1"', '"s2"'))
    with pytest.raises(InvalidTrajectoryFile, match="line 2 is of session s2, not s1"):
        load_trajectory(path)


def test_select_turn_keeps_one_turn_or_says_there_is_none() -> None:
    assert [t.turn_id for t in select_turn(sample(), "turn-2").turns] == ["turn-2"]
    with pytest.raises(TurnNotFound, match="session s1 has no turn 'turn-9'"):
        select_turn(sample(), "turn-9")


class FixedEvents:
    """Sessions whose ``all_events`` yields a fixed list of events."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def all_events(self, session_id: str, since_seq: int = 0, page_size: int = 10_000) -> AsyncIterator[Event]:
        for event in self.events:
            yield event


def EventsOnly(events: list[Event]) -> Trajectories:
    """The trajectories of a client without a store over a fixed list of events, as ``all_events`` would yield them."""
    return Trajectories(SimpleNamespace(store=None, readable=Everything()), FixedEvents(events))  # type: ignore[arg-type]


class Everything:
    """A connection's ``readable`` that holds every workflow id for ever: the principal may read them all."""

    def get(self, workflow_id: str, default: float) -> float:
        return float("inf")


def session_events() -> list[Event]:
    return [
        UserMessageAdded(seq=1, turn_id="turn-1", at=AT, text="read it", principal="alice", position=0),
        TrajectoryStarted(seq=2, turn_id="turn-1", at=AT),
        ModelRequestStarted(seq=3, turn_id="turn-1", at=AT, round=1, profile="scripted"),
        TrajectoryStepRecorded(seq=4, turn_id="turn-1", at=AT, index=0, round=1, action="fs.read", outcome="ok", duration_ms=7),
        TrajectoryCompleted(seq=5, turn_id="turn-1", at=AT, outcome="success", steps=1, rounds=2),
    ]


async def test_the_client_folds_the_session_events_into_its_trajectory() -> None:
    trajectory = await EventsOnly(session_events()).get("s1")

    [turn] = trajectory.turns
    assert (turn.turn_id, turn.prompt, turn.outcome, turn.rounds) == ("turn-1", "read it", "success", 2)
    assert [(s.action, s.duration_ms) for s in turn.steps] == [("fs.read", 7)]


async def test_the_client_refuses_a_turn_the_session_has_no_trajectory_of() -> None:
    with pytest.raises(TurnNotFound):
        await EventsOnly(session_events()).get("s1", "turn-2")


def test_a_file_nesting_too_deep_is_an_invalid_trajectory_file(tmp_path: Path) -> None:
    for name, text in [("deep.json", "[" * 100_000), ("deep.jsonl", '{"session_id": "s", "turn_id": "t", "x": ' + "[" * 100_000)]:
        path = tmp_path / name
        path.write_text(text)

        with pytest.raises(InvalidTrajectoryFile, match="nests too deep|is not JSON"):
            load_trajectory(path)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)

    with pytest.raises(InvalidTrajectoryFile, match="not a regular file"):
        load_trajectory(fifo)
