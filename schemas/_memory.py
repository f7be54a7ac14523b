"""Memory that outlives a session: records, the owner's decisions on proposals, activity inputs.

Memories belong to one owner (the session owner who wrote them) and have a scope: ``session``
(seen by the session that wrote it), ``workspace`` (by the owner's sessions on the same
workspace) or ``user`` (by all the owner's sessions). A ``session`` write is usable at once;
a ``workspace`` or ``user`` write is a proposal until the owner accepts it. Only accepted
memories reach a model's context, quoted as data (``agentrt.activities`` renders them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from agentrt.schemas._base import Model
from agentrt.schemas._events import Event

__all__ = [
    "MAX_DEAD_MEMORIES_PER_OWNER",
    "MAX_MEMORIES_PER_OWNER",
    "MAX_MEMORY_TEXT_CHARS",
    "MAX_PENDING_PROPOSALS_PER_SESSION",
    "MAX_SESSION_MEMORIES_PER_SESSION",
    "MEMORY_KEY_PATTERN",
    "MemoryDecideInput",
    "MemoryDecision",
    "MemoryNote",
    "MemoryProposal",
    "MemoryRecord",
    "MemoryScope",
    "MemoryStatus",
]

MemoryScope = Literal["session", "workspace", "user"]
MemoryStatus = Literal["proposed", "accepted", "rejected", "superseded"]

# Bounds on what a model may store (characters): a key names a memory, the text is its content.
MEMORY_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"
MAX_MEMORY_TEXT_CHARS = 4_000
# Live (proposed or accepted) memories one owner may have, and proposals one session may leave
# waiting: a model that writes in a loop meets a tool error, not an unbounded store.
MAX_MEMORIES_PER_OWNER = 1_000
MAX_PENDING_PROPOSALS_PER_SESSION = 50
# Live ``session``-scope memories one session may hold (so one session cannot use up its owner's).
MAX_SESSION_MEMORIES_PER_SESSION = 200
# Superseded and rejected memories kept per owner; past it the oldest of them are deleted.
MAX_DEAD_MEMORIES_PER_OWNER = 1_000


class MemoryRecord(Model):
    """One memory as the store keeps it.

    ``workspace`` is the workspace of a ``workspace``-scope memory (else the writing session's);
    ``session_id`` the session that wrote it; ``status`` ``proposed``, ``accepted``,
    ``rejected`` or ``superseded`` (an accepted memory replaced by a later accepted one of the
    same owner, scope and key).
    """

    memory_id: str
    owner: str
    scope: MemoryScope
    key: str
    text: str
    status: MemoryStatus
    session_id: str
    workspace: str
    created_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None
    reason: str | None = None


class MemoryNote(Model):
    """What a ``memory.write`` result tells the workflow: the memory it wrote and whether that
    is ``accepted`` (session scope) or ``proposed`` (waits for the owner); or ``dropped``: a
    status note at workspace scope, not stored (``reason`` says which phrasing made it one)."""

    memory_id: str
    scope: MemoryScope
    key: str
    status: Literal["proposed", "accepted", "dropped"]
    preview: str = ""
    reason: str | None = Field(default=None, exclude_if=lambda v: v is None)


class MemoryProposal(Model):
    """A proposal the session waits on the owner for (``SessionState.memory_proposals``)."""

    memory_id: str
    scope: MemoryScope
    key: str
    turn_id: str
    call_id: str


class MemoryDecision(Model):
    """Update ``decide_memory`` (and ``AgentClient.decide_memory``): the owner accepts or rejects
    a proposed memory. Only the session's owner may; ``reason`` is recorded with it."""

    memory_id: str
    decision: Literal["accept", "reject"]
    principal: str
    reason: str | None = None


class MemoryDecideInput(Model):
    """Activity ``memory.decide``: record ``decision`` on the memory in the store (accepting one
    supersedes the owner's earlier accepted memory of the same scope and key) with ``events``
    (the decision's event, written idempotently by seq)."""

    session_id: str
    memory_id: str
    decision: Literal["accept", "reject"]
    principal: str
    reason: str | None = None
    events: list[Event] = Field(default_factory=list)
