"""The audit log's entry: one act of a principal (an approval, a cancel, a budget raised, a memory
decided ...) as the store recorded it, whatever surface carried it (the Python client, the CLI,
the gateway, or a signal or update sent from the Temporal UI or CLI)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._base import Model

__all__ = [
    "AUDIT_ACTIONS",
    "AuditAction",
    "AuditEntry",
    "AuditTargetKind",
]

# Every act the audit log records, by what it acts on (docs/audit.md lists the event behind each).
AuditAction = Literal[
    # a session
    "approve", "deny", "edit", "reconcile", "answer", "cancel", "archive", "raise_budget", "switch_model", "rename",
    # an autonomous task (also "cancel" and "raise_budget"); "pause" and "resume" a session and a graph too
    "pause", "resume", "nudge", "amend_goal",
    # a task graph (also "cancel")
    "approve_plan", "reject_plan", "retry_node",
    # a memory
    "accept_memory", "reject_memory", "forget_memory",
    # a tenant
    "raise_quota",
    # an MCP server
    "trust_mcp_server", "revoke_mcp_server", "add_mcp_server", "change_mcp_server",
]
AUDIT_ACTIONS: tuple[str, ...] = AuditAction.__args__  # type: ignore[attr-defined]

AuditTargetKind = Literal["session", "task", "graph", "memory", "tenant", "mcp_server"]


class AuditEntry(Model):
    """One recorded act (``Store.audit``, ``AgentClient.audit``, ``agentrt audit``, ``GET /v1/audit``).

    - ``id``: the entry's number in the store (grows with each entry recorded).
    - ``at``: when the act took effect, timezone-aware UTC (the workflow's time of the event that
      records it; the store's clock for acts on the store itself).
    - ``principal``: who acted, as the signal or update named it (``temporal``: a workflow
      cancellation sent to Temporal itself).
    - ``action``: what was done (``AuditAction``); ``target_kind`` and ``target_id``: on what (a
      session, task or graph id; a memory id); ``owner``: the target's owner ("" when unknown).
    - ``reason``: the reason given (an operator must give one), else None.
    - ``detail``: more about the act (a request id, a turn, the new budget, the event's ``seq``),
      at most 4,096 characters of JSON in the store.
    """

    id: int
    at: datetime
    principal: str
    action: str
    target_kind: str
    target_id: str
    owner: str = ""
    reason: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
