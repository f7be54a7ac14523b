"""Task graphs: a goal planned into a DAG of agent tasks, approved once, then run as child sessions
in dependency order with a reviewer judging each result (``TaskGraphWorkflow``, id ``graph-<id>``).

Here: the graph a user writes or a planner answers (``GraphSpec`` of ``GraphNode``), its checks
(``validate_graph``: acyclic, bounded, well-formed), the configuration a run starts with, the
capability token an approval mints and the ``snapshot`` view (the control updates' inputs: ``_graph_control``).

Lifecycle of a graph: ``planning -> pending_approval -> approved -> executing -> completed |
failed`` (or ``rejected`` by its approver, ``cancelled``). A node: ``pending -> delegated`` (its
child session runs) ``-> reviewing -> completed``, or ``retrying`` (the reviewer failed it) back to
``delegated``, ``failed`` for good, ``blocked`` (a dependency failed), ``cancelled``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, Field, field_validator, model_validator

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, Spend
from agentrt.schemas._config import ApprovalPolicy, SandboxPolicy
from agentrt.schemas._errors import InvalidGraph, NodeCannotDecompose
from agentrt.schemas._messages import Usage
from agentrt.schemas._pause import PauseState
from agentrt.schemas._template import SessionTemplate

__all__ = [
    "CapabilityToken",
    "DELEGATE_TOOL",
    "ERROR_ANSWER_PREFIX",
    "FailurePolicy",
    "GraphConfig",
    "GraphNode",
    "GraphPlan",
    "GraphPlanInput",
    "GraphSnapshot",
    "GraphSpec",
    "GraphStatus",
    "MAX_GRAPH_ID_BYTES",
    "MAX_GRAPH_NODES",
    "MAX_HAND_RETRIES",
    "MAX_NODE_ATTEMPTS",
    "MAX_NODE_ID_CHARS",
    "MAX_NODE_RETRIES",
    "MAX_PARALLEL_LIMIT",
    "MAX_RETRY_WINDOW_SECONDS",
    "NODE_ANSWER_CHARS",
    "NodeGrant",
    "NodeReviewInput",
    "NodeRole",
    "NodeState",
    "NodeStatus",
    "NodeView",
    "PlanApprovalMode",
    "RISK_ORDER",
    "RiskLevel",
    "TERMINAL_GRAPH_STATUSES",
    "TERMINAL_NODE_STATUSES",
    "TaskGraphResult",
    "ToolRisk",
    "validate_graph",
]

# ``paused`` is never a graph's own status: its snapshot and ``AgentSessionStatus`` show it while
# the graph is paused (``GraphSnapshot.paused``), its own status under it.
GraphStatus = Literal[
    "planning", "pending_approval", "approved", "executing", "completed", "failed", "rejected", "cancelled", "paused"
]
TERMINAL_GRAPH_STATUSES: tuple[str, ...] = ("completed", "failed", "rejected", "cancelled")
NodeStatus = Literal["pending", "delegated", "reviewing", "retrying", "completed", "failed", "blocked", "cancelled"]
TERMINAL_NODE_STATUSES: tuple[str, ...] = ("completed", "failed", "blocked", "cancelled")
# ``worker`` does the work with the node's grants; ``reviewer`` reads and judges (its grants are
# cut to read-only tools). ``planner`` exists only before approval: a node may not have it.
NodeRole = Literal["worker", "reviewer"]
RiskLevel = Literal["low", "medium", "high"]
RISK_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}
# What a node that fails for good does to the rest of the graph:
# ``block_dependents`` (default): its transitive dependants are blocked, independent branches go on;
# ``fail_fast``: running nodes are cancelled and nothing else starts;
# ``allow_orphans``: its dependants still run, told that a dependency failed.
FailurePolicy = Literal["block_dependents", "fail_fast", "allow_orphans"]
# ``ask``: a person approves the plan (update ``approve_plan``); ``auto``: the graph approves its
# own plan when the plan's risk level is not ``high``.
PlanApprovalMode = Literal["ask", "auto"]

# Bounds (a planner's answer is untrusted input): nodes per graph, characters of an id, of a
# prompt and of an acceptance text, parallel children, retries per node.
MAX_GRAPH_NODES = 50
MAX_NODE_ID_CHARS = 64
MAX_NODE_PROMPT_CHARS = 20_000
MAX_ACCEPTANCE_CHARS = 4_000
MAX_PARALLEL_LIMIT = 16
MAX_NODE_RETRIES = 5
# Retries by hand (update ``retry_node``) of one node that failed for good; each gives the node
# ``1 + max_retries`` attempts again.
MAX_HAND_RETRIES = 3
# The most attempts one node may have.
MAX_NODE_ATTEMPTS = (MAX_NODE_RETRIES + 1) * (MAX_HAND_RETRIES + 1)
# The longest wait for a retry by hand of a graph whose nodes failed (``retry_window_seconds``): a week.
MAX_RETRY_WINDOW_SECONDS = 7 * 86_400.0
# A node whose final answer starts so is an error, not an answer: the attempt fails without a
# review and is retried as a failed session is (``max_retries``; ``graph-error-answer-v1``).
ERROR_ANSWER_PREFIX = "Error:"
# The longest graph id (UTF-8 bytes): node sessions' workflow ids
# ``session-<graph>-<node>-a<attempt>-<8 hex>`` must fit Temporal's 1,000-byte id limit.
MAX_GRAPH_ID_BYTES = 1_000 - len("session-") - 1 - MAX_NODE_ID_CHARS - len(f"-a{MAX_NODE_ATTEMPTS}-") - 8
# Characters of a node's answer the graph keeps (the session's transcript has it whole).
NODE_ANSWER_CHARS = 8_000
NODE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # the whole id (fullmatch)
# Characters a graph id may not hold: control characters, bidirectional overrides and
# zero-width ones, which would reach terminals and the Temporal UI as they are.
_UNPRINTABLE_ID = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
# The tool that starts a child session from a session; never granted to a graph's node.
DELEGATE_TOOL = "delegate"


class GraphNode(Model):
    """One agent task of a graph.

    - ``id``: letters, digits, ``_ . -`` (at most ``MAX_NODE_ID_CHARS``), unique in the graph.
    - ``prompt``: what the node's session is asked; the answers of its dependencies are added to it.
    - ``depends_on``: ids of nodes that must complete first.
    - ``role``: ``worker`` (default) or ``reviewer`` (read-only tools).
    - ``acceptance``: what the reviewer checks the node's answer against (its prompt when unset).
    - ``profile`` / ``script``: the node's model profile or scripted-model file (the graph's otherwise).
    - ``tools``: the tools the node asks for, within the graph's (the graph's when unset).
    - ``agent``: a registered agent the node's session runs as (its tools within the node's grant).
    """

    id: str = Field(min_length=1, max_length=MAX_NODE_ID_CHARS)
    prompt: str = Field(min_length=1, max_length=MAX_NODE_PROMPT_CHARS)
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_GRAPH_NODES)
    role: str = "worker"
    acceptance: str | None = Field(default=None, max_length=MAX_ACCEPTANCE_CHARS)
    profile: str | None = None
    script: str | None = None
    tools: list[str] | None = None
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not NODE_ID_PATTERN.fullmatch(value):
            raise ValueError(f"node id {value[:80]!r} must be letters, digits, '_', '.' or '-' (starting with a letter or digit)")
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt is empty")
        return value


class GraphSpec(Model):
    """A graph to run: ``nodes`` (1 to ``MAX_GRAPH_NODES``) and ``max_parallel``, the most child
    sessions running at once (default 3). Structural checks beyond the fields: ``validate_graph``."""

    max_parallel: int = Field(default=3, ge=1, le=MAX_PARALLEL_LIMIT)
    nodes: list[GraphNode] = Field(min_length=1, max_length=MAX_GRAPH_NODES)

    def node(self, node_id: str) -> GraphNode:
        return next(n for n in self.nodes if n.id == node_id)


def validate_graph(spec: GraphSpec, *, granted: list[str] | None = None, source: str = "graph") -> list[str]:
    """Check ``spec`` is a DAG the runtime can run; returns the node ids in a dependency order
    (each after all it depends on; ties in the file's order).

    Raises ``NodeCannotDecompose`` for a node with role ``planner`` or asking for the ``delegate``
    tool, and ``InvalidGraph`` (``source`` names what was checked: ``graph``, ``plan``) listing
    every other problem: a role other than ``worker``/``reviewer``, duplicate ids, a dependency on
    no node or on itself, a cycle (named by its nodes), a tool outside ``granted`` (the graph's
    grants; None skips that check)."""
    problems: list[str] = []
    ids = [n.id for n in spec.nodes]
    for node in spec.nodes:
        if node.role == "planner":
            raise NodeCannotDecompose(node.id, "role 'planner' (a graph's nodes are workers and reviewers)")
        if node.tools is not None and DELEGATE_TOOL in node.tools:
            raise NodeCannotDecompose(node.id, f"it asks for the {DELEGATE_TOOL!r} tool")
        if node.role not in ("worker", "reviewer"):
            problems.append(f"node {node.id!r} has role {node.role[:40]!r} (expected worker or reviewer)")
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.append(f"duplicate node ids: {', '.join(duplicates)}")
    known = set(ids)
    for node in spec.nodes:
        for dep in node.depends_on:
            if dep == node.id:
                problems.append(f"node {node.id!r} depends on itself")
            elif dep not in known:
                problems.append(f"node {node.id!r} depends on {dep[:80]!r}, which is no node of the graph")
        if len(set(node.depends_on)) != len(node.depends_on):
            problems.append(f"node {node.id!r} names a dependency twice")
        if granted is not None and node.tools is not None:
            outside = [t for t in node.tools if t not in granted]
            if outside:
                problems.append(
                    f"node {node.id!r} asks for tools the graph does not grant (no such tool, or not among the graph's tools): "
                    f"{', '.join(outside[:10])}"
                )
    if problems:
        raise InvalidGraph(problems, source)
    order: list[str] = []
    done: set[str] = set()
    remaining = list(spec.nodes)
    while remaining:
        ready = [n for n in remaining if all(d in done for d in n.depends_on)]
        if not ready:
            raise InvalidGraph([f"the dependencies form a cycle through {', '.join(sorted(n.id for n in remaining)[:10])}"], source)
        for node in ready:
            order.append(node.id)
            done.add(node.id)
        remaining = [n for n in remaining if n.id not in done]
    return order


# The flat ``GraphConfig`` fields a ``SessionTemplate`` holds too (``GraphConfig.session`` sets them).
GRAPH_TEMPLATE_FIELDS = (
    "profile", "script", "tools", "approval", "sandbox", "network", "tool_task_queue", "operators", "model_task_queue",
)


class GraphConfig(Model):
    """Everything a task graph needs to start; carried in the workflow input.

    - ``graph_id``: the workflow id is ``graph-<graph_id>``.
    - ``goal`` (the planner makes the graph) or ``graph`` (given): exactly one.
    - ``profile`` / ``script``: the model of the nodes (a node may name its own), the planner
      (``planner_profile``) and the reviewer (``reviewer_profile``) unless those are set.
    - ``approve_plan``: ``ask`` waits for ``approve_plan``; ``auto`` approves a plan whose risk
      level is not ``high`` (one that is still waits). ``risk_level``: the least level the plan
      is taken to have (the plan's tools, sandbox and network may raise it).
    - ``max_parallel``: overrides the graph's; ``max_retries``: reruns of a node the reviewer
      failed, whose session failed or whose answer starts with ``Error:`` (``ERROR_ANSWER_PREFIX``);
      ``failure_policy``: see ``FailurePolicy``.
    - ``retry_window_seconds``: how long a graph whose nodes failed for good (and nothing else
      runs) waits for a retry by hand (update ``retry_node``) before it ends ``failed``; 0 (the
      default): it ends at once. At most ``MAX_RETRY_WINDOW_SECONDS``.
    - ``tools``: what the graph may grant its nodes (None: every registered tool but ``delegate``);
      ``approval``, ``sandbox``, ``network``: the nodes' sessions' (approval mode ``never`` by
      default: nobody sits at a node's session; the sandbox confines what runs).
    - ``max_rounds_per_node``: model calls per node session.
    - ``owner`` and ``operators``: who may approve, cancel and read it (operators with a reason).
    - ``budget``: the graph's own (``Budget``: tokens, US dollars, tool calls, wall seconds), which
      its planner, node sessions and reviews draw from: each node session gets what is left of it
      as its budget (or the template's, where tighter), no node starts or retries once the graph's
      spend has reached a limit, and the graph then fails with reason ``budget_exceeded``. A
      cancelled child's spend counts. None: unbounded.
    - ``session``: the template every node's session is made from (``SessionTemplate``: system
      prompt, advisor, timeouts, MCP servers, budget ... as well). Given, its values replace the
      flat ``profile``, ``script``, ``tools``, ``approval``, ``sandbox``, ``network``,
      ``tool_task_queue``, ``operators`` and ``model_task_queue`` (where the nodes' model calls, the
      planner and the reviewer run; None: the graph's queue); None makes it from those (``template()``). A node's
      session still gets its grant (tools, sandbox, network), its node's model when the node names
      one, ``max_rounds_per_node`` rounds and no person to ask (``interactive`` false).
    """

    graph_id: str = Field(min_length=1)
    owner: str
    workspace: str
    goal: str | None = Field(default=None, max_length=MAX_NODE_PROMPT_CHARS)
    graph: GraphSpec | None = None
    profile: str = "default"
    script: str | None = None
    planner_profile: str | None = None
    reviewer_profile: str | None = None
    approve_plan: PlanApprovalMode = "ask"
    risk_level: RiskLevel = "low"
    max_parallel: int | None = Field(default=None, ge=1, le=MAX_PARALLEL_LIMIT)
    max_retries: int = Field(default=1, ge=0, le=MAX_NODE_RETRIES)
    failure_policy: FailurePolicy = "block_dependents"
    retry_window_seconds: float = Field(default=0.0, ge=0, le=MAX_RETRY_WINDOW_SECONDS, allow_inf_nan=False, exclude_if=lambda v: not v)
    tools: list[str] | None = None
    approval: ApprovalPolicy = Field(default_factory=lambda: ApprovalPolicy(mode="never"))
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    max_rounds_per_node: int = Field(default=50, ge=1)
    operators: list[str] = Field(default_factory=list)
    tool_task_queue: str | None = None
    model_task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    title: str | None = None
    # Left out when None: a worker of an earlier version still reads the config.
    session: SessionTemplate | None = Field(default=None, exclude_if=lambda v: v is None)
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)

    def template(self) -> SessionTemplate:
        """The template of the nodes' sessions: ``session``, or one made from the flat fields."""
        if self.session is not None:
            return self.session
        return SessionTemplate(**{name: getattr(self, name) for name in GRAPH_TEMPLATE_FIELDS})

    @model_validator(mode="after")
    def _goal_or_graph(self) -> GraphConfig:
        if self.session is not None:
            for name in GRAPH_TEMPLATE_FIELDS:
                setattr(self, name, getattr(self.session, name))
        if (self.goal is None) == (self.graph is None):
            raise ValueError("give a goal (the planner makes the graph) or a graph, not both and not neither")
        if self.goal is not None and not self.goal.strip():
            raise ValueError("goal is empty")
        if len(self.graph_id.encode()) > MAX_GRAPH_ID_BYTES:
            raise ValueError(f"graph_id is longer than {MAX_GRAPH_ID_BYTES} bytes")
        if not self.graph_id.strip() or self.graph_id != self.graph_id.strip() or _UNPRINTABLE_ID.search(self.graph_id):
            raise ValueError("graph_id may not be blank, start or end with a space, or hold control or bidirectional characters")
        if self.tools is not None and DELEGATE_TOOL in self.tools:
            raise ValueError(f"a graph may not grant {DELEGATE_TOOL!r}: its nodes do not decompose further")
        return self


class NodeGrant(Model):
    """What one node's session may use: tool names, sandbox and network."""

    tools: list[str]
    sandbox: SandboxPolicy
    network: bool = False


class CapabilityToken(Model):
    """Minted once, when a plan is approved, and frozen for the run: ``grants`` (node id ->
    ``NodeGrant``) is what each node's session gets, never widened afterwards. ``plan_digest``
    (sha256 of the approved plan's JSON) ties it to the plan it approved."""

    token_id: str
    graph_id: str
    plan_digest: str
    approved_by: str
    approved_at: datetime
    automatic: bool = False
    risk_level: RiskLevel
    grants: dict[str, NodeGrant]


class ToolRisk(Model):
    """A registered tool's risk as the policy engine sees it: its class and whether it reaches the network."""

    risk: Literal["read_only", "idempotent", "effectful"]
    network: bool = False
    destructive: bool = False


class GraphPlanInput(Model):
    """Activity ``graph.plan``: with ``goal``, the planner model (``profile``, ``script``) answers a
    graph; with ``graph``, no model is asked. Either way the result carries the registered tools'
    risks, so the workflow can mint grants and a risk level without I/O. ``granted``: the graph's
    ``tools`` (None: every registered tool but ``delegate``); ``plan_index``: the graph's planner calls so far."""

    graph_id: str
    workspace: str
    goal: str | None = None
    graph: GraphSpec | None = None
    profile: str = "default"
    script: str | None = None
    granted: list[str] | None = None
    max_parallel: int = 3
    plan_index: int = 0


class GraphPlan(Model):
    """Result of ``graph.plan``: ``graph`` (validated; None when the planner answered in plain
    text, ``direct_answer``: no decomposition), ``tools`` (the tools a node may be granted, with
    their risks), the planner call's ``usage`` (tokens) and ``cost_usd``."""

    graph: GraphSpec | None = None
    direct_answer: str | None = None
    tools: dict[str, ToolRisk] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0


class NodeReviewInput(Model):
    """Activity ``graph.review``: the reviewer judges ``answer`` of ``node_id`` (attempt
    ``attempt``) against ``acceptance`` (the node's prompt when None). Fail-open: an unreadable
    verdict passes (as the advisor's does)."""

    graph_id: str
    node_id: str
    attempt: int
    session_id: str
    profile: str
    script: str | None = None
    prompt: str
    acceptance: str | None = None
    answer: str


class NodeState(Model):
    """One node as the run knows it: ``status``, attempts so far (each a child session, ids in
    ``session_ids``), its last ``answer`` (cut to ``NODE_ANSWER_CHARS``), the reviewer's last
    ``findings``, ``error`` when it failed, ``blocked_by`` (the failed node it waits on for
    ever), and what its sessions and reviews spent."""

    id: str
    status: NodeStatus = "pending"
    attempts: int = 0
    session_ids: list[str] = Field(default_factory=list)
    answer: str = ""
    findings: list[str] = Field(default_factory=list)
    error: str | None = None
    blocked_by: str | None = None
    spend: Spend = Field(default_factory=Spend)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # Retries by hand so far (update ``retry_node``), at most ``MAX_HAND_RETRIES``.
    hand_retries: int = 0


class NodeView(Model):
    """A node in the ``snapshot``: its spec's fields and its state's."""

    id: str
    role: str
    prompt: str
    depends_on: list[str] = Field(default_factory=list)
    acceptance: str | None = None
    tools: list[str] | None = None
    status: NodeStatus
    attempts: int = 0
    session_id: str | None = None
    session_ids: list[str] = Field(default_factory=list)
    answer: str = ""
    findings: list[str] = Field(default_factory=list)
    error: str | None = None
    blocked_by: str | None = None
    spend: Spend = Field(default_factory=Spend)


class GraphSnapshot(Model):
    """Query ``snapshot``: the graph with each node's status (in dependency order), the plan's
    risk and the token's id once approved, what ran, what it spent, and its answer or failure."""

    graph_id: str
    owner: str
    status: GraphStatus
    goal: str | None = None
    workspace: str = ""
    risk_level: RiskLevel | None = None
    risk_reasons: list[str] = Field(default_factory=list)
    approve_plan: PlanApprovalMode = "ask"
    approved_by: str | None = None
    token_id: str | None = None
    max_parallel: int = 3
    max_retries: int = 1
    failure_policy: FailurePolicy = "block_dependents"
    nodes: list[NodeView] = Field(default_factory=list)
    running: int = 0
    spend: Spend = Field(default_factory=Spend)
    answer: str | None = None
    failure: str | None = None
    failure_reason: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # The graph's budget and what is left of it (``GraphConfig.budget``); left out when it has none.
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    remaining: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    # While the graph is paused (status ``paused``): who paused it, why and since when.
    paused: PauseState | None = Field(default=None, exclude_if=lambda v: v is None)
    # While nodes failed for good and the graph waits for a retry by hand (``retry_window_seconds``): until when (UTC).
    retry_until: datetime | None = Field(default=None, exclude_if=lambda v: v is None)


class TaskGraphResult(Model):
    """What ``TaskGraphWorkflow.run`` returns: the final ``status``, each node's status, the
    answer (the direct answer, or the sink nodes' answers) and the total spend."""

    graph_id: str
    status: GraphStatus
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    answer: str | None = None
    spend: Spend = Field(default_factory=Spend)
    failure: str | None = None
    failure_reason: str | None = None
