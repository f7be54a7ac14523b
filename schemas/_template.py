"""What every child session of a task, a graph or a delegating session inherits: one
``SessionTemplate`` and one way (``child_config``) to make a child's ``SessionConfig`` from it.

A template holds every ``SessionConfig`` field but the ones that say which child it is
(``SESSION_CHILD_FIELDS``: its id, owner, workspace, title, first prompt, ``ends_after_turn``, parent
and output spec).
``child_config`` copies every template field by iteration, never by name, so a field added to
both reaches every child; a field added to ``SessionConfig`` alone fails this module's import
(and ``tests/schemas/test_template.py``) until it is in one of the two sets.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget
from agentrt.schemas._config import (
    MAX_APPROVAL_TIMEOUT_SECONDS,
    MAX_CALL_TIMEOUT_SECONDS,
    AdvisorPolicy,
    ApprovalPolicy,
    SandboxPolicy,
    SessionConfig,
)

# The ``SessionConfig`` fields each child gets from its starter, never from a template (``output``:
# what a child's answers must be is its starter's question, not its parent's own schema).
SESSION_CHILD_FIELDS: frozenset[str] = frozenset(
    {"session_id", "owner", "workspace", "title", "prompt", "ends_after_turn", "parent", "output"}
)

__all__ = [
    "SESSION_CHILD_FIELDS",
    "SessionTemplate",
    "child_config",
    "session_template",
]


class SessionTemplate(Model):
    """The sessions a task, a graph or a delegating session starts, as ``SessionConfig`` has each
    field (same meanings, same defaults): model (``profile``, ``script``, ``system_prompt`` and its
    mode), grants (``tools``, ``sandbox``, ``network``, ``mcp_servers``, ``local_tools``, ``fused_rounds``,
    ``tool_task_queue``, ``model_task_queue``), approvals (``approval``, ``approval_timeout_seconds``, ``interactive``,
    ``operators``, ``advisor``), timeouts in seconds (model, tool, heartbeat), rounds per turn,
    ``budget``, ``agent`` (a registered agent's name) and ``compact_threshold``. A starter may override any of them per child (a task's remaining budget, a graph
    node's grant)."""

    profile: str = "default"
    script: str | None = None
    system_prompt: str | None = None
    system_prompt_mode: Literal["replace", "extend"] = Field(default="extend", exclude_if=lambda v: v == "extend")
    tools: list[str] | None = None
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    approval_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_SECONDS, allow_inf_nan=False)
    max_rounds_per_turn: int = Field(default=250, ge=1)
    compact_threshold: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False, exclude_if=lambda v: v is None)
    model_timeout_seconds: float = Field(default=600.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    tool_timeout_seconds: float = Field(default=300.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    heartbeat_timeout_seconds: float = Field(default=3.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    local_tools: bool = Field(default=True, exclude_if=lambda v: v is True)
    fused_rounds: bool = Field(default=False, exclude_if=lambda v: v is False)
    sandbox: SandboxPolicy = Field(default="workspace_write", exclude_if=lambda v: v == "workspace_write")
    network: bool = Field(default=False, exclude_if=lambda v: v is False)
    interactive: bool = Field(default=True, exclude_if=lambda v: v is True)
    operators: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    tool_task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    model_task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    advisor: AdvisorPolicy = Field(default_factory=AdvisorPolicy, exclude_if=lambda v: v == AdvisorPolicy())
    mcp_servers: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)


_UNPLACED = set(SessionConfig.model_fields) - set(SessionTemplate.model_fields) - SESSION_CHILD_FIELDS
if _UNPLACED or set(SessionTemplate.model_fields) & SESSION_CHILD_FIELDS:
    raise TypeError(
        f"SessionConfig fields {sorted(_UNPLACED)} are neither in SessionTemplate nor in SESSION_CHILD_FIELDS: "
        "say whether a child inherits them (schemas/_template.py)"
    )


def session_template(config: SessionConfig) -> SessionTemplate:
    """The template a session hands its delegated children: every template field as ``config`` has it."""
    return SessionTemplate(**{name: getattr(config, name) for name in SessionTemplate.model_fields})


def child_config(template: SessionTemplate, /, **per_child: Any) -> SessionConfig:
    """A child's ``SessionConfig``: every field of (a deep copy of) ``template``, then ``per_child``
    (at least ``session_id``, ``owner`` and ``workspace``; any template field may be overridden).
    Raises ``pydantic.ValidationError`` for a field ``SessionConfig`` does not have."""
    copy = template.model_copy(deep=True)
    fields: dict[str, Any] = {name: getattr(copy, name) for name in SessionTemplate.model_fields}
    fields.update(per_child)
    return SessionConfig(**fields)
