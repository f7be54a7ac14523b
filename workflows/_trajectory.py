"""A turn's trajectory as events: started, one step per tool invocation, advisor review and
approval wait, completed.

Pure bookkeeping for ``SessionWorkflow``: it builds the events, the workflow emits them.
Times come from the caller (``workflow.now()``), so durations replay exactly.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentrt.schemas import (
    TRAJECTORY_INPUT_CHARS,
    TRAJECTORY_OBSERVATION_CHARS,
    TrajectoryCompleted,
    TrajectoryStarted,
    TrajectoryStepRecorded,
    TurnOutcome,
    arguments_sha256,
)
from agentrt.workflows._tool_calls import preview

# Nesting kept in a step's action_input; deeper values are replaced by a marker.
MAX_INPUT_DEPTH = 6
# Items kept per list and keys per object of a step's action_input.
MAX_INPUT_ITEMS = 50


def trimmed_input(value: Any, depth: int = 0) -> Any:
    """``value`` (JSON data) with each string cut to ``TRAJECTORY_INPUT_CHARS`` characters and
    lists and objects to ``MAX_INPUT_ITEMS`` items, nesting to ``MAX_INPUT_DEPTH``: a step's
    ``action_input`` stays small whatever a model sent (its SHA-256 is of the whole)."""
    if isinstance(value, str):
        return value if len(value) <= TRAJECTORY_INPUT_CHARS else value[: TRAJECTORY_INPUT_CHARS - 1] + "…"
    if depth >= MAX_INPUT_DEPTH and isinstance(value, (dict, list)):
        return "…"
    if isinstance(value, dict):
        items = list(value.items())[:MAX_INPUT_ITEMS]
        return {str(k)[:TRAJECTORY_INPUT_CHARS]: trimmed_input(v, depth + 1) for k, v in items}
    if isinstance(value, list):
        return [trimmed_input(v, depth + 1) for v in value[:MAX_INPUT_ITEMS]]
    return value


def milliseconds(started: datetime | None, ended: datetime) -> int:
    return 0 if started is None else max(0, round((ended - started).total_seconds() * 1000))


class TrajectoryRecorder:
    """The open turn's trajectory: its id, the next step index and why it failed, if it did.

    ``start`` opens one (``TrajectoryStarted``), ``step`` numbers a step, ``complete`` closes
    it with the turn's outcome; each returns the event to emit, or None when no trajectory is
    open (a session recorded before ``trajectory-v1``, a turn cancelled before it started).
    """

    def __init__(self) -> None:
        self.turn_id: str | None = None
        self.steps = 0
        self.failure: str | None = None  # set when a completed turn's trajectory failed (an advisor reject)

    def start(self, turn_id: str) -> TrajectoryStarted:
        self.turn_id, self.steps, self.failure = turn_id, 0, None
        return TrajectoryStarted(turn_id=turn_id)

    def step(
        self,
        turn_id: str,
        round_number: int,
        action: str,
        action_input: dict[str, Any] | None,
        outcome: str,
        text: str,
        started: datetime | None,
        ended: datetime,
        call_id: str | None = None,
    ) -> TrajectoryStepRecorded | None:
        if self.turn_id != turn_id:
            return None
        data = action_input if isinstance(action_input, dict) else {}
        event = TrajectoryStepRecorded(
            turn_id=turn_id,
            index=self.steps,
            round=round_number,
            action=trimmed_input(action),  # a model names the tools: an unknown name may be long
            action_input=trimmed_input(data),
            input_sha256=arguments_sha256(data),
            outcome=outcome,
            observation=preview(text, TRAJECTORY_OBSERVATION_CHARS),
            duration_ms=milliseconds(started, ended),
            call_id=call_id,
        )
        self.steps += 1
        return event

    def complete(self, outcome: TurnOutcome) -> TrajectoryCompleted | None:
        if self.turn_id != outcome.turn_id:
            return None
        if outcome.status == "cancelled":
            result, reason = "cancelled", outcome.error
        elif outcome.status == "completed" and self.failure is None:
            result, reason = "success", None
        else:
            result, reason = "failed", self.failure or outcome.error or outcome.status
        self.turn_id = None
        return TrajectoryCompleted(
            turn_id=outcome.turn_id, outcome=result, steps=self.steps, rounds=outcome.rounds, reason=reason,  # type: ignore[arg-type]
            output=outcome.output,
        )
