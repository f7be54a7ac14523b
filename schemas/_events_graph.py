"""Events of a task graph (``seq`` per graph): its plan, its agent tasks, reviews and end."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrt.schemas._budget import Spend
from agentrt.schemas._events_base import EventBase
from agentrt.schemas._graph import CapabilityToken, GraphNode, RiskLevel
from agentrt.schemas._messages import Usage

__all__ = [
    "AgentTaskCompleted",
    "AgentTaskFailed",
    "AgentTaskStarted",
    "TaskBlocked",
    "TaskCancelled",
    "TaskDecomposed",
    "TaskGraphCompleted",
    "TaskGraphCreated",
    "TaskGraphFailed",
    "TaskGraphPaused",
    "TaskGraphResumed",
    "TaskGraphStatusChanged",
    "TaskPlanApproved",
    "TaskPlanRejected",
    "TaskRetried",
    "TaskReviewed",
]


class TaskGraphCreated(EventBase):
    """A task graph started: from a ``goal`` (the planner plans it) or a given graph.
    ``status_events``: the graph records each status it shows as ``TaskGraphStatusChanged``
    (``status-events-v1``; False for a graph an older build started)."""

    type: Literal["TaskGraphCreated"] = "TaskGraphCreated"
    graph_id: str
    owner: str
    goal: str | None = None
    approve_plan: str = "ask"
    status_events: bool = False


class TaskGraphStatusChanged(EventBase):
    """The graph's shown status (``paused`` while paused) became ``status``, after ``previous``
    (None: its first status): its ``change``-th status (1, 2, ...). Every status the graph shows
    (its ``AgentSessionStatus``, its store row) is recorded so, however short it lasted (``approved``
    is followed by ``executing`` at once)."""

    type: Literal["TaskGraphStatusChanged"] = "TaskGraphStatusChanged"
    status: str
    previous: str | None = None
    change: int


class TaskDecomposed(EventBase):
    """The plan: ``nodes`` (with ``max_parallel``) from the planner or the given graph (``source``
    ``planner`` / ``graph``), its ``risk_level`` and why; or, when the planner answered in plain
    text, ``direct_answer`` and no nodes."""

    type: Literal["TaskDecomposed"] = "TaskDecomposed"
    source: str
    nodes: list[GraphNode] = Field(default_factory=list)
    max_parallel: int = 3
    risk_level: RiskLevel = "low"
    risk_reasons: list[str] = Field(default_factory=list)
    direct_answer: str | None = None
    usage: Usage = Field(default_factory=Usage)


class TaskPlanApproved(EventBase):
    """The plan was approved (by ``principal``, or by the graph itself when ``token.automatic``):
    the capability token minted then, frozen for the run."""

    type: Literal["TaskPlanApproved"] = "TaskPlanApproved"
    principal: str
    reason: str | None = None
    token: CapabilityToken


class TaskPlanRejected(EventBase):
    type: Literal["TaskPlanRejected"] = "TaskPlanRejected"
    principal: str
    reason: str | None = None


class AgentTaskStarted(EventBase):
    """Node ``node_id``'s attempt ``attempt`` started as child session ``session_id`` with ``tools``."""

    type: Literal["AgentTaskStarted"] = "AgentTaskStarted"
    node_id: str
    attempt: int
    session_id: str
    role: str = "worker"
    tools: list[str] = Field(default_factory=list)


class AgentTaskCompleted(EventBase):
    """Node ``node_id`` completed: the reviewer passed attempt ``attempt``'s ``answer`` (cut)."""

    type: Literal["AgentTaskCompleted"] = "AgentTaskCompleted"
    node_id: str
    attempt: int
    session_id: str
    answer: str = ""
    spend: Spend = Field(default_factory=Spend)


class AgentTaskFailed(EventBase):
    """Attempt ``attempt`` of node ``node_id`` failed (its session failed, or ``error`` says why);
    ``final``: no retry is left, the node failed for good."""

    type: Literal["AgentTaskFailed"] = "AgentTaskFailed"
    node_id: str
    attempt: int
    session_id: str | None = None
    error: str = ""
    final: bool = False
    spend: Spend = Field(default_factory=Spend)


class TaskReviewed(EventBase):
    """The reviewer's verdict on attempt ``attempt`` of ``node_id``: ``passed`` or not, with
    ``findings``; ``error``: the review could not be read or run (it then passes: fail-open);
    ``severity``: ``high`` when a finding is (a destructive command in the node's answer)."""

    type: Literal["TaskReviewed"] = "TaskReviewed"
    node_id: str
    attempt: int
    passed: bool
    findings: list[str] = Field(default_factory=list)
    summary: str = ""
    error: str | None = None
    severity: str | None = Field(default=None, exclude_if=lambda v: v is None)


class TaskRetried(EventBase):
    """Node ``node_id`` runs again as attempt ``attempt`` with ``feedback`` (findings or the error).
    A retry by hand (update ``retry_node``) of a node that failed for good names its ``principal``
    and ``reason``, and ``unblocked``: the dependants that were blocked by it and wait for it again."""

    type: Literal["TaskRetried"] = "TaskRetried"
    node_id: str
    attempt: int
    feedback: str = ""
    principal: str | None = Field(default=None, exclude_if=lambda v: v is None)
    reason: str | None = Field(default=None, exclude_if=lambda v: v is None)
    unblocked: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)


class TaskBlocked(EventBase):
    """Node ``node_id`` will not run: ``blocked_by`` (a node it depends on, directly or not) failed for good."""

    type: Literal["TaskBlocked"] = "TaskBlocked"
    node_id: str
    blocked_by: str


class TaskCancelled(EventBase):
    """A node (``node_id``) or, without one, the whole graph was cancelled by ``principal``."""

    type: Literal["TaskCancelled"] = "TaskCancelled"
    node_id: str | None = None
    principal: str | None = None
    reason: str | None = None


class TaskGraphCompleted(EventBase):
    type: Literal["TaskGraphCompleted"] = "TaskGraphCompleted"
    answer: str = ""
    spend: Spend = Field(default_factory=Spend)


class TaskGraphFailed(EventBase):
    """The graph ended ``failed``: ``reason`` (``node_failed``, ``invalid_plan``, ``planner_failed``) and ``error``."""

    type: Literal["TaskGraphFailed"] = "TaskGraphFailed"
    reason: str
    error: str = ""
    spend: Spend = Field(default_factory=Spend)


class TaskGraphPaused(EventBase):
    """``pause`` of the graph: no node, retry or review starts until ``TaskGraphResumed``; its
    running child sessions are paused too."""

    type: Literal["TaskGraphPaused"] = "TaskGraphPaused"
    principal: str
    reason: str | None = None


class TaskGraphResumed(EventBase):
    """``resume`` of the graph: its child sessions go on and ready nodes start, after ``paused_seconds`` paused."""

    type: Literal["TaskGraphResumed"] = "TaskGraphResumed"
    principal: str
    reason: str | None = None
    paused_seconds: float = 0.0
