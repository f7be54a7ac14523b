"""The ``Event`` tagged union: everything observable that happens in a session.

Each event has a per-session ``seq`` (1, 2, 3, ...) and a ``type`` tag. The workflow
emits them (they answer the ``events`` query) and the store keeps a projection keyed
by (session_id, seq). ``ModelTokenDelta`` is the exception: deltas go to the store only,
never into workflow history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter

from agentrt.schemas._autonomy import AutonomyDecisionKind, TaskCheckpoint
from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, BudgetCrossing, Spend
from agentrt.schemas._config import SessionConfig
from agentrt.schemas._graph import CapabilityToken, GraphNode, RiskLevel
from agentrt.schemas._messages import ToolCall, Usage
from agentrt.schemas._turns import PermissionRequest, TurnStatus


class _EventBase(Model):
    seq: int = 0
    at: datetime | None = None
    turn_id: str | None = None


class SessionInitialized(_EventBase):
    type: Literal["SessionInitialized"] = "SessionInitialized"
    config: SessionConfig
    tools: list[str]


class UserMessageAdded(_EventBase):
    type: Literal["UserMessageAdded"] = "UserMessageAdded"
    principal: str
    text: str
    position: int


class TurnStarted(_EventBase):
    type: Literal["TurnStarted"] = "TurnStarted"


class ModelRequestStarted(_EventBase):
    """A model call begins. ``context_tokens`` is the planned input estimate (tokens) and
    ``context_messages`` / ``omitted_messages`` count the transcript messages sent and left
    out; ``history_bytes`` is the workflow history's size (bytes) when the call was made."""

    type: Literal["ModelRequestStarted"] = "ModelRequestStarted"
    round: int
    profile: str
    context_tokens: int | None = None
    context_messages: int | None = None
    omitted_messages: int = 0
    summary_id: int | None = None
    history_bytes: int | None = None


class ModelTokenDelta(_EventBase):
    type: Literal["ModelTokenDelta"] = "ModelTokenDelta"
    round: int
    text: str


class ModelToolCallRequested(_EventBase):
    type: Literal["ModelToolCallRequested"] = "ModelToolCallRequested"
    round: int
    call: ToolCall


class AssistantMessageCompleted(_EventBase):
    type: Literal["AssistantMessageCompleted"] = "AssistantMessageCompleted"
    round: int
    text: str
    tool_calls: int
    usage: Usage
    position: int
    # Characters of reasoning the model produced before this message (the blocks are in the
    # store's ``reasoning`` table); left out when 0.
    reasoning_chars: int = Field(default=0, exclude_if=lambda v: v == 0)


class PermissionRequested(_EventBase):
    type: Literal["PermissionRequested"] = "PermissionRequested"
    request: PermissionRequest


class PermissionGranted(_EventBase):
    """A call granted: by a decision on ``request_id``, or (``scope`` ``session``, ``request_id``
    the request that granted it) by an earlier grant for the rest of the session."""

    type: Literal["PermissionGranted"] = "PermissionGranted"
    request_id: str
    call_id: str
    principal: str
    reason: str | None = None
    scope: Literal["once", "session"] = Field(default="once", exclude_if=lambda v: v == "once")


class OperatorActed(_EventBase):
    """An operator (``SessionConfig.operators``), not the owner, acted on the session: ``action``
    is ``grant``, ``deny``, ``reconcile``, ``cancel``, ``archive``, ``answer`` (an elicitation) or
    ``raise_budget``, ``target`` the request or turn (None for the session), ``reason`` the reason the operator gave."""

    type: Literal["OperatorActed"] = "OperatorActed"
    principal: str
    action: Literal["grant", "deny", "reconcile", "cancel", "archive", "answer", "raise_budget"]
    target: str | None = None
    reason: str


class ToolCallEdited(_EventBase):
    """An approval changed a call's arguments before it ran: ``arguments`` (SHA-256
    ``arguments_sha256``) are what ran, chosen by ``principal`` on ``request_id``."""

    type: Literal["ToolCallEdited"] = "ToolCallEdited"
    request_id: str
    call_id: str
    principal: str
    arguments: dict[str, Any]
    arguments_sha256: str


class PermissionDenied(_EventBase):
    type: Literal["PermissionDenied"] = "PermissionDenied"
    request_id: str
    call_id: str
    principal: str
    reason: str | None = None


class PermissionDecisionIgnored(_EventBase):
    """A decision that changed nothing: unknown or already-decided request, or wrong principal."""

    type: Literal["PermissionDecisionIgnored"] = "PermissionDecisionIgnored"
    request_id: str
    decision: str
    principal: str
    why: Literal[
        "unknown_request", "already_decided", "not_owner", "mismatch", "wrong_kind", "invalid_edit", "no_reason",
        "invalid_answer",
    ]


class EffectReconciled(_EventBase):
    """An operator said whether an effect of unknown outcome was applied (signal ``reconcile``)."""

    type: Literal["EffectReconciled"] = "EffectReconciled"
    request_id: str
    call_id: str
    outcome: Literal["applied", "not_applied"]
    principal: str
    note: str | None = None


class ToolInvocationStarted(_EventBase):
    type: Literal["ToolInvocationStarted"] = "ToolInvocationStarted"
    call_id: str
    tool: str
    arguments: dict[str, Any] | None = None


class ToolInvocationCompleted(_EventBase):
    type: Literal["ToolInvocationCompleted"] = "ToolInvocationCompleted"
    call_id: str
    tool: str
    preview: str
    size_bytes: int
    position: int


class ToolInvocationFailed(_EventBase):
    type: Literal["ToolInvocationFailed"] = "ToolInvocationFailed"
    call_id: str
    tool: str
    reason: Literal[
        "unknown_tool", "invalid_arguments", "denied", "denied_by_sandbox", "tool_error", "cancelled", "outcome_unknown",
        "advisor_rejected",
    ]
    error: str
    position: int | None = None


class TurnEnded(_EventBase):
    type: Literal["TurnEnded"] = "TurnEnded"
    status: TurnStatus
    rounds: int
    error: str | None = None
    usage: Usage
    error_type: str | None = Field(default=None, exclude_if=lambda v: v is None)


class SessionCancelled(_EventBase):
    """The running turn was cancelled (signal ``cancel_turn``) or the session was."""

    type: Literal["SessionCancelled"] = "SessionCancelled"
    principal: str | None = None
    reason: str | None = None


class CancelRequested(_EventBase):
    """A cancel of the running turn was asked for (signal ``cancel_turn``, ``archive`` or a
    workflow cancellation); the turn ends with ``SessionCancelled`` once the step in flight stops."""

    type: Literal["CancelRequested"] = "CancelRequested"
    principal: str | None = None
    reason: str | None = None


class CancelIgnored(_EventBase):
    """A ``cancel_turn`` signal from a principal that is not the owner (``not_owner``), or with
    no principal at all (``no_principal``, ``principal`` empty); nothing was cancelled."""

    type: Literal["CancelIgnored"] = "CancelIgnored"
    principal: str
    why: Literal["not_owner", "no_principal", "no_reason"]


class ContextCompactionStarted(_EventBase):
    """Compaction begins: the transcript at positions < ``upto_position`` will be summarised.

    ``reason``: ``threshold`` (automatic at turn end), ``requested`` (update ``compact``) or
    ``switch`` (before ``switch_model`` to a smaller window). ``estimated_tokens`` is the
    context before compaction (tokens).
    """

    type: Literal["ContextCompactionStarted"] = "ContextCompactionStarted"
    reason: Literal["threshold", "requested", "switch"]
    profile: str
    from_position: int
    upto_position: int
    estimated_tokens: int


class ContextCompactionCompleted(_EventBase):
    """The summary ``summary_id`` now stands in the context for positions < ``upto_position``.

    The transcript itself stays in the store unchanged; ``summary_tokens`` and
    ``estimated_tokens`` (the context after compaction) are in tokens.
    """

    type: Literal["ContextCompactionCompleted"] = "ContextCompactionCompleted"
    summary_id: int
    upto_position: int
    summary_tokens: int
    estimated_tokens: int
    chunks: int = 1
    usage: Usage = Field(default_factory=Usage)
    preview: str = ""


class ContextCompactionFailed(_EventBase):
    """Compaction failed (the model call's retries were spent); the context is unchanged."""

    type: Literal["ContextCompactionFailed"] = "ContextCompactionFailed"
    error: str


class ModelProfileSwitched(_EventBase):
    """The session now uses ``profile`` (update ``switch_model``); windows are in tokens."""

    type: Literal["ModelProfileSwitched"] = "ModelProfileSwitched"
    principal: str
    from_profile: str
    profile: str
    context_window: int
    max_output_tokens: int
    compacted: bool = False


class ModelProfileSwitchFailed(_EventBase):
    """A ``switch_model`` request that could not be carried out (e.g. an unknown profile)."""

    type: Literal["ModelProfileSwitchFailed"] = "ModelProfileSwitchFailed"
    principal: str
    profile: str
    error: str


class SessionContinuedAsNew(_EventBase):
    """The session's workflow continued as new run number ``run`` (1 is the first run).

    ``history_events`` and ``history_bytes`` describe the run that ended. Nothing the user
    sees is lost: state, queued messages and the context pointer carry over; the whole
    transcript and every event stay in the store.
    """

    type: Literal["SessionContinuedAsNew"] = "SessionContinuedAsNew"
    run: int
    history_events: int
    history_bytes: int


class SessionArchived(_EventBase):
    """The session ended: update ``archive``, a workflow cancellation (``principal`` "temporal"), or
    the end of the first turn of a session with ``ends_after_turn`` (``principal`` its owner)."""

    type: Literal["SessionArchived"] = "SessionArchived"
    principal: str
    reason: str | None = None


# ---------------------------------------------------------------- advisor


class AdvisorReviewStarted(_EventBase):
    """An advisor model reviews the tool calls of round ``round`` before the policy decides them.

    ``reason``: why this batch is reviewed (``full``: every batch; ``lightweight``: the high-risk
    rules it matched, e.g. ``"rm -r"``, ``"network: curl"``); ``profile``: the advisor's model profile.
    """

    type: Literal["AdvisorReviewStarted"] = "AdvisorReviewStarted"
    round: int
    call_ids: list[str]
    mode: Literal["lightweight", "full"]
    reason: str
    profile: str


class AdvisorReviewCompleted(_EventBase):
    """The advisor's verdict on round ``round``'s calls: ``approve``, ``approve_with_warnings``
    or ``reject`` (no call of the batch runs; the turn ends with a message that says why).

    ``error`` is set when the review failed (provider error, timeout, an answer that is not
    JSON or names no known verdict): the batch is then approved (fail-open) and ``verdict`` is
    ``approve``.
    """

    type: Literal["AdvisorReviewCompleted"] = "AdvisorReviewCompleted"
    round: int
    verdict: Literal["approve", "approve_with_warnings", "reject"]
    concern_count: int = 0
    summary: str = ""
    concerns: list[str] = Field(default_factory=list)
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)


# ---------------------------------------------------------------- memory


class MemoryProposed(_EventBase):
    """``memory.write`` proposed a ``workspace`` or ``user`` memory: it waits for the owner's
    ``decide_memory`` (``agentrt memory accept|reject``) and reaches no context until accepted."""

    type: Literal["MemoryProposed"] = "MemoryProposed"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    preview: str
    call_id: str


class MemoryAccepted(_EventBase):
    """A memory became usable: ``principal`` accepted a proposal, or (``principal`` None) a
    ``session``-scope write, which needs no one's acceptance."""

    type: Literal["MemoryAccepted"] = "MemoryAccepted"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    principal: str | None = None
    call_id: str | None = Field(default=None, exclude_if=lambda v: v is None)


class MemoryRejected(_EventBase):
    """The owner rejected a proposed memory; it never reaches a context."""

    type: Literal["MemoryRejected"] = "MemoryRejected"
    memory_id: str
    scope: Literal["session", "workspace", "user"]
    key: str
    principal: str
    reason: str | None = None


# ---------------------------------------------------------------- trajectory


class TrajectoryStarted(_EventBase):
    """A turn's trajectory begins (one per turn, right after ``TurnStarted``)."""

    type: Literal["TrajectoryStarted"] = "TrajectoryStarted"


class TrajectoryStepRecorded(_EventBase):
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


class TrajectoryCompleted(_EventBase):
    """A turn's trajectory ends: ``success`` (a final answer), ``failed`` (a model failure, the
    round limit, an advisor's reject) or ``cancelled``."""

    type: Literal["TrajectoryCompleted"] = "TrajectoryCompleted"
    outcome: Literal["success", "failed", "cancelled"]
    steps: int
    rounds: int
    reason: str | None = Field(default=None, exclude_if=lambda v: v is None)


# ---------------------------------------------------------------- tool sources: MCP and skills


class McpToolsListed(_EventBase):
    """A turn listed its MCP servers' tools (``mcp.list_tools``, at most once per turn): how many
    it offers the model, the ``digest`` of their specs, and ``failures`` (server name → why its
    tools are missing from this turn)."""

    type: Literal["McpToolsListed"] = "McpToolsListed"
    servers: list[str]
    tools: int
    digest: str | None = None
    failures: dict[str, str] = Field(default_factory=dict)


class ElicitationAnswered(_EventBase):
    """The answer to an ``elicitation`` request (``answer_elicitation``): ``action`` ``accept``
    with ``content``, ``decline`` or ``cancel``; the MCP call resumes with it."""

    type: Literal["ElicitationAnswered"] = "ElicitationAnswered"
    request_id: str
    call_id: str
    principal: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class SkillDiscovered(_EventBase):
    """A skill the session may activate (``skill.activate``): found when the session started."""

    type: Literal["SkillDiscovered"] = "SkillDiscovered"
    name: str
    description: str
    source: str


class SkillActivated(_EventBase):
    """``skill.activate`` joined a skill's instructions to the context (result at ``position``)."""

    type: Literal["SkillActivated"] = "SkillActivated"
    name: str
    source: str
    call_id: str
    position: int | None = None


class SkillDeactivated(_EventBase):
    """``skill.deactivate`` took a skill's instructions out of the context."""

    type: Literal["SkillDeactivated"] = "SkillDeactivated"
    name: str
    call_id: str


# ---------------------------------------------------------------- autonomous tasks (seq per task)


class AutonomousTaskCreated(_EventBase):
    """A task started: its goal, criteria, session bound, budget and schedule (as text)."""

    type: Literal["AutonomousTaskCreated"] = "AutonomousTaskCreated"
    task_id: str
    owner: str
    goal: str
    criteria: list[str] = Field(default_factory=list)
    max_sessions: int
    budget: Budget
    schedule: str


class AutonomyDecision(_EventBase):
    """A wake's decision: ``execute`` a session now, ``defer`` (ask again in ``seconds``) or
    ``ignore`` (sleep until the next scheduled wake), with ``source`` (``schedule``, ``trigger``,
    ``nudge``, ``continuation``) and why."""

    type: Literal["AutonomyDecision"] = "AutonomyDecision"
    decision: AutonomyDecisionKind
    source: str
    seconds: float | None = None
    reason: str = ""


class AutonomousTaskSessionStarted(_EventBase):
    type: Literal["AutonomousTaskSessionStarted"] = "AutonomousTaskSessionStarted"
    session_id: str
    number: int


class AutonomousTaskSessionEnded(_EventBase):
    """A child session ended: its turn's ``status`` (or ``failed``/``cancelled`` for the session
    itself) and what it spent (added to the task's spend)."""

    type: Literal["AutonomousTaskSessionEnded"] = "AutonomousTaskSessionEnded"
    session_id: str
    number: int
    status: str
    spend: Spend
    error: str | None = None


class AutonomousTaskAcceptanceChecked(_EventBase):
    """The acceptance check after session ``number``: ``kind`` ``command`` or ``review``, whether it ``passed``, and why."""

    type: Literal["AutonomousTaskAcceptanceChecked"] = "AutonomousTaskAcceptanceChecked"
    number: int
    kind: Literal["command", "review"]
    passed: bool
    detail: str = ""


class AutonomousTaskCheckpointed(_EventBase):
    type: Literal["AutonomousTaskCheckpointed"] = "AutonomousTaskCheckpointed"
    checkpoint: TaskCheckpoint


class AutonomousTaskWaiting(_EventBase):
    """The task sleeps on a durable timer until ``until`` (UTC): ``why`` says for what."""

    type: Literal["AutonomousTaskWaiting"] = "AutonomousTaskWaiting"
    until: datetime
    why: str = ""


class AutonomousTaskPaused(_EventBase):
    """The task paused: by ``principal`` (``pause``), or because its session was cancelled (``principal`` None)."""

    type: Literal["AutonomousTaskPaused"] = "AutonomousTaskPaused"
    principal: str | None = None
    reason: str | None = None


class AutonomousTaskResumed(_EventBase):
    type: Literal["AutonomousTaskResumed"] = "AutonomousTaskResumed"
    principal: str
    reason: str | None = None


class AutonomousTaskNudged(_EventBase):
    type: Literal["AutonomousTaskNudged"] = "AutonomousTaskNudged"
    principal: str
    reason: str | None = None


class AutonomousTaskGoalAmended(_EventBase):
    type: Literal["AutonomousTaskGoalAmended"] = "AutonomousTaskGoalAmended"
    principal: str
    goal: str
    criteria: list[str] = Field(default_factory=list)
    reason: str | None = None


class AutonomousTaskBudgetExceeded(_EventBase):
    """The task's spend reached a limit: it waits for ``raise_budget`` (or ``cancel``)."""

    type: Literal["AutonomousTaskBudgetExceeded"] = "AutonomousTaskBudgetExceeded"
    crossing: BudgetCrossing


class AutonomousTaskBudgetRaised(_EventBase):
    type: Literal["AutonomousTaskBudgetRaised"] = "AutonomousTaskBudgetRaised"
    principal: str
    budget: Budget
    max_sessions: int
    reason: str | None = None


class AutonomousTaskCompleted(_EventBase):
    type: Literal["AutonomousTaskCompleted"] = "AutonomousTaskCompleted"
    sessions: int
    spend: Spend


class AutonomousTaskFailed(_EventBase):
    """The task failed for good: ``reason`` is ``max_sessions`` (no session passed the acceptance
    check), ``invalid_config`` or ``session_failed``; ``error`` says more."""

    type: Literal["AutonomousTaskFailed"] = "AutonomousTaskFailed"
    reason: str
    error: str = ""
    sessions: int = 0


class AutonomousTaskCancelled(_EventBase):
    type: Literal["AutonomousTaskCancelled"] = "AutonomousTaskCancelled"
    principal: str | None = None
    reason: str | None = None
    session_id: str | None = None


class BudgetExceededEvent(_EventBase):
    """A session's spend reached a limit of its ``SessionConfig.budget``: the turn ended ``budget_exceeded``."""

    type: Literal["BudgetExceeded"] = "BudgetExceeded"
    crossing: BudgetCrossing


class BudgetRaised(_EventBase):
    """``raise_budget`` on a session: ``budget`` is the new one."""

    type: Literal["BudgetRaised"] = "BudgetRaised"
    principal: str
    budget: Budget
    reason: str | None = None


# ---------------------------------------------------------------- task graphs (seq per graph)


class TaskGraphCreated(_EventBase):
    """A task graph started: from a ``goal`` (the planner plans it) or a given graph."""

    type: Literal["TaskGraphCreated"] = "TaskGraphCreated"
    graph_id: str
    owner: str
    goal: str | None = None
    approve_plan: str = "ask"


class TaskDecomposed(_EventBase):
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


class TaskPlanApproved(_EventBase):
    """The plan was approved (by ``principal``, or by the graph itself when ``token.automatic``):
    the capability token minted then, frozen for the run."""

    type: Literal["TaskPlanApproved"] = "TaskPlanApproved"
    principal: str
    reason: str | None = None
    token: CapabilityToken


class TaskPlanRejected(_EventBase):
    type: Literal["TaskPlanRejected"] = "TaskPlanRejected"
    principal: str
    reason: str | None = None


class AgentTaskStarted(_EventBase):
    """Node ``node_id``'s attempt ``attempt`` started as child session ``session_id`` with ``tools``."""

    type: Literal["AgentTaskStarted"] = "AgentTaskStarted"
    node_id: str
    attempt: int
    session_id: str
    role: str = "worker"
    tools: list[str] = Field(default_factory=list)


class AgentTaskCompleted(_EventBase):
    """Node ``node_id`` completed: the reviewer passed attempt ``attempt``'s ``answer`` (cut)."""

    type: Literal["AgentTaskCompleted"] = "AgentTaskCompleted"
    node_id: str
    attempt: int
    session_id: str
    answer: str = ""
    spend: Spend = Field(default_factory=Spend)


class AgentTaskFailed(_EventBase):
    """Attempt ``attempt`` of node ``node_id`` failed (its session failed, or ``error`` says why);
    ``final``: no retry is left, the node failed for good."""

    type: Literal["AgentTaskFailed"] = "AgentTaskFailed"
    node_id: str
    attempt: int
    session_id: str | None = None
    error: str = ""
    final: bool = False
    spend: Spend = Field(default_factory=Spend)


class TaskReviewed(_EventBase):
    """The reviewer's verdict on attempt ``attempt`` of ``node_id``: ``passed`` or not, with
    ``findings``; ``error``: the review could not be read or run (it then passes: fail-open)."""

    type: Literal["TaskReviewed"] = "TaskReviewed"
    node_id: str
    attempt: int
    passed: bool
    findings: list[str] = Field(default_factory=list)
    summary: str = ""
    error: str | None = None


class TaskRetried(_EventBase):
    """Node ``node_id`` runs again as attempt ``attempt`` with ``feedback`` (findings or the error)."""

    type: Literal["TaskRetried"] = "TaskRetried"
    node_id: str
    attempt: int
    feedback: str = ""


class TaskBlocked(_EventBase):
    """Node ``node_id`` will not run: ``blocked_by`` (a node it depends on, directly or not) failed for good."""

    type: Literal["TaskBlocked"] = "TaskBlocked"
    node_id: str
    blocked_by: str


class TaskCancelled(_EventBase):
    """A node (``node_id``) or, without one, the whole graph was cancelled by ``principal``."""

    type: Literal["TaskCancelled"] = "TaskCancelled"
    node_id: str | None = None
    principal: str | None = None
    reason: str | None = None


class TaskGraphCompleted(_EventBase):
    type: Literal["TaskGraphCompleted"] = "TaskGraphCompleted"
    answer: str = ""
    spend: Spend = Field(default_factory=Spend)


class TaskGraphFailed(_EventBase):
    """The graph ended ``failed``: ``reason`` (``node_failed``, ``invalid_plan``, ``planner_failed``) and ``error``."""

    type: Literal["TaskGraphFailed"] = "TaskGraphFailed"
    reason: str
    error: str = ""
    spend: Spend = Field(default_factory=Spend)


# ---------------------------------------------------------------- delegation (in a session)


class SessionDelegated(_EventBase):
    """The session started child session ``child_session_id`` (tool call ``call_id``): ``wait``
    (the call returns its answer) or in the background (its answer comes later as a message)."""

    type: Literal["SessionDelegated"] = "SessionDelegated"
    call_id: str
    child_session_id: str
    number: int
    wait: bool = True
    tools: list[str] | None = None


class DelegatedSessionEnded(_EventBase):
    """Child session ``child_session_id`` ended with ``status``; its ``spend`` rolled up into this session's."""

    type: Literal["DelegatedSessionEnded"] = "DelegatedSessionEnded"
    child_session_id: str
    number: int
    status: str
    spend: Spend = Field(default_factory=Spend)
    error: str | None = None


Event = Annotated[
    Union[
        SessionInitialized,
        UserMessageAdded,
        TurnStarted,
        ModelRequestStarted,
        ModelTokenDelta,
        ModelToolCallRequested,
        AssistantMessageCompleted,
        PermissionRequested,
        PermissionGranted,
        PermissionDenied,
        PermissionDecisionIgnored,
        EffectReconciled,
        OperatorActed,
        ToolCallEdited,
        ToolInvocationStarted,
        ToolInvocationCompleted,
        ToolInvocationFailed,
        TurnEnded,
        SessionCancelled,
        CancelRequested,
        CancelIgnored,
        ContextCompactionStarted,
        ContextCompactionCompleted,
        ContextCompactionFailed,
        ModelProfileSwitched,
        ModelProfileSwitchFailed,
        SessionContinuedAsNew,
        SessionArchived,
        AdvisorReviewStarted,
        AdvisorReviewCompleted,
        MemoryProposed,
        MemoryAccepted,
        MemoryRejected,
        TrajectoryStarted,
        TrajectoryStepRecorded,
        TrajectoryCompleted,
        McpToolsListed,
        ElicitationAnswered,
        SkillDiscovered,
        SkillActivated,
        SkillDeactivated,
        BudgetExceededEvent,
        BudgetRaised,
        AutonomousTaskCreated,
        AutonomyDecision,
        AutonomousTaskSessionStarted,
        AutonomousTaskSessionEnded,
        AutonomousTaskAcceptanceChecked,
        AutonomousTaskCheckpointed,
        AutonomousTaskWaiting,
        AutonomousTaskPaused,
        AutonomousTaskResumed,
        AutonomousTaskNudged,
        AutonomousTaskGoalAmended,
        AutonomousTaskBudgetExceeded,
        AutonomousTaskBudgetRaised,
        AutonomousTaskCompleted,
        AutonomousTaskFailed,
        AutonomousTaskCancelled,
        TaskGraphCreated,
        TaskDecomposed,
        TaskPlanApproved,
        TaskPlanRejected,
        AgentTaskStarted,
        AgentTaskCompleted,
        AgentTaskFailed,
        TaskReviewed,
        TaskRetried,
        TaskBlocked,
        TaskCancelled,
        TaskGraphCompleted,
        TaskGraphFailed,
        SessionDelegated,
        DelegatedSessionEnded,
    ],
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_LIST_ADAPTER: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


class EventsPage(Model):
    """Answer of query ``events``: events in ``seq`` order and the session's latest ``last_seq``.

    The workflow holds only the events of its current run, from ``first_seq`` on; earlier
    ones (before a continue-as-new) are in the store's event projection.
    """

    events: list[Event]
    last_seq: int
    first_seq: int = 1
