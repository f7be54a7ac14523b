"""The inputs of a task graph's control updates: ``approve_plan`` (decide its plan), ``cancel``,
``pause`` and ``resume``, and ``retry_node`` (run a node that failed for good again). Each names its
principal: the owner, or an operator with a ``reason``."""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from agentrt.schemas._base import Model
from agentrt.schemas._graph import MAX_NODE_ID_CHARS

__all__ = ["ApprovePlanInput", "GraphControlInput", "RetryNodeInput"]


class ApprovePlanInput(Model):
    """Update ``approve_plan``: ``approve`` (default) mints the capability token and runs the
    graph; False rejects the plan (the graph ends ``rejected``). The owner, or an operator with a ``reason``."""

    principal: str
    approve: bool = True
    reason: str | None = None
    expires_at: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)  # as TaskControlInput's


class GraphControlInput(Model):
    """Updates ``cancel``, ``pause`` and ``resume``: who asks and why (an operator must give a reason)."""

    principal: str
    reason: str | None = None
    expires_at: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)  # as TaskControlInput's


class RetryNodeInput(Model):
    """Update ``retry_node``: run node ``node_id``, which failed for good, again (``1 + max_retries``
    attempts more), its dependants blocked by it waiting for it again. The owner, or an operator
    with a ``reason``; at most ``MAX_HAND_RETRIES`` times a node."""

    principal: str
    node_id: str = Field(min_length=1, max_length=MAX_NODE_ID_CHARS)
    reason: str | None = None
    expires_at: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)  # as TaskControlInput's
