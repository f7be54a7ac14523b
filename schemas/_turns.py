"""What the events and the session's state both say about a turn: how it ended
(``TurnStatus``) and the tool call it may be waiting on (``PermissionRequest``).

Below both ``_events`` and ``_session`` so that each model is complete where it is defined.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._base import Model

__all__ = [
    "PermissionRequest",
    "TurnStatus",
]

TurnStatus = Literal["completed", "failed", "cancelled", "round_limit", "budget_exceeded", "output_invalid"]


class PermissionRequest(Model):
    """A tool call waiting for a human decision (event ``PermissionRequested``).

    ``kind`` is ``tool_call`` (approve running it; answer with signal ``permission_decision``)
    or ``reconcile`` (the worker died between claiming and recording an effect; say whether
    it was applied with signal ``reconcile``) or ``elicitation`` (an MCP server asked the user
    ``message`` in the middle of the call; answer with update ``answer_elicitation``, content
    matching ``requested_schema``). ``arguments_sha256`` is the SHA-256 of the
    frozen arguments' canonical JSON; a decision that names another call or hash is ignored.
    """

    request_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    arguments_sha256: str
    risk: str
    reason: str
    kind: Literal["tool_call", "reconcile", "elicitation"] = "tool_call"
    # A reconcile request's effect ledger key (left out otherwise and in requests of earlier versions).
    idempotency_key: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The policy rule a grant "for this session" would cover (left out when there is none).
    grant_rule: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # An elicitation request's question and the JSON Schema its answer must match (left out otherwise).
    message: str | None = Field(default=None, exclude_if=lambda v: v is None)
    requested_schema: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    url: str | None = Field(default=None, exclude_if=lambda v: v is None)
