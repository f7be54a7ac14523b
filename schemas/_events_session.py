"""Events of a session's life: its start, its turns and model calls, cancellation, context
compaction, profile switches, budget, continue-as-new, archiving and delegation to child sessions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._budget import Budget, BudgetCrossing, Spend
from agentrt.schemas._config import SessionConfig
from agentrt.schemas._base import Model
from agentrt.schemas._context import ContextBreakdown
from agentrt.schemas._events_base import EventBase
from agentrt.schemas._messages import ToolCall, Usage
from agentrt.schemas._turns import TurnStatus

__all__ = [
    "AssistantMessageCompleted",
    "BudgetExceededEvent",
    "BudgetRaised",
    "CancelIgnored",
    "CancelRequested",
    "ContextAssembled",
    "ContextCompactionCompleted",
    "ContextCompactionFailed",
    "ContextCompactionSkipped",
    "ContextCompactionStarted",
    "DelegatedSessionEnded",
    "ModelCallRetried",
    "ModelCallRetry",
    "ModelProfileSwitchFailed",
    "ModelProfileSwitched",
    "ModelRequestStarted",
    "ModelTokenDelta",
    "ModelToolCallRequested",
    "OutputValidationFailed",
    "SessionArchived",
    "SessionCancelled",
    "SessionContinuedAsNew",
    "SessionDelegated",
    "SessionInitialized",
    "SessionPaused",
    "SessionRenamed",
    "SessionResumed",
    "TurnEnded",
    "TurnStarted",
    "UserMessageAdded",
]


class SessionInitialized(EventBase):
    type: Literal["SessionInitialized"] = "SessionInitialized"
    config: SessionConfig
    tools: list[str]


class UserMessageAdded(EventBase):
    type: Literal["UserMessageAdded"] = "UserMessageAdded"
    principal: str
    text: str
    position: int


class TurnStarted(EventBase):
    type: Literal["TurnStarted"] = "TurnStarted"


class ModelCallRetry(Model):
    """Signal ``model_call_retried``: a model call's attempt failed and Temporal will run it again
    (the model activity sends it, at most once per failed attempt). ``attempt``: the attempt that
    comes next (2 for the first retry); ``cause``: the failure's code (``stream_stalled``,
    ``provider_http``, ``provider_transport`` ...) and ``detail`` its message (bounded, redacted);
    ``profile``, ``model`` and ``base_url`` (None: the provider's default) say where it went."""

    turn_id: str | None = None
    round: int = 0
    profile: str
    model: str = ""
    base_url: str | None = None
    attempt: int = Field(ge=2)
    cause: str = Field(max_length=64)
    detail: str = Field(default="", max_length=2_000)


class ModelCallRetried(EventBase):
    """A model call of the turn failed and is being tried again (signal ``model_call_retried``, from
    the worker that ran the failed attempt): ``profile``, ``model``, ``base_url``, the next
    ``attempt`` and the ``cause`` (``stream_stalled`` ...) with its ``detail``."""

    type: Literal["ModelCallRetried"] = "ModelCallRetried"
    round: int = 0
    profile: str
    model: str = ""
    base_url: str | None = None
    attempt: int
    cause: str
    detail: str = ""


class ModelRequestStarted(EventBase):
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


class ModelTokenDelta(EventBase):
    type: Literal["ModelTokenDelta"] = "ModelTokenDelta"
    round: int
    text: str


class ModelToolCallRequested(EventBase):
    type: Literal["ModelToolCallRequested"] = "ModelToolCallRequested"
    round: int
    call: ToolCall


class AssistantMessageCompleted(EventBase):
    type: Literal["AssistantMessageCompleted"] = "AssistantMessageCompleted"
    round: int
    text: str
    tool_calls: int
    usage: Usage
    position: int
    # Characters of reasoning the model produced before this message (the blocks are in the
    # store's ``reasoning`` table); left out when 0.
    reasoning_chars: int = Field(default=0, exclude_if=lambda v: v == 0)


class TurnEnded(EventBase):
    type: Literal["TurnEnded"] = "TurnEnded"
    status: TurnStatus
    rounds: int
    error: str | None = None
    usage: Usage
    error_type: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # A structured turn's validated object (``TurnOutcome.output``); left out when None.
    output: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class OutputValidationFailed(EventBase):
    """A final answer did not match the turn's output schema. ``attempt`` (1-based) of
    ``max_attempts``; ``errors`` as the model is told them. Below the bound, the errors go back to
    the model as a user message at ``position`` and the turn goes on (``position`` None: the
    last attempt, the turn ends ``output_invalid``)."""

    type: Literal["OutputValidationFailed"] = "OutputValidationFailed"
    round: int
    attempt: int
    max_attempts: int
    errors: list[str]
    position: int | None = None


class SessionCancelled(EventBase):
    """The running turn was cancelled (signal ``cancel_turn``) or the session was."""

    type: Literal["SessionCancelled"] = "SessionCancelled"
    principal: str | None = None
    reason: str | None = None


class CancelRequested(EventBase):
    """A cancel of the running turn was asked for (signal ``cancel_turn``, ``archive`` or a
    workflow cancellation); the turn ends with ``SessionCancelled`` once the step in flight stops."""

    type: Literal["CancelRequested"] = "CancelRequested"
    principal: str | None = None
    reason: str | None = None


class CancelIgnored(EventBase):
    """A ``cancel_turn`` signal from a principal that is not the owner (``not_owner``), or with
    no principal at all (``no_principal``, ``principal`` empty); nothing was cancelled."""

    type: Literal["CancelIgnored"] = "CancelIgnored"
    principal: str
    why: Literal["not_owner", "no_principal", "no_reason"]


class ContextCompactionStarted(EventBase):
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


class ContextCompactionCompleted(EventBase):
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


class ContextCompactionFailed(EventBase):
    """Compaction failed (the model call's retries were spent); no summary was stored.

    ``fallback_used``: the session goes on with the sliding window instead (each call sends the
    newest messages that fit and leaves the older ones out; they stay in the store). Events
    recorded before the field was added lack it and read True: the fallback was the same.
    """

    type: Literal["ContextCompactionFailed"] = "ContextCompactionFailed"
    error: str
    fallback_used: bool = True


class ContextCompactionSkipped(EventBase):
    """A compaction was asked for (``trigger``: ``threshold``, ``requested`` or ``switch``) and
    not run. ``reason``: ``not_enough_history`` (the conversation since the last summary is its
    newest part, which is kept verbatim) or ``already_compacting`` (a compaction is running or
    queued; a requested one joins it). ``estimated_tokens``: the context now (tokens)."""

    type: Literal["ContextCompactionSkipped"] = "ContextCompactionSkipped"
    trigger: Literal["threshold", "requested", "switch"]
    reason: Literal["not_enough_history", "already_compacting"]
    principal: str | None = None
    estimated_tokens: int = 0


class ContextAssembled(EventBase):
    """What model call ``round`` of the turn was sent, by source (``breakdown``, tokens), as the
    worker assembled it; or, with ``overflow`` True, what it would have been: its pinned parts
    alone passed the input budget, so nothing was sent and the turn failed ``context_overflow``."""

    type: Literal["ContextAssembled"] = "ContextAssembled"
    round: int
    profile: str
    breakdown: ContextBreakdown
    overflow: bool = False


class ModelProfileSwitched(EventBase):
    """The session now uses ``profile`` (update ``switch_model``); windows are in tokens."""

    type: Literal["ModelProfileSwitched"] = "ModelProfileSwitched"
    principal: str
    from_profile: str
    profile: str
    context_window: int
    max_output_tokens: int
    compacted: bool = False


class ModelProfileSwitchFailed(EventBase):
    """A ``switch_model`` request that could not be carried out (e.g. an unknown profile)."""

    type: Literal["ModelProfileSwitchFailed"] = "ModelProfileSwitchFailed"
    principal: str
    profile: str
    error: str


class SessionContinuedAsNew(EventBase):
    """The session's workflow continued as new run number ``run`` (1 is the first run).

    ``history_events`` and ``history_bytes`` describe the run that ended. Nothing the user
    sees is lost: state, queued messages and the context pointer carry over; the whole
    transcript and every event stay in the store. ``reason``: ``history`` when Temporal
    suggested it (the history's size), ``new_build`` when a newer build of the session's Worker
    Deployment became current (the next run runs on it).
    """

    type: Literal["SessionContinuedAsNew"] = "SessionContinuedAsNew"
    run: int
    history_events: int
    history_bytes: int
    reason: Literal["history", "new_build"] = "history"


class SessionArchived(EventBase):
    """The session ended: update ``archive``, a workflow cancellation (``principal`` "temporal"), or
    the end of the first turn of a session with ``ends_after_turn`` (``principal`` its owner)."""

    type: Literal["SessionArchived"] = "SessionArchived"
    principal: str
    reason: str | None = None


class SessionPaused(EventBase):
    """``pause`` (or signal ``set_paused`` from the task, graph or session that started it): from now
    on no model or tool call starts until ``SessionResumed``; a call in flight finishes."""

    type: Literal["SessionPaused"] = "SessionPaused"
    principal: str
    reason: str | None = None


class SessionResumed(EventBase):
    """``resume``: the session goes on where it stopped, after ``paused_seconds`` paused."""

    type: Literal["SessionResumed"] = "SessionResumed"
    principal: str
    reason: str | None = None
    paused_seconds: float = 0.0


class BudgetExceededEvent(EventBase):
    """A session's spend reached a limit of its ``SessionConfig.budget``: the turn ended ``budget_exceeded``."""

    type: Literal["BudgetExceeded"] = "BudgetExceeded"
    crossing: BudgetCrossing


class BudgetRaised(EventBase):
    """``raise_budget`` on a session: ``budget`` is the new one."""

    type: Literal["BudgetRaised"] = "BudgetRaised"
    principal: str
    budget: Budget
    reason: str | None = None


class SessionRenamed(EventBase):
    """``rename`` on a session: its ``title`` is now ``title`` (None: it has none), was ``previous``."""

    type: Literal["SessionRenamed"] = "SessionRenamed"
    principal: str
    title: str | None = None
    previous: str | None = None
    reason: str | None = None


class SessionDelegated(EventBase):
    """The session started child session ``child_session_id`` (tool call ``call_id``): ``wait``
    (the call returns its answer) or in the background (its answer comes later as a message)."""

    type: Literal["SessionDelegated"] = "SessionDelegated"
    call_id: str
    child_session_id: str
    number: int
    wait: bool = True
    tools: list[str] | None = None


class DelegatedSessionEnded(EventBase):
    """Child session ``child_session_id`` ended with ``status``; its ``spend`` rolled up into this session's."""

    type: Literal["DelegatedSessionEnded"] = "DelegatedSessionEnded"
    child_session_id: str
    number: int
    status: str
    spend: Spend = Field(default_factory=Spend)
    error: str | None = None
