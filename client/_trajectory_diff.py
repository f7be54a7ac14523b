"""Comparing two trajectories step by step: the base of regression checks of prompts and models.

``diff_trajectories`` is pure: it pairs the turns of A and B in order, aligns each pair's steps
by their actions (``difflib.SequenceMatcher``) and says, per aligned step, whether it is the
same, has another input (``input_sha256``) or outcome, or is only in one of them; durations are
reported, never compared. The JSON of a ``TrajectoryDiff`` has the same keys whatever it holds
(absent values are null), in declaration order, so it can be stored and compared too.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Literal

from agentrt.schemas import Model, Trajectory, TrajectoryStep, TurnTrajectory

TRAJECTORY_DIFF_FORMAT = "agentrt.trajectory-diff/v1"

DiffStatus = Literal["same", "changed", "only_a", "only_b"]
# The marker of each status in the human output.
MARKERS: dict[str, str] = {"same": "=", "changed": "~", "only_a": "-", "only_b": "+"}


class StepDiff(Model):
    """One aligned step. ``index_a``/``index_b``: the step's ``index`` in A and in B (None where
    it is only in the other); ``changes``: what differs for a ``changed`` step (``input``: another
    ``input_sha256``; ``outcome``); ``duration_delta_ms``: B's duration less A's (milliseconds),
    None unless the step is in both."""

    status: DiffStatus
    action: str
    index_a: int | None
    index_b: int | None
    changes: list[Literal["input", "outcome"]]
    outcome_a: str | None
    outcome_b: str | None
    input_sha256_a: str | None
    input_sha256_b: str | None
    duration_ms_a: int | None
    duration_ms_b: int | None
    duration_delta_ms: int | None


class TurnDiff(Model):
    """The ``position``-th turn (from 0) of A beside the ``position``-th of B. ``status``: ``same``
    (every step the same and the same outcome), ``changed``, ``only_a`` or ``only_b`` (the other
    trajectory has fewer turns). ``outcome_changed`` is True only when both outcomes are known
    and differ (a jsonl export carries no turn outcome)."""

    position: int
    status: DiffStatus
    turn_id_a: str | None
    turn_id_b: str | None
    outcome_a: str | None
    outcome_b: str | None
    outcome_changed: bool
    rounds_a: int | None
    rounds_b: int | None
    duration_ms_a: int | None
    duration_ms_b: int | None
    steps: list[StepDiff]


class DiffSummary(Model):
    """Counts over every turn: steps per status (``changed_input`` and ``changed_outcome`` count
    the changed steps by what changed; a step may count in both), turns whose outcome changed,
    the sums of the step durations (milliseconds), and ``equivalent``: the same turns with the
    same steps and outcomes, durations aside."""

    turns_a: int
    turns_b: int
    steps_a: int
    steps_b: int
    same: int
    changed: int
    changed_input: int
    changed_outcome: int
    only_a: int
    only_b: int
    turn_outcomes_changed: int
    duration_ms_a: int
    duration_ms_b: int
    duration_delta_ms: int
    equivalent: bool


class TrajectoryDiff(Model):
    """What ``diff_trajectories(a, b)`` found (``agentrt trajectory diff --json``)."""

    format: Literal["agentrt.trajectory-diff/v1"] = TRAJECTORY_DIFF_FORMAT
    session_id_a: str
    session_id_b: str
    turns: list[TurnDiff]
    summary: DiffSummary


def _pair(a: TrajectoryStep | None, b: TrajectoryStep | None) -> StepDiff:
    changes: list[Literal["input", "outcome"]] = []
    if a is not None and b is not None:
        if a.input_sha256 != b.input_sha256:
            changes.append("input")
        if a.outcome != b.outcome:
            changes.append("outcome")
    status: DiffStatus = "only_b" if a is None else "only_a" if b is None else "changed" if changes else "same"
    either = a if a is not None else b
    assert either is not None
    return StepDiff(
        status=status,
        action=either.action,
        index_a=a.index if a else None,
        index_b=b.index if b else None,
        changes=changes,
        outcome_a=a.outcome if a else None,
        outcome_b=b.outcome if b else None,
        input_sha256_a=a.input_sha256 if a else None,
        input_sha256_b=b.input_sha256 if b else None,
        duration_ms_a=a.duration_ms if a else None,
        duration_ms_b=b.duration_ms if b else None,
        duration_delta_ms=b.duration_ms - a.duration_ms if a and b else None,
    )


# Steps aligned by action at most (per side); longer turns pair their steps by position, since
# the alignment's time grows faster than quadratically with the steps (and a model chooses them).
MAX_ALIGNED_STEPS = 500


def _align(a: list[TrajectoryStep], b: list[TrajectoryStep]) -> list[StepDiff]:
    """Steps aligned by action: equal runs pair up; a replaced run is A's steps, then B's. Turns
    of more than ``MAX_ALIGNED_STEPS`` steps pair by position."""
    if max(len(a), len(b)) > MAX_ALIGNED_STEPS:
        paired: list[StepDiff] = []
        for i in range(max(len(a), len(b))):
            x, y = (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
            if x is not None and y is not None and x.action != y.action:
                paired += [_pair(x, None), _pair(None, y)]
            else:
                paired.append(_pair(x, y))
        return paired
    matcher = SequenceMatcher(a=[s.action for s in a], b=[s.action for s in b], autojunk=False)
    steps: list[StepDiff] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            steps += [_pair(x, y) for x, y in zip(a[a0:a1], b[b0:b1])]
        else:
            steps += [_pair(x, None) for x in a[a0:a1]]
            steps += [_pair(None, y) for y in b[b0:b1]]
    return steps


def _turn_ms(turn: TurnTrajectory | None) -> int | None:
    if turn is None or turn.started_at is None or turn.ended_at is None:
        return None
    return round((turn.ended_at - turn.started_at).total_seconds() * 1000)


def _turn(position: int, a: TurnTrajectory | None, b: TurnTrajectory | None) -> TurnDiff:
    steps = _align(a.steps if a else [], b.steps if b else [])
    outcome_a, outcome_b = (a.outcome if a else None), (b.outcome if b else None)
    outcome_changed = outcome_a is not None and outcome_b is not None and outcome_a != outcome_b
    status: DiffStatus = "only_b" if a is None else "only_a" if b is None else "same"
    if status == "same" and (outcome_changed or any(s.status != "same" for s in steps)):
        status = "changed"
    return TurnDiff(
        position=position,
        status=status,
        turn_id_a=a.turn_id if a else None,
        turn_id_b=b.turn_id if b else None,
        outcome_a=outcome_a,
        outcome_b=outcome_b,
        outcome_changed=outcome_changed,
        rounds_a=a.rounds if a else None,
        rounds_b=b.rounds if b else None,
        duration_ms_a=_turn_ms(a),
        duration_ms_b=_turn_ms(b),
        steps=steps,
    )


def diff_trajectories(a: Trajectory, b: Trajectory) -> TrajectoryDiff:
    """Compare ``a`` and ``b`` turn by turn (the first with the first, ...) and step by step."""
    count = max(len(a.turns), len(b.turns))
    turns = [
        _turn(i, a.turns[i] if i < len(a.turns) else None, b.turns[i] if i < len(b.turns) else None) for i in range(count)
    ]
    steps = [s for t in turns for s in t.steps]

    def counted(status: str) -> int:
        return sum(1 for s in steps if s.status == status)

    ms_a = sum(s.duration_ms for t in a.turns for s in t.steps)
    ms_b = sum(s.duration_ms for t in b.turns for s in t.steps)
    summary = DiffSummary(
        turns_a=len(a.turns),
        turns_b=len(b.turns),
        steps_a=sum(len(t.steps) for t in a.turns),
        steps_b=sum(len(t.steps) for t in b.turns),
        same=counted("same"),
        changed=counted("changed"),
        changed_input=sum(1 for s in steps if "input" in s.changes),
        changed_outcome=sum(1 for s in steps if "outcome" in s.changes),
        only_a=counted("only_a"),
        only_b=counted("only_b"),
        turn_outcomes_changed=sum(1 for t in turns if t.outcome_changed),
        duration_ms_a=ms_a,
        duration_ms_b=ms_b,
        duration_delta_ms=ms_b - ms_a,
        equivalent=all(t.status == "same" for t in turns),
    )
    return TrajectoryDiff(session_id_a=a.session_id, session_id_b=b.session_id, turns=turns, summary=summary)


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"


def diff_lines(diff: TrajectoryDiff) -> list[str]:
    """The human form of ``diff``: a header, per turn a line and one line per aligned step marked
    ``=`` (same), ``~`` (changed), ``-`` (only in A) or ``+`` (only in B), and a summary line."""
    s = diff.summary
    lines = [
        f"A: session {diff.session_id_a} ({s.turns_a} turn(s), {s.steps_a} step(s))",
        f"B: session {diff.session_id_b} ({s.turns_b} turn(s), {s.steps_b} step(s))",
        "= same  ~ changed  - only in A  + only in B  (steps: index in A, index in B, action, outcome, duration)",
    ]
    for turn in diff.turns:
        ids = f"{turn.turn_id_a or '-'} | {turn.turn_id_b or '-'}"
        outcome = f"{turn.outcome_a or '?'} -> {turn.outcome_b or '?'}" if turn.outcome_changed else (turn.outcome_a or turn.outcome_b or "?")
        flag = " (outcome changed)" if turn.outcome_changed else ""
        where = {"only_a": " (only in A)", "only_b": " (only in B)"}.get(turn.status, "")
        lines.append(f"{MARKERS[turn.status]} turn {turn.position + 1}: {ids}  {outcome}{flag}{where}")
        for step in turn.steps:
            a = "-" if step.index_a is None else str(step.index_a)
            b = "-" if step.index_b is None else str(step.index_b)
            if step.status in ("same", "changed"):
                outcome = step.outcome_a if step.outcome_a == step.outcome_b else f"{step.outcome_a} -> {step.outcome_b}"
                delta = step.duration_delta_ms or 0
                timing = f"{_ms(step.duration_ms_a)} -> {_ms(step.duration_ms_b)} ({delta:+d} ms)"
            else:
                outcome = step.outcome_a if step.status == "only_a" else step.outcome_b
                timing = _ms(step.duration_ms_a if step.status == "only_a" else step.duration_ms_b)
            changed = f"  [{', '.join(step.changes)} changed]" if step.changes else ""
            lines.append(f"  {MARKERS[step.status]} {a:>3} {b:>3}  {step.action:<24} {outcome:<20} {timing}{changed}")
    verdict = "equivalent (durations aside)" if s.equivalent else "different"
    lines.append(
        f"summary: {s.same} same, {s.changed} changed ({s.changed_input} input, {s.changed_outcome} outcome), "
        f"{s.only_a} only in A, {s.only_b} only in B; {s.turn_outcomes_changed} turn outcome(s) changed; "
        f"steps took {s.duration_ms_a} ms -> {s.duration_ms_b} ms ({s.duration_delta_ms:+d} ms): {verdict}"
    )
    return lines
