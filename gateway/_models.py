"""The HTTP gateway's request and response bodies: what a caller may set (and nothing more: an
unknown field, an owner or a principal in a body is refused), with bounds on every string and
list, so /openapi.json documents each route exactly."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from agentrt.schemas import (
    MAX_APPROVAL_TIMEOUT_SECONDS,
    MAX_ARGUMENT_DEPTH,
    MAX_GRAPH_NODES,
    MAX_RETRY_WINDOW_SECONDS,
    ApprovalMode,
    ApprovalPolicy,
    Budget,
    FailurePolicy,
    GraphSpec,
    GraphStatus,
    NodeView,
    OutputSpec,
    PauseState,
    PlanApprovalMode,
    RiskLevel,
    SandboxPolicy,
    Spend,
    nested_deeper_than,
    title_problem,
    unsupported_keyword,
)

# An id the gateway accepts in a path or gives to new work: a letter or digit, then letters,
# digits, ``_``, ``.`` and ``-`` (no ``/``, no spaces, no control characters).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
# Characters of an id in a path (the ids of child sessions are longer than those a caller chooses).
MAX_PATH_ID_CHARS = 256
# Characters of an id a caller chooses for new work.
MAX_NEW_ID_CHARS = 128
# Bounds on what a caller sends (characters, items).
MAX_TEXT_CHARS = 1_000_000
MAX_GOAL_CHARS = 20_000
MAX_REASON_CHARS = 4_000
MAX_PATH_CHARS = 4_096
MAX_NAME_CHARS = 200
MAX_LIST_ITEMS = 256
MAX_SYSTEM_PROMPT_CHARS = 100_000
MAX_CRITERIA = 50
# The longest a turn read waits (``?wait=``), seconds.
MAX_WAIT_SECONDS = 60.0

NewId = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=MAX_NEW_ID_CHARS)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
Reason = Annotated[str, StringConstraints(max_length=MAX_REASON_CHARS)]
FilePath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS)]
RunStatus = Literal["planning", "pending_approval", "running", "paused", "completed", "failed", "cancelled"]

# A graph's status as the runs API says it: approved and executing graphs are running, a plan
# its approver rejected is cancelled (``graph_status`` keeps the graph's own word).
RUN_STATUS: dict[str, RunStatus] = {
    "planning": "planning", "pending_approval": "pending_approval", "approved": "running", "executing": "running",
    "completed": "completed", "failed": "failed", "rejected": "cancelled", "cancelled": "cancelled", "paused": "paused",
}


class Body(BaseModel):
    """A request body: unknown fields are refused (a body names no owner or principal: the
    bearer token does)."""

    model_config = ConfigDict(extra="forbid")


def _not_blank(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} is empty")
    return value


def _answerable(spec: OutputSpec | None) -> OutputSpec | None:
    """An output spec a caller sends, refused (422) when no answer could pass its check."""
    problem = None if spec is None else unsupported_keyword(spec.json_schema)
    if problem is not None:
        raise ValueError(f"invalid output schema: {problem}")
    return spec


# ---------------------------------------------------------------- sessions


class SessionCreate(Body):
    """``POST /v1/sessions``: a new session owned by the token's principal, and its first message.

    ``workspace`` and ``script`` are paths under the gateway's workspace root (relative to it, or
    absolute inside it); ``sandbox = "danger_full_access"`` needs the ``admin`` scope, ``network =
    true`` the ``network`` scope. Operators, MCP servers, advisor and tool task queue are the
    gateway's configuration's."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The first message.")
    workspace: FilePath = Field(default=".", description="Directory the tools work in, under the workspace root.")
    session_id: NewId | None = Field(default=None, description="Default: a new random 12-character id.")
    profile: Name | None = Field(default=None, description="Model profile; default `scripted` with a script, else the default profile.")
    script: FilePath | None = Field(default=None, description="A scripted-model file under the workspace root.")
    system_prompt: str | None = Field(default=None, max_length=MAX_SYSTEM_PROMPT_CHARS)
    system_prompt_mode: Literal["extend", "replace"] = "extend"
    tools: list[Name] | None = Field(default=None, max_length=MAX_LIST_ITEMS, description="Tool names offered; default all.")
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    approval_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_SECONDS, allow_inf_nan=False)
    max_rounds_per_turn: int = Field(default=250, ge=1, le=10_000)
    compact_threshold: float | None = Field(
        default=None, gt=0, le=1, allow_inf_nan=False,
        description="Fraction of the input budget past which a turn's end compacts; 1.0: never by tokens; default the profile's, else 0.8.",
    )
    title: Name | None = None
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    budget: Budget | None = None
    output: OutputSpec | None = Field(
        default=None,
        description="The JSON object every final answer of the session must be: `json_schema` (a JSON Schema whose root is "
        '`"type": "object"`), `name`, `strict`, `max_attempts` (docs/structured-output.md).',
    )
    agent: Name | None = Field(default=None, description="A registered agent the session runs as (docs/agents.md).")

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        return _not_blank(value, "text")

    @field_validator("output")
    @classmethod
    def _output_answerable(cls, value: OutputSpec | None) -> OutputSpec | None:
        return _answerable(value)


class SessionCreated(BaseModel):
    session_id: str
    turn_id: str
    workflow_id: str


class MessageCreate(Body):
    """``POST /v1/sessions/{id}/messages``: a message, queued behind the active turn; with
    ``if_idle``, refused (409 ``session-busy``, nothing queued) unless the session is idle."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    output: OutputSpec | None = Field(
        default=None, description="This turn's own output spec; overrides the session's (docs/structured-output.md)."
    )
    if_idle: bool = Field(
        default=False,
        description="Send only if the session is idle: while a turn runs, a compaction runs or anything is queued, "
        "answer 409 `session-busy` and queue nothing.",
    )

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        return _not_blank(value, "text")

    @field_validator("output")
    @classmethod
    def _output_answerable(cls, value: OutputSpec | None) -> OutputSpec | None:
        return _answerable(value)


class MessageQueued(BaseModel):
    session_id: str
    turn_id: str
    queued_behind: int = 0


class CancelRequest(Body):
    """``POST /v1/sessions/{id}/cancel``: the running turn (or the queued ``turn_id``); ``include_queued`` drops every queued turn too."""

    turn_id: Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)] | None = None
    reason: Reason | None = None
    include_queued: bool = False


class RenameRequest(Body):
    """``POST /v1/sessions/{id}/rename``: the session's new ``title`` (null clears it); an operator gives a ``reason``."""

    title: Name | None
    reason: Reason | None = None

    @field_validator("title")
    @classmethod
    def _title_is_text(cls, value: str | None) -> str | None:
        problem = None if value is None else title_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class ArchiveRequest(Body):
    reason: Reason | None = None


class ApprovalDecisionRequest(Body):
    """``POST /v1/sessions/{id}/approvals/{request_id}``: ``approve`` (``for_session``: later calls
    under the same rule too), ``deny``, or ``edit`` (approve with ``arguments`` instead of the model's)."""

    decision: Literal["approve", "deny", "edit"]
    reason: Reason | None = None
    arguments: dict[str, Any] | None = None
    for_session: bool = False

    @model_validator(mode="after")
    def _arguments_only_to_edit(self) -> "ApprovalDecisionRequest":
        if self.decision == "edit" and self.arguments is None:
            raise ValueError("an edit gives the arguments the call runs with")
        if self.decision != "edit" and self.arguments is not None:
            raise ValueError(f"a decision {self.decision!r} carries no arguments (use decision 'edit')")
        if self.arguments is not None and nested_deeper_than(self.arguments, MAX_ARGUMENT_DEPTH):
            raise ValueError(f"the edited arguments nest lists and objects deeper than {MAX_ARGUMENT_DEPTH} levels")
        if self.decision == "deny" and self.for_session:
            raise ValueError("for_session applies to approvals only")
        return self


class ReconcileRequest(Body):
    """``POST /v1/sessions/{id}/approvals/{request_id}/reconcile``: whether the effect of unknown outcome was applied."""

    outcome: Literal["applied", "not_applied"]
    note: Reason | None = None


class AnswerRequest(Body):
    """``POST /v1/sessions/{id}/answers/{request_id}``: the answer to what an MCP server asked."""

    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = None
    reason: Reason | None = None


class DecisionAccepted(BaseModel):
    """The session took the decision; it acts on it in its next workflow task."""

    session_id: str
    request_id: str
    decision: str


class SessionSummary(BaseModel):
    """One session of ``GET /v1/sessions``; ``title``: its title (``rename``, or the start's), null without one."""

    session_id: str
    status: str
    owner: str | None
    started_at: datetime | None
    closed: bool
    title: str | None = None


class SessionList(BaseModel):
    sessions: list[SessionSummary]


# ---------------------------------------------------------------- tasks


class TaskCreate(Body):
    """``POST /v1/tasks``: an autonomous task owned by the token's principal (see ``agentrt task start``).

    ``accept_command`` and ``trigger_command`` run in the OS sandbox in the workspace;
    ``sandbox = "danger_full_access"`` needs the ``admin`` scope, ``network = true`` the ``network`` scope."""

    goal: str = Field(min_length=1, max_length=MAX_GOAL_CHARS)
    workspace: FilePath = "."
    task_id: NewId | None = None
    criteria: list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_REASON_CHARS)]] = Field(
        default_factory=list, max_length=MAX_CRITERIA
    )
    accept_command: Reason | None = None
    accept_review: Reason | None = None
    every_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    cron: Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)] | None = None
    trigger_command: Reason | None = None
    max_sessions: int = Field(default=10, ge=1, le=10_000)
    max_rounds_per_session: int = Field(default=50, ge=1, le=10_000)
    budget: Budget | None = None
    profile: Name | None = None
    script: FilePath | None = None
    tools: list[Name] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    reviewer_profile: Name | None = None
    approval_mode: ApprovalMode = "never"
    title: Name | None = None
    agent: Name | None = Field(default=None, description="A registered agent every session runs as (docs/agents.md).")

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, value: str) -> str:
        return _not_blank(value, "goal")


class TaskCreated(BaseModel):
    task_id: str
    workflow_id: str


class ControlRequest(Body):
    """A change to a session (pause, resume), a task or a run: the owner's, or an operator's with a ``reason``."""

    reason: Reason | None = None


class OwnerPauseRequest(Body):
    """``POST /v1/pause`` and ``/v1/resume``: every running session, task and graph of ``owner``; the
    caller must be that owner or one of the gateway's operators, and an operator gives a ``reason``."""

    owner: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    reason: Reason | None = None


class TaskSummary(BaseModel):
    task_id: str
    status: str
    started_at: datetime | None
    closed: bool


class TaskList(BaseModel):
    tasks: list[TaskSummary]


# ---------------------------------------------------------------- runs (task graphs)


class RunCreate(Body):
    """``POST /v1/runs``: a task graph owned by the token's principal, from a ``goal`` the planner
    decomposes or a given ``graph`` (exactly one). ``approve_plan = "ask"`` (the default) stops at
    ``pending_approval`` until ``POST /v1/runs/{id}/approve``. Scripts (``script``, each node's) are
    paths under the workspace root; ``sandbox = "danger_full_access"`` needs the ``admin`` scope,
    ``network = true`` the ``network`` scope."""

    goal: str | None = Field(default=None, max_length=MAX_GOAL_CHARS)
    graph: GraphSpec | None = None
    workspace: FilePath = "."
    graph_id: NewId | None = None
    run_id: NewId | None = None  # the runs API's name of graph_id
    profile: Name | None = None
    script: FilePath | None = None
    planner_profile: Name | None = None
    reviewer_profile: Name | None = None
    approve_plan: PlanApprovalMode = "ask"
    risk_level: RiskLevel = "low"
    max_parallel: int | None = Field(default=None, ge=1, le=16)
    max_retries: int = Field(default=1, ge=0, le=5)
    failure_policy: FailurePolicy = "block_dependents"
    # How long a graph whose nodes failed for good waits for a retry by hand (seconds; 0: it ends at once).
    retry_window_seconds: float = Field(default=0.0, ge=0, le=MAX_RETRY_WINDOW_SECONDS, allow_inf_nan=False)
    tools: list[Name] | None = Field(default=None, max_length=MAX_LIST_ITEMS)
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    max_rounds_per_node: int = Field(default=50, ge=1, le=10_000)
    budget: Budget | None = None  # the graph's own, which its nodes draw from

    @model_validator(mode="after")
    def _goal_or_graph(self) -> "RunCreate":
        if (self.goal is None) == (self.graph is None):
            raise ValueError("give exactly one of goal and graph")
        if self.graph_id is not None and self.run_id is not None and self.graph_id != self.run_id:
            raise ValueError("graph_id and run_id name one id: give one, or the same")
        if self.goal is not None:
            _not_blank(self.goal, "goal")
        if self.graph is not None and len(self.graph.nodes) > MAX_GRAPH_NODES:
            raise ValueError(f"a graph has at most {MAX_GRAPH_NODES} nodes")
        return self


class RunCreated(BaseModel):
    """``graph_id``; ``run_id``: the same id, under the runs API's name."""

    graph_id: str
    run_id: str
    workflow_id: str
    status: RunStatus


class RunView(BaseModel):
    """A run: ``status`` in the runs API's words (``planning``, ``pending_approval``, ``running``,
    ``paused``, ``completed``, ``failed``, ``cancelled``), ``graph_status`` in the graph's own
    (``approved``, ``executing``, ``rejected`` ...), its nodes in dependency order with their status,
    and its answer or failure; ``paused``: who paused it, why and since when, while it is paused.
    ``run_id`` is ``graph_id`` under the runs API's name."""

    graph_id: str
    run_id: str
    status: RunStatus
    graph_status: GraphStatus
    owner: str
    goal: str | None = None
    approve_plan: PlanApprovalMode
    risk_level: RiskLevel | None = None
    risk_reasons: list[str] = Field(default_factory=list)
    approved_by: str | None = None
    nodes: list[NodeView] = Field(default_factory=list)
    running_nodes: int = 0
    spend: Spend = Field(default_factory=Spend)
    answer: str | None = None
    failure: str | None = None
    failure_reason: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    paused: PauseState | None = None
    # Nodes failed for good and the graph waits for a retry by hand until then (UTC; ``retry_window_seconds``).
    retry_until: datetime | None = None


class RunSummary(BaseModel):
    graph_id: str
    run_id: str
    status: RunStatus
    graph_status: str
    started_at: datetime | None
    closed: bool


class RunList(BaseModel):
    runs: list[RunSummary]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
