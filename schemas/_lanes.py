"""Lanes: the Temporal priority and fairness key of every session, task and graph a client starts,
so an interactive turn does not queue behind a flood of autonomous tasks or graph nodes, nor one
tenant's work behind another tenant's.

Temporal dispatches the tasks waiting on a task queue by priority key first (1 runs first, 5 last;
a workflow started without one is 3), then, among tasks of one priority, in proportion to the
weight of each fairness key (on a server with fairness on, ``matching.enableFairness``; without it,
in order of arrival). Activities and child workflows inherit their workflow's priority, fairness
key and weight, and continue-as-new keeps them: a session's model and tool calls, a delegated
child, a task's sessions and a graph's node sessions all run in the lane their start set.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import Field, field_validator
from temporalio.common import Priority

from agentrt.schemas._base import Model

__all__ = [
    "FAIRNESS_SOURCES",
    "LANE_KINDS",
    "LaneKind",
    "Lanes",
    "MAX_FAIRNESS_KEY_BYTES",
    "fairness_key",
]

# What a client starts, by lane: sessions (a person's turns), autonomous tasks, task graphs.
LaneKind = Literal["interactive", "task", "graph"]
LANE_KINDS: tuple[LaneKind, ...] = ("interactive", "task", "graph")
# Where a start's fairness key comes from: the owner's tenant ([tenants]; an owner not listed is a
# tenant of its own), the owner itself, or nowhere (no fairness key: arrival order within a priority).
FAIRNESS_SOURCES = ("tenant", "owner", "off")
# The server refuses a longer fairness key ("fairness key length exceeds limit").
MAX_FAIRNESS_KEY_BYTES = 64
# The weights the server takes; it clamps others to these.
MIN_FAIRNESS_WEIGHT = 0.001
MAX_FAIRNESS_WEIGHT = 1000.0
_DIGEST_CHARS = 16


def fairness_key(name: str) -> str:
    """``name`` as a fairness key: itself when it has at most ``MAX_FAIRNESS_KEY_BYTES`` bytes (UTF-8),
    else its start, ``~`` and 16 hex digits of its SHA-256 (the same name always gives the same key)."""
    data = name.encode()
    if len(data) <= MAX_FAIRNESS_KEY_BYTES:
        return name
    digest = hashlib.sha256(data).hexdigest()[:_DIGEST_CHARS]
    head = data[: MAX_FAIRNESS_KEY_BYTES - _DIGEST_CHARS - 1].decode(errors="ignore")
    return f"{head}~{digest}"


def _priority_key(value: Any, kind: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise ValueError(f"the {kind} lane's priority key is an integer from 1 (runs first) to 5 (runs last), not {value!r}")
    return value


class Lanes(Model):
    """The lanes of what a client starts (agentrt.toml ``[lanes]``).

    - ``interactive``, ``task``, ``graph``: the priority key (1 runs first, 5 last) of sessions, of
      autonomous tasks and of task graphs; each one's activities and child sessions inherit it.
    - ``fairness``: the fairness key of a start: ``tenant`` (the owner's tenant in ``[tenants]``, the
      owner itself when not listed), ``owner``, or ``off`` (none).
    - ``weights``: fairness key (a tenant or owner name) → its weight, from 0.001 to 1000 (default 1):
      a key of weight 4 is dispatched four times as often as one of weight 1 while both wait.
    - ``enabled``: false sets no priority and no fairness key (every start is Temporal's default, 3).
    """

    enabled: bool = True
    interactive: int = 2
    task: int = 3
    graph: int = 4
    fairness: Literal["tenant", "owner", "off"] = "tenant"
    weights: dict[str, float] = Field(default_factory=dict)

    @field_validator("interactive", "task", "graph", mode="before")
    @classmethod
    def _in_range(cls, value: Any, info: Any) -> int:
        return _priority_key(value, info.field_name)

    @field_validator("weights")
    @classmethod
    def _weighted(cls, weights: dict[str, float]) -> dict[str, float]:
        for name, weight in weights.items():
            if not name.strip():
                raise ValueError("a weight is given to a fairness key (a tenant or owner name), not to an empty name")
            if not MIN_FAIRNESS_WEIGHT <= weight <= MAX_FAIRNESS_WEIGHT:
                raise ValueError(
                    f"the weight of {name!r} is from {MIN_FAIRNESS_WEIGHT:g} to {MAX_FAIRNESS_WEIGHT:g}, not {weight!r}"
                )
        return weights

    def priority_key(self, kind: LaneKind) -> int:
        """The priority key of ``kind``'s lane."""
        return {"interactive": self.interactive, "task": self.task, "graph": self.graph}[kind]

    def priority(self, kind: LaneKind, owner: str, tenant: str) -> Priority:
        """The Temporal ``Priority`` of a start of ``kind`` by ``owner``, a member of ``tenant``:
        the lane's priority key and the fairness key and weight ``fairness`` says; ``Priority.default``
        (none) when the lanes are off."""
        if not self.enabled:
            return Priority.default
        name = {"tenant": tenant, "owner": owner, "off": None}[self.fairness]
        if name is None:
            return Priority(priority_key=self.priority_key(kind))
        return Priority(priority_key=self.priority_key(kind), fairness_key=fairness_key(name), fairness_weight=self.weights.get(name))
