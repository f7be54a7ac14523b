"""A task graph's carried state and its workflow input: the types that hold ``Event``s (``_graph``
is imported by ``_events``, so they cannot live there)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Spend
from agentrt.schemas._events import Event
from agentrt.schemas._pause import PauseState
from agentrt.schemas._graph import (
    CapabilityToken,
    GraphConfig,
    GraphSpec,
    GraphStatus,
    NodeState,
    RiskLevel,
    ToolRisk,
)

__all__ = [
    "GraphRecordInput",
    "GraphState",
    "TaskGraphInput",
]


class GraphState(Model):
    """Everything a graph's run knows: its status, the plan (``plan``, in dependency order in
    ``order``) with its risk, the tools the planner reported (``tools``), the capability token
    once approved, each node's state, its spend (planner, sessions, reviews), its events (the
    ``events`` query; ``unflushed_events``: those not yet in the store) and how it ended."""

    status: GraphStatus = "planning"
    seq: int = 0
    plan: GraphSpec | None = None
    order: list[str] = Field(default_factory=list)
    tools: dict[str, ToolRisk] = Field(default_factory=dict)
    risk_level: RiskLevel | None = None
    risk_reasons: list[str] = Field(default_factory=list)
    token: CapabilityToken | None = None
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    plans: int = 0
    spend: Spend = Field(default_factory=Spend)
    answer: str | None = None
    failure: str | None = None
    failure_reason: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    events: list[Event] = Field(default_factory=list)
    # The events not yet in the store (``graph.record``; ``frame-v1``).
    unflushed_events: list[Event] = Field(default_factory=list)
    # Who paused the graph (update ``pause``), while it is paused.
    paused: PauseState | None = None
    # The last status recorded as TaskGraphStatusChanged and how many were (status-events-v1).
    recorded_status: str | None = None
    status_changes: int = 0
    # Nodes failed for good and nothing runs: the graph waits for ``retry_node`` until then (``retry_window_seconds``).
    retry_until: datetime | None = None


class TaskGraphInput(Model):
    """Input of ``TaskGraphWorkflow.run``. ``state``: what a run that continued as new carries
    (a graph moving to its deployment's new current build after its running nodes); None for a
    new graph."""

    config: GraphConfig
    state: GraphState | None = None


class GraphRecordInput(Model):
    """Activity ``graph.record``: the graph's row (status, goal, spend) and its new events
    (idempotent by (graph_id, seq)). ``goal``: the planner's goal, or what the given graph is."""

    graph_id: str
    owner: str
    goal: str
    status: GraphStatus
    workspace: str = ""
    spend: Spend = Field(default_factory=Spend)
    events: list[Event] = Field(default_factory=list)
