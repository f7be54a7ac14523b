"""Trajectories: what a turn did, step by step, as a document to export and compare.

A session records each turn's trajectory as events (``TrajectoryStarted``,
``TrajectoryStepRecorded``, ``TrajectoryCompleted``); ``trajectory_from_events`` folds them
into a ``Trajectory``, the exported format (``agentrt session trajectory``, documented in
``docs/trajectories.md``) that ``agentrt trajectory diff`` compares.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._base import Model
from agentrt.schemas._events import Event
from agentrt.schemas._events_memory import TrajectoryCompleted, TrajectoryStarted, TrajectoryStepRecorded
from agentrt.schemas._events_session import TurnEnded, UserMessageAdded

__all__ = [
    "TRAJECTORY_FORMAT",
    "TRAJECTORY_INPUT_CHARS",
    "TRAJECTORY_OBSERVATION_CHARS",
    "Trajectory",
    "TrajectoryStep",
    "TurnTrajectory",
    "trajectory_from_events",
]

TRAJECTORY_FORMAT = "agentrt.trajectory/v1"
# Characters of each string in a step's ``action_input`` (the whole input's SHA-256 is exact).
TRAJECTORY_INPUT_CHARS = 200
# Characters of a step's ``observation``.
TRAJECTORY_OBSERVATION_CHARS = 300


class TrajectoryStep(Model):
    """One step (see ``TrajectoryStepRecorded``); ``at`` is when it ended (UTC)."""

    index: int
    round: int
    action: str
    action_input: dict[str, Any] = Field(default_factory=dict)
    input_sha256: str = ""
    outcome: str
    observation: str = ""
    duration_ms: int = 0
    call_id: str | None = None
    screenshot_id: str | None = None
    at: datetime | None = None


class TurnTrajectory(Model):
    """One turn's trajectory. ``outcome`` is None while the turn runs (or when it ended before
    its trajectory did: a session recorded before trajectories existed has none)."""

    turn_id: str
    prompt: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: Literal["success", "failed", "cancelled"] | None = None
    reason: str | None = None
    rounds: int = 0
    steps: list[TrajectoryStep] = Field(default_factory=list)
    # A structured turn's validated object; left out when None.
    output: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class Trajectory(Model):
    """The export document: ``{"format": "agentrt.trajectory/v1", "session_id": ..., "turns": [...]}``."""

    format: Literal["agentrt.trajectory/v1"] = TRAJECTORY_FORMAT
    session_id: str
    turns: list[TurnTrajectory] = Field(default_factory=list)


def trajectory_from_events(session_id: str, events: Iterable[Event], turn_id: str | None = None) -> Trajectory:
    """Fold a session's events (in ``seq`` order) into its ``Trajectory``; only the turn
    ``turn_id`` when given. Turns without a ``TrajectoryStarted`` event are left out."""
    turns: dict[str, TurnTrajectory] = {}
    prompts: dict[str, str] = {}
    for event in events:
        tid = event.turn_id
        if tid is None or (turn_id is not None and tid != turn_id):
            continue
        if isinstance(event, UserMessageAdded):
            prompts[tid] = event.text
            if tid in turns and not turns[tid].prompt:
                turns[tid].prompt = event.text
        elif isinstance(event, TrajectoryStarted):
            turns[tid] = TurnTrajectory(turn_id=tid, prompt=prompts.get(tid, ""), started_at=event.at)
        elif isinstance(event, TrajectoryStepRecorded) and tid in turns:
            fields = event.model_dump(exclude={"type", "seq", "turn_id"})
            turns[tid].steps.append(TrajectoryStep(**fields))
        elif isinstance(event, TrajectoryCompleted) and tid in turns:
            turn = turns[tid]
            turn.outcome, turn.reason, turn.rounds, turn.ended_at = event.outcome, event.reason, event.rounds, event.at
            turn.output = event.output
        elif isinstance(event, TurnEnded) and tid in turns and turns[tid].ended_at is None:
            turns[tid].ended_at = event.at
    return Trajectory(session_id=session_id, turns=list(turns.values()))
