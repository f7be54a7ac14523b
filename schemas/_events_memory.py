"""Events of what a session keeps: memory proposals and their review, and recorded trajectories."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._events_base import EventBase

__all__ = [
    "MemoryAccepted",
    "MemoryDropped",
    "MemoryProposed",
    "MemoryRejected",
    "TrajectoryCompleted",
    "TrajectoryStarted",
    "TrajectoryStepRecorded",
]


class MemoryProposed(EventBase):
    """``memory.write`` proposed a ``workspace`` or ``user`` memory: it waits for the owner's
    ``decide_memory`` (``agentrt memory accept|reject``) and reaches no context until accepted."""

    type: Literal["MemoryProposed"] = "MemoryProposed"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    preview: str
    call_id: str


class MemoryDropped(EventBase):
    """``memory.write`` at ``workspace`` scope wrote a status note (progress of the current work,
    e.g. text opening with "TODO:" or "currently working on"; docs/memory.md gives the rule):
    nothing was stored or proposed. ``reason`` names the phrasing that made it one."""

    type: Literal["MemoryDropped"] = "MemoryDropped"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    preview: str
    reason: str
    call_id: str


class MemoryAccepted(EventBase):
    """A memory became usable: ``principal`` accepted a proposal, or (``principal`` None) a
    ``session``-scope write, which needs no one's acceptance."""

    type: Literal["MemoryAccepted"] = "MemoryAccepted"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    principal: str | None = None
    call_id: str | None = Field(default=None, exclude_if=lambda v: v is None)


class MemoryRejected(EventBase):
    """The owner rejected a proposed memory; it never reaches a context."""

    type: Literal["MemoryRejected"] = "MemoryRejected"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    principal: str
    reason: str | None = None


class TrajectoryStarted(EventBase):
    """A turn's trajectory begins (one per turn, right after ``TurnStarted``)."""

    type: Literal["TrajectoryStarted"] = "TrajectoryStarted"


class TrajectoryStepRecorded(EventBase):
    """One step of a turn's trajectory, in order (``index`` from 0).

    ``action``: the tool name for a tool invocation, ``advisor.review`` for an advisor review,
    ``approval`` for a wait for a person's decision. ``action_input``: the call's arguments
    with each string cut to ``TRAJECTORY_INPUT_CHARS`` characters (``input_sha256`` is the
    SHA-256 of the whole arguments' canonical JSON, so two runs compare exactly); for
    ``advisor.review`` the reviewed tool names, for ``approval`` the tool and arguments decided
    (not the request's id, which differs from run to run). ``outcome``:
    ``ok``, ``error``, ``denied``, ``approve``, ``reject``... ``observation``: a preview of the
    result. ``duration_ms``: workflow time from the step's start to its end (milliseconds).
    ``screenshot_id``: a stored screenshot of the step, for tools that take one.
    """

    type: Literal["TrajectoryStepRecorded"] = "TrajectoryStepRecorded"
    index: int
    round: int
    action: str
    action_input: dict[str, Any] = Field(default_factory=dict)
    input_sha256: str = ""
    outcome: str
    observation: str = ""
    duration_ms: int = 0
    call_id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    screenshot_id: str | None = Field(default=None, exclude_if=lambda v: v is None)


class TrajectoryCompleted(EventBase):
    """A turn's trajectory ends: ``success`` (a final answer), ``failed`` (a model failure, the
    round limit, an advisor's reject) or ``cancelled``."""

    type: Literal["TrajectoryCompleted"] = "TrajectoryCompleted"
    outcome: Literal["success", "failed", "cancelled"]
    steps: int
    rounds: int
    reason: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # A structured turn's validated object; left out when None.
    output: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
