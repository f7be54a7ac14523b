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

from schemas._base import Model
from schemas._config import SessionConfig
from schemas._messages import ToolCall, Usage
from schemas._session import PermissionRequest, TurnStatus


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
    type: Literal["ModelRequestStarted"] = "ModelRequestStarted"
    round: int
    profile: str


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


class PermissionRequested(_EventBase):
    type: Literal["PermissionRequested"] = "PermissionRequested"
    request: PermissionRequest


class PermissionGranted(_EventBase):
    type: Literal["PermissionGranted"] = "PermissionGranted"
    request_id: str
    call_id: str
    principal: str
    reason: str | None = None


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
    why: Literal["unknown_request", "already_decided", "not_owner", "mismatch", "wrong_kind"]


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
    reason: Literal["unknown_tool", "invalid_arguments", "denied", "tool_error", "cancelled", "outcome_unknown"]
    error: str
    position: int | None = None


class TurnEnded(_EventBase):
    type: Literal["TurnEnded"] = "TurnEnded"
    status: TurnStatus
    rounds: int
    error: str | None = None
    usage: Usage


class SessionCancelled(_EventBase):
    """The running turn was cancelled (signal ``cancel_turn``) or the session was."""

    type: Literal["SessionCancelled"] = "SessionCancelled"
    principal: str | None = None
    reason: str | None = None


class CancelIgnored(_EventBase):
    """A ``cancel_turn`` signal from a principal that is not the owner; nothing was cancelled."""

    type: Literal["CancelIgnored"] = "CancelIgnored"
    principal: str
    why: Literal["not_owner"]


class SessionArchived(_EventBase):
    type: Literal["SessionArchived"] = "SessionArchived"
    principal: str
    reason: str | None = None


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
        ToolInvocationStarted,
        ToolInvocationCompleted,
        ToolInvocationFailed,
        TurnEnded,
        SessionCancelled,
        CancelIgnored,
        SessionArchived,
    ],
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_LIST_ADAPTER: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


class EventsPage(Model):
    """Answer of query ``events``: events in ``seq`` order and the session's latest ``last_seq``."""

    events: list[Event]
    last_seq: int
