"""Inputs and outputs of activities. They carry references and small metadata, never a transcript."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._agents import AgentSpec
from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, Spend
from agentrt.schemas._config import ApprovalPolicy, ModelProfile, SandboxPolicy, SessionConfig
from agentrt.schemas._context import ContextBreakdown, ContextPlan, ProfileLookup
from agentrt.schemas._events import Event
from agentrt.schemas._memory import MemoryNote
from agentrt.schemas._messages import Message, PositionedMessage, ReasoningBlock, ToolCall, ToolSpec, Usage
from agentrt.schemas._output import OutputSpec
from agentrt.schemas._skills import SkillInfo

__all__ = [
    "FUSED_RESULT_BYTES",
    "FuseRounds",
    "FusedRound",
    "FusedToolResult",
    "ListToolsInput",
    "ListToolsResult",
    "ModelCallInput",
    "ModelCallResult",
    "ModelRequest",
    "ModelResponse",
    "PrepareSessionInput",
    "PrepareSessionResult",
    "ReconcileEffectInput",
    "StoreAppendInput",
    "ToolExecuteInput",
    "ToolExecuteResult",
]


class ModelRequest(Model):
    """What a provider adapter receives: the profile, system prompt, messages and tools."""

    profile: ModelProfile
    system: str | None = None
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    purpose: Literal["reply", "summary", "advisor", "review", "plan"] = "reply"
    reply_index: int | None = None
    # ``purpose="advisor"``: the session's earlier advisor reviews (the scripted advisor's step);
    # ``purpose="review"``: the task's earlier acceptance reviews (the scripted reviewer's step).
    review_index: int | None = None
    # A task's session number (``SessionParent.number``): the scripted model's ``sessions`` section.
    script_session: int | None = None
    # A task graph's node (``SessionParent.node``): the scripted model's ``nodes`` section.
    script_node: str | None = None
    # The turn's output spec: the adapter asks for it natively, or offers ``output.tool_spec()``.
    output: OutputSpec | None = None


class ModelResponse(Model):
    """What a provider adapter returns: final text (the answer, reasoning left out), tool calls,
    usage (tokens), stop reason and the reasoning blocks, in the order the model sent them."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    stop_reason: str | None = None
    reasoning: list[ReasoningBlock] = Field(default_factory=list)


class StoreAppendInput(Model):
    """Activity ``store.append``: idempotent write of messages by (session, position) and events by (session, seq).

    Also travels as ``store_writes`` in a model or tool call's input: the activity writes it
    first (a local tool call: with its result), so staged events and messages need no
    activity of their own.
    """

    session_id: str
    config: SessionConfig | None = None
    messages: list[PositionedMessage] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)


# The most bytes of one tool result a fused round carries back to the workflow (UTF-8); a reply
# whose calls return more is handed to the workflow unrun, which runs them as tool activities.
FUSED_RESULT_BYTES = 16 * 1024


class FuseRounds(Model):
    """What a model call may run itself (``fused-rounds-v1``, ``SessionConfig.fused_rounds``).

    After a reply whose every tool call names one of ``tools`` (read-only, fast) and that the
    session's policy (``approval``, ``sandbox``, ``network``, ``interactive``, ``workspace``,
    engine ``policy_version``) allows without asking, the activity runs those calls (each
    bounded by ``timeout_seconds``) and calls the model again, at most ``max_rounds`` more
    times. Results over ``max_result_bytes`` (bytes) stop it: that reply goes back unrun."""

    max_rounds: int = Field(ge=1)
    tools: list[str]
    workspace: str
    approval: ApprovalPolicy
    sandbox: SandboxPolicy
    network: bool = False
    interactive: bool = True
    policy_version: int = 2
    timeout_seconds: float = Field(gt=0)
    max_result_bytes: int = FUSED_RESULT_BYTES


class FusedToolResult(Model):
    """One call a fused round ran: its result ``text`` as the transcript holds it (secrets
    redacted), ``ok`` False for a tool's error (``error_type``), and the state keys it read."""

    call_id: str
    ok: bool
    text: str
    error_type: str | None = Field(default=None, exclude_if=lambda v: v is None)
    state_keys: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)

    def message(self, call: ToolCall) -> Message:
        """The result as the transcript holds it (as ``tool.execute`` stores a call's result)."""
        return Message(
            role="tool", tool_call_id=call.id, name=call.name, text=self.text, is_error=not self.ok, state_keys=self.state_keys
        )


class FusedRound(Model):
    """A round a model call ran itself: the model's reply and its calls' results, in call order."""

    text: str = ""
    tool_calls: list[ToolCall]
    usage: Usage = Field(default_factory=Usage)
    stop_reason: str | None = None
    reasoning_chars: int = Field(default=0, exclude_if=lambda v: v == 0)
    results: list[FusedToolResult]
    # The input by source of the call that gave this reply (event ``ContextAssembled``).
    context: ContextBreakdown | None = Field(default=None, exclude_if=lambda v: v is None)


class ModelCallInput(Model):
    """Activity ``provider.complete``: the transcript is read from the store.

    With a ``plan``, the positions in its ranges (plus its summary); without one, every
    position < ``upto_position``. ``reply_index`` counts the session's earlier assistant
    messages (the scripted model's step). ``system_prompt`` extends or replaces (by
    ``system_prompt_mode``) the system prompt the profile gives (``activities/_system_prompt.py``).
    """

    session_id: str
    turn_id: str
    round: int
    profile: str
    script: str | None = None
    system_prompt: str | None = None
    system_prompt_mode: Literal["replace", "extend"] = Field(default="extend", exclude_if=lambda v: v == "extend")
    tool_names: list[str] = Field(default_factory=list)
    upto_position: int
    reply_position: int
    plan: ContextPlan | None = None
    reply_index: int | None = None
    # Left out when None: a worker of an earlier version (extra fields forbidden) still reads the input.
    store_writes: StoreAppendInput | None = Field(default=None, exclude_if=lambda v: v is None)
    # The digest of the turn's MCP tool specs (``mcp.list_tools``; the store keeps them under it),
    # offered besides ``tool_names``; and the skills the session may activate. Left out when unset.
    tool_listing: str | None = Field(default=None, exclude_if=lambda v: v is None)
    skills: list[SkillInfo] = Field(default_factory=list, exclude_if=lambda v: not v)
    # The input's agent as the worker registered it; the task queue the worker serves (named by a
    # session that fails for an unknown tool). Both left out when None.
    agent: AgentSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # What is left of the session's budget, for the system prompt; and the session's number in its
    # autonomous task (the scripted model's ``sessions`` section). Left out when unset.
    budget_note: str | None = Field(default=None, exclude_if=lambda v: v is None)
    script_session: int | None = Field(default=None, exclude_if=lambda v: v is None)
    script_node: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The turn's output spec (its final answer is checked against it); left out when None.
    output: OutputSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    # The session's budget and its spend before this call: a call whose prompt alone would pass a
    # token or cost limit is refused before it is sent (``Budget.passed_by``). Left out when None.
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    spend: Spend | None = Field(default=None, exclude_if=lambda v: v is None)
    # The read-only rounds the call may run itself (fused-rounds-v1); left out when None.
    fuse: FuseRounds | None = Field(default=None, exclude_if=lambda v: v is None)


class ModelCallResult(Model):
    """Activity ``provider.complete``'s result. The reply's reasoning blocks stay in the store
    (table ``reasoning``, at ``position``); ``reasoning_chars`` says how much there was.
    A final answer (no tool calls) of a call with an output spec is checked here: ``output`` is
    the validated object, or ``output_problems`` says why the answer does not match (an answer
    given by the output tool is ``text``, as JSON)."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    stop_reason: str | None = None
    position: int
    reasoning_chars: int = Field(default=0, exclude_if=lambda v: v == 0)
    output: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    output_problems: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    # With ``ModelCallInput.fuse``: the rounds the call ran itself, before the reply above (whose
    # ``position`` the workflow then assigns); ``call_again``: the call ended after those rounds
    # with no reply of its own (its time, round limit or a refusal), so the fields above are empty.
    fused: list[FusedRound] = Field(default_factory=list, exclude_if=lambda v: not v)
    call_again: bool = Field(default=False, exclude_if=lambda v: v is False)
    # The call's input by source (event ``ContextAssembled``); None from workers before it.
    context: ContextBreakdown | None = Field(default=None, exclude_if=lambda v: v is None)


class ListToolsInput(Model):
    """Activity ``tools.list``: ``names`` None lists every registered tool."""

    names: list[str] | None = None


class ListToolsResult(Model):
    tools: list[ToolSpec]
    unknown: list[str] = Field(default_factory=list)


class PrepareSessionInput(Model):
    """Activity ``session.prepare``: what a new session needs before its first turn, in one call.

    ``tools``: the session's tool names (None: every registered tool); ``profile`` and
    ``script``: as for ``profiles.describe``.
    """

    tools: list[str] | None = None
    profile: str
    script: str | None = None
    # The session's workspace, where skills are looked for; left out when None (as before skills).
    workspace: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The session's agent (``SessionConfig.agent``): its tools and profile are listed and described.
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The session's id and owner: the id is claimed for the owner in the store (``claim_owner``);
    # another owner's id fails the session before anything of it is read or written.
    session_id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    owner: str | None = Field(default=None, exclude_if=lambda v: v is None)


class PrepareSessionResult(Model):
    """Result of ``session.prepare``: the tools' specs (and the names not registered), and the
    profile's limits; ``skills``: the skills found in the workspace and the worker's skill paths
    (left out when none; then the skill tools are not offered)."""

    tools: ListToolsResult
    profile: ProfileLookup
    skills: list[SkillInfo] = Field(default_factory=list, exclude_if=lambda v: not v)
    # The input's agent as the worker registered it; the task queue the worker serves (named by a
    # session that fails for an unknown tool). Both left out when None.
    agent: AgentSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ToolExecuteInput(Model):
    """Activity ``tool.execute``: run one call in ``workspace`` and store its result at ``result_position``."""

    session_id: str
    turn_id: str
    call: ToolCall
    workspace: str
    idempotency_key: str
    result_position: int
    timeout_seconds: float = 300.0
    # Left out when None: a worker of an earlier version (extra fields forbidden) still reads the input.
    store_writes: StoreAppendInput | None = Field(default=None, exclude_if=lambda v: v is None)
    # The session's SandboxPolicy and network choice; left out at their defaults, for the same reason.
    sandbox: SandboxPolicy = Field(default="workspace_write", exclude_if=lambda v: v == "workspace_write")
    network: bool = Field(default=False, exclude_if=lambda v: v is False)
    # A line put before the result the model reads (an approval edited the call); left out when None.
    note: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ToolExecuteResult(Model):
    """``ok`` False means the tool ran and failed; ``error`` is what the model is shown."""

    ok: bool
    preview: str = ""
    size_bytes: int = 0
    error: str | None = None
    error_type: str | None = None
    position: int
    state_keys: list[str] = Field(default_factory=list)
    # ``memory.write``: the memory it stored (the workflow records MemoryAccepted or MemoryProposed).
    memory: MemoryNote | None = Field(default=None, exclude_if=lambda v: v is None)


class ReconcileEffectInput(Model):
    """Activity ``effects.reconcile``: record an operator's answer for an effect of unknown outcome."""

    idempotency_key: str
    outcome: Literal["applied", "not_applied"]
    principal: str
    note: str | None = None
