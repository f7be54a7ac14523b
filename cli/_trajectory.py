"""`agentrt session trajectory` (export a session's trajectory) and `agentrt trajectory diff` (compare two)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._runtime import runtime
from agentrt.client import (
    default_principal,
    diff_lines,
    diff_trajectories,
    load_trajectory,
    select_turn,
    stored_trajectory,
    trajectory_jsonl,
)
from agentrt.schemas import AgentrtError, Trajectory
from agentrt.worker import AgentrtConfig, open_store

trajectory_app = typer.Typer(help="Compare trajectories: what turns did, step by step.", no_args_is_help=True)


class TrajectoryFormat(str, Enum):
    json = "json"
    jsonl = "jsonl"


def session_trajectory(
    session_id: str,
    turn_id: Optional[str] = typer.Option(None, "--turn", help="Only this turn (default: every turn)."),
    output: TrajectoryFormat = typer.Option(
        TrajectoryFormat.json, "--format", help="json: one document; jsonl: one step per line (docs/trajectories.md)."
    ),
) -> None:
    """Print a session's trajectory: each turn's steps (tool calls, advisor reviews, approvals) with outcomes and durations."""
    config = load_config()

    async def go() -> None:
        trajectory = _from_store(config, session_id, turn_id)
        if trajectory is None:
            async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
                trajectory = await rt.client.trajectory(session_id, turn_id)
        if output is TrajectoryFormat.json:
            typer.echo(trajectory.model_dump_json(indent=2))
            return
        for line in trajectory_jsonl(trajectory):
            typer.echo(line)

    run_command(go)


def _from_store(config: AgentrtConfig, session_id: str, turn_id: str | None) -> Trajectory | None:
    """The session's trajectory from the configured store alone (no server needed), or None when
    the store has no event of it or it is another owner's (then the session's workflow is asked,
    which answers another owner's as a missing one)."""
    with open_store(config) as store:
        return stored_trajectory(store, session_id, turn_id, principal=default_principal(), operators=config.operators)


@dataclass
class _Side:
    """One side of a diff as given: an exported file, or a session; and a turn of it, or all."""

    label: str
    file: Path | None
    session_id: str | None
    turn_id: str | None


def _side(value: str, hint: str) -> _Side:
    path = Path(value)
    if path.is_file():
        return _Side(hint, path, None, None)
    head, colon, turn = value.rpartition(":")
    if colon and Path(head).is_file() and turn:
        return _Side(hint, Path(head), None, turn)
    if os.sep in value or value.endswith((".json", ".jsonl")):
        raise typer.BadParameter(f"no such file: {value}", param_hint=hint)
    session_id, turn_id = (head, turn) if colon else (value, None)
    if not session_id or (colon and not turn):
        raise typer.BadParameter(f"{value!r} is neither a file nor SESSION_ID[:TURN]", param_hint=hint)
    return _Side(hint, None, session_id, turn_id)


@trajectory_app.command("diff")
def trajectory_diff(
    a: str = typer.Argument(..., metavar="A", help="SESSION_ID, SESSION_ID:TURN, or an exported json/jsonl file (FILE:TURN for one turn of it)."),
    b: str = typer.Argument(..., metavar="B", help="The same, for the trajectory to compare with A."),
    as_json: bool = typer.Option(False, "--json", help="Print the diff as one JSON document (agentrt.trajectory-diff/v1)."),
) -> None:
    """Compare two trajectories step by step: = same, ~ changed input or outcome, - only in A, + only in B.

    Exit code 0 when they are equivalent (the same steps, inputs and outcomes; durations aside), 1 when they differ, 2 for a usage error.
    """
    sides = [_side(a, "A"), _side(b, "B")]
    loaded: dict[str, Trajectory] = {}
    for side in sides:
        if side.file is not None:
            try:
                trajectory = load_trajectory(side.file)
                loaded[side.label] = select_turn(trajectory, side.turn_id) if side.turn_id else trajectory
            except AgentrtError as err:
                raise typer.BadParameter(str(err), param_hint=side.label) from None
    config = load_config() if any(s.session_id is not None for s in sides) else None

    async def go() -> int:
        if config is not None:
            with open_store(config) as store:
                for side in sides:
                    found = None
                    if side.session_id:
                        found = stored_trajectory(
                            store, side.session_id, side.turn_id, principal=default_principal(), operators=config.operators
                        )
                    if found is not None:
                        loaded[side.label] = found
            if any(side.label not in loaded for side in sides):
                async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
                    for side in sides:
                        if side.session_id is not None and side.label not in loaded:
                            loaded[side.label] = await rt.client.trajectory(side.session_id, side.turn_id)
        diff = diff_trajectories(loaded["A"], loaded["B"])
        if as_json:
            typer.echo(diff.model_dump_json(indent=2))
        else:
            for line in diff_lines(diff):
                typer.echo(line)
        return 0 if diff.summary.equivalent else 1

    raise typer.Exit(run_command(go))
