"""Trajectories on the client side: a session's as a document, and exports read back from files.

``AgentClient.trajectories.get`` (``Trajectories``) folds a session's events with
``trajectory_from_events``; ``trajectory_jsonl`` and ``load_trajectory`` are the two export
formats of ``agentrt session trajectory`` (docs/trajectories.md), so a run exported today can be
compared (``diff_trajectories``) with one made after a change of prompt or model.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentrt.client._connection import Connection
from agentrt.client._session_calls import SESSION
from agentrt.client._sessions import Sessions
from agentrt.client._visibility import check_visible, may_see
from agentrt.schemas import (
    Event,
    InvalidTrajectoryFile,
    SessionNotFound,
    Trajectory,
    TrajectoryCompleted,
    TrajectoryStarted,
    TrajectoryStep,
    TrajectoryStepRecorded,
    TurnEnded,
    TurnNotFound,
    TurnTrajectory,
    UserMessageAdded,
    session_workflow_id,
    trajectory_from_events,
)

if TYPE_CHECKING:
    from agentrt.store import Store

# The events ``trajectory_from_events`` reads; the others are not kept while reading a session.
_FOLDED = (UserMessageAdded, TrajectoryStarted, TrajectoryStepRecorded, TrajectoryCompleted, TurnEnded)


class Trajectories:
    """A client's session trajectories (``AgentClient.trajectories``): from its store, else from the session's events."""

    def __init__(self, connection: Connection, sessions: Sessions) -> None:
        self._connection = connection
        self._sessions = sessions

    async def get(self, session_id: str, turn_id: str | None = None) -> Trajectory:
        """The session's trajectory (every turn that recorded one, in order), or only turn
        ``turn_id``'s. Read from the client's store when it has the session (every ended turn
        is there whole, also after the session's workflow and server are gone), else from the
        workflow's events (``all_events``). Raises ``SessionNotFound`` (also for another owner's
        session: only its owner and the client's operators read it, ``check_visible``; a session
        Temporal no longer knows by its owner on record in the store), and ``TurnNotFound``
        for a turn the session has no trajectory of."""
        store = self._connection.store
        await self._check_readable(session_id)
        stored = await asyncio.to_thread(stored_trajectory, store, session_id, turn_id) if store is not None else None
        if stored is not None:
            return stored
        return _fold(session_id, [e async for e in self._sessions.all_events(session_id) if isinstance(e, _FOLDED)], turn_id)

    async def _check_readable(self, session_id: str) -> None:
        connection = self._connection
        try:
            await check_visible(
                connection, session_workflow_id(session_id), lambda: SessionNotFound(session_id),
                lambda err: SESSION.error(session_id, err),
            )
        except SessionNotFound:
            store = connection.store
            workflow_id = session_workflow_id(session_id)
            owner = None if store is None else await asyncio.to_thread(store.workflow_owner, workflow_id)
            if owner is None or not may_see(connection, owner):
                raise


def stored_trajectory(
    store: "Store", session_id: str, turn_id: str | None = None, *,
    principal: str | None = None, operators: Sequence[str] = (),
) -> Trajectory | None:
    """The session's trajectory from ``store`` alone (no server needed: every ended turn is there
    whole), or None when the store has no event of it. With ``principal``, None too unless the
    session's owner on record (``Store.workflow_owner``) is ``principal`` or ``principal`` is one of
    ``operators``: another owner's session reads as a missing one. Raises ``TurnNotFound`` for a
    turn it has no trajectory of."""
    if principal is not None:
        owner = store.workflow_owner(session_workflow_id(session_id))
        if owner != principal and principal not in operators:
            return None
    events = _events_in(store, session_id)
    return _fold(session_id, events, turn_id) if events else None


def _fold(session_id: str, events: list[Event], turn_id: str | None) -> Trajectory:
    """``trajectory_from_events``; raises ``TurnNotFound`` when ``turn_id`` has no trajectory."""
    trajectory = trajectory_from_events(session_id, events, turn_id)
    if turn_id is not None and not trajectory.turns:
        raise TurnNotFound(session_id, turn_id)
    return trajectory


def _events_in(store: "Store", session_id: str) -> list[Event]:
    found: list[Event] = []
    since = 0
    while page := store.events(session_id, since, 10_000):
        found += [e for e in page if isinstance(e, _FOLDED)]
        since = page[-1].seq
    return found


def select_turn(trajectory: Trajectory, turn_id: str) -> Trajectory:
    """``trajectory`` with only turn ``turn_id``; raises ``TurnNotFound`` without it."""
    turns = [t for t in trajectory.turns if t.turn_id == turn_id]
    if not turns:
        raise TurnNotFound(trajectory.session_id, turn_id)
    return trajectory.model_copy(update={"turns": turns})


def trajectory_jsonl(trajectory: Trajectory) -> list[str]:
    """The jsonl export: one JSON object per step, the step's fields after ``session_id`` and
    ``turn_id``. Turns (their prompt, outcome, rounds, times) are not in it, nor turns without steps."""
    return [
        json.dumps(
            {"session_id": trajectory.session_id, "turn_id": turn.turn_id, **step.model_dump(mode="json")}, ensure_ascii=False
        )
        for turn in trajectory.turns
        for step in turn.steps
    ]


def _from_jsonl(path: str, lines: list[str]) -> Trajectory:
    session_id: str | None = None
    turns: dict[str, TurnTrajectory] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw: Any = json.loads(line)
        except RecursionError:
            raise InvalidTrajectoryFile(path, f"line {number} nests too deep") from None
        except ValueError as err:
            raise InvalidTrajectoryFile(path, f"line {number} is not JSON: {err}") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("session_id"), str) or not isinstance(raw.get("turn_id"), str):
            raise InvalidTrajectoryFile(path, f"line {number} is not a step with session_id and turn_id")
        if session_id is not None and raw["session_id"] != session_id:
            raise InvalidTrajectoryFile(path, f"line {number} is of session {raw['session_id']}, not {session_id}")
        session_id = raw.pop("session_id")
        turn_id = raw.pop("turn_id")
        try:
            step = TrajectoryStep.model_validate(raw)
        except ValidationError as err:
            raise InvalidTrajectoryFile(path, f"line {number} is not a trajectory step: {err}") from None
        turns.setdefault(turn_id, TurnTrajectory(turn_id=turn_id)).steps.append(step)
    if session_id is None:
        raise InvalidTrajectoryFile(path, "it holds no step")
    return Trajectory(session_id=session_id, turns=list(turns.values()))


# The largest export file read (bytes).
MAX_TRAJECTORY_FILE_BYTES = 256 * 1024 * 1024


def _open_regular(path: str, flags: int) -> int:
    """Open ``path`` without blocking on a FIFO; refuse anything but a regular file."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def load_trajectory(path: str | Path) -> Trajectory:
    """Read an export of ``agentrt session trajectory``: the json document (``--format json``)
    or one step per line (``--format jsonl``: its turns have no outcome, prompt or times).
    Raises ``InvalidTrajectoryFile`` for anything else, a file that cannot be read, one that is
    not a regular file or larger than ``MAX_TRAJECTORY_FILE_BYTES``, or JSON that nests too deep."""
    name = str(path)
    try:
        with open(path, "rb", opener=_open_regular) as f:
            data = f.read(MAX_TRAJECTORY_FILE_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidTrajectoryFile(name, f"cannot be read: {err}") from None
    if len(data) > MAX_TRAJECTORY_FILE_BYTES:
        raise InvalidTrajectoryFile(name, f"it is larger than {MAX_TRAJECTORY_FILE_BYTES:,} bytes")
    try:
        whole: Any = json.loads(text)
    except RecursionError:
        raise InvalidTrajectoryFile(name, "its JSON nests too deep") from None
    except ValueError:
        whole = None  # several lines: jsonl
    if isinstance(whole, dict) and "format" in whole:
        try:
            return Trajectory.model_validate(whole)
        except ValidationError as err:
            raise InvalidTrajectoryFile(name, f"not an agentrt.trajectory/v1 document: {err}") from None
    return _from_jsonl(name, text.splitlines())
