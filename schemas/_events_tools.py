"""Events of tool calls: approvals and operator decisions, the advisor's review, invocations and
their effects, and the tool sources (MCP servers, skills)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._events_base import EventBase
from agentrt.schemas._turns import PermissionRequest

__all__ = [
    "AdvisorReviewCompleted",
    "AdvisorReviewStarted",
    "EffectReconciled",
    "ElicitationAnswered",
    "McpToolsListed",
    "OperatorActed",
    "PermissionDecisionIgnored",
    "PermissionDenied",
    "PermissionGranted",
    "PermissionRequested",
    "SkillActivated",
    "SkillDeactivated",
    "SkillDiscovered",
    "ToolCallEdited",
    "ToolInvocationCompleted",
    "ToolInvocationFailed",
    "ToolInvocationStarted",
]


class PermissionRequested(EventBase):
    type: Literal["PermissionRequested"] = "PermissionRequested"
    request: PermissionRequest


class PermissionGranted(EventBase):
    """A call allowed to run, and why: by a decision on ``request_id`` (``scope`` ``once``); by an
    earlier grant for the rest of the session (``scope`` ``session``, ``request_id`` the request
    that granted it, ``rule`` the rule it covers); or by the policy itself, no one asked (``scope``
    ``policy``, no ``request_id`` or ``principal``; ``rule`` the setting that allowed it, such as
    ``approval.read_only = allow``, ``reason`` the policy's sentence)."""

    type: Literal["PermissionGranted"] = "PermissionGranted"
    request_id: str | None = None
    call_id: str
    principal: str | None = None
    reason: str | None = None
    scope: Literal["once", "session", "policy"] = Field(default="once", exclude_if=lambda v: v == "once")
    rule: str | None = Field(default=None, exclude_if=lambda v: v is None)


class OperatorActed(EventBase):
    """An operator (``SessionConfig.operators``), not the owner, acted on the session: ``action``
    is ``grant``, ``deny``, ``reconcile``, ``cancel``, ``archive``, ``answer`` (an elicitation),
    ``raise_budget`` or ``rename``, ``target`` the request or turn (None for the session), ``reason`` the reason the operator gave."""

    type: Literal["OperatorActed"] = "OperatorActed"
    principal: str
    action: Literal["grant", "deny", "reconcile", "cancel", "archive", "answer", "raise_budget", "rename"]
    target: str | None = None
    reason: str


class ToolCallEdited(EventBase):
    """An approval changed a call's arguments before it ran: ``arguments`` (SHA-256
    ``arguments_sha256``) are what ran, chosen by ``principal`` on ``request_id``."""

    type: Literal["ToolCallEdited"] = "ToolCallEdited"
    request_id: str
    call_id: str
    principal: str
    arguments: dict[str, Any]
    arguments_sha256: str


class PermissionDenied(EventBase):
    type: Literal["PermissionDenied"] = "PermissionDenied"
    request_id: str
    call_id: str
    principal: str
    reason: str | None = None


class PermissionDecisionIgnored(EventBase):
    """A decision that changed nothing: unknown or already-decided request, or wrong principal."""

    type: Literal["PermissionDecisionIgnored"] = "PermissionDecisionIgnored"
    request_id: str
    decision: str
    principal: str
    why: Literal[
        "unknown_request", "already_decided", "not_owner", "mismatch", "wrong_kind", "invalid_edit", "no_reason",
        "invalid_answer",
    ]


class EffectReconciled(EventBase):
    """An operator said whether an effect of unknown outcome was applied (signal ``reconcile``)."""

    type: Literal["EffectReconciled"] = "EffectReconciled"
    request_id: str
    call_id: str
    outcome: Literal["applied", "not_applied"]
    principal: str
    note: str | None = None


class ToolInvocationStarted(EventBase):
    type: Literal["ToolInvocationStarted"] = "ToolInvocationStarted"
    call_id: str
    tool: str
    arguments: dict[str, Any] | None = None


class ToolInvocationCompleted(EventBase):
    type: Literal["ToolInvocationCompleted"] = "ToolInvocationCompleted"
    call_id: str
    tool: str
    preview: str
    size_bytes: int
    position: int


class ToolInvocationFailed(EventBase):
    type: Literal["ToolInvocationFailed"] = "ToolInvocationFailed"
    call_id: str
    tool: str
    reason: Literal[
        "unknown_tool", "invalid_arguments", "denied", "denied_by_sandbox", "tool_error", "cancelled", "outcome_unknown",
        "advisor_rejected",
    ]
    error: str
    position: int | None = None


class AdvisorReviewStarted(EventBase):
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


class AdvisorReviewCompleted(EventBase):
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


class McpToolsListed(EventBase):
    """A turn listed its MCP servers' tools (``mcp.list_tools``, at most once per turn): how many
    it offers the model, the ``digest`` of their specs, and ``failures`` (server name → why its
    tools are missing from this turn)."""

    type: Literal["McpToolsListed"] = "McpToolsListed"
    servers: list[str]
    tools: int
    digest: str | None = None
    failures: dict[str, str] = Field(default_factory=dict)


class ElicitationAnswered(EventBase):
    """The answer to an ``elicitation`` request (``answer_elicitation``): ``action`` ``accept``
    with ``content``, ``decline`` or ``cancel``; the MCP call resumes with it."""

    type: Literal["ElicitationAnswered"] = "ElicitationAnswered"
    request_id: str
    call_id: str
    principal: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class SkillDiscovered(EventBase):
    """A skill the session may activate (``skill.activate``): found when the session started."""

    type: Literal["SkillDiscovered"] = "SkillDiscovered"
    name: str
    description: str
    source: str


class SkillActivated(EventBase):
    """``skill.activate`` joined a skill's instructions to the context (result at ``position``)."""

    type: Literal["SkillActivated"] = "SkillActivated"
    name: str
    source: str
    call_id: str
    position: int | None = None


class SkillDeactivated(EventBase):
    """``skill.deactivate`` took a skill's instructions out of the context."""

    type: Literal["SkillDeactivated"] = "SkillDeactivated"
    name: str
    call_id: str
