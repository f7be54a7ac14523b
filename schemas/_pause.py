"""Pause and resume, the operator's kill switch: the inputs of the ``pause`` and ``resume`` updates of a
session (a task and a graph take their ``TaskControlInput`` and ``GraphControlInput``), the signal a
task or graph pauses its child sessions with, what a paused workflow carries, and the report of a
pause of everything one owner runs."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from agentrt.schemas._base import Model

__all__ = [
    "OwnerPauseReport",
    "PauseInput",
    "PauseItem",
    "PauseItemKind",
    "PauseOutcome",
    "PauseState",
    "SET_PAUSED_SIGNAL",
    "SetPausedInput",
]

# The signal a task, a graph or a delegating session pauses and resumes its running child sessions with.
SET_PAUSED_SIGNAL = "set_paused"


class PauseInput(Model):
    """Updates ``pause`` and ``resume`` of a session: by the owner, or by an operator with a ``reason``."""

    principal: str
    reason: str | None = None


class SetPausedInput(Model):
    """Signal ``set_paused`` (``SET_PAUSED_SIGNAL``): pause (``paused`` True) or resume a session as
    its parent does for its children; the same standing as the updates (the owner, or an operator
    with a ``reason``), a stranger's is ignored and counted."""

    paused: bool
    principal: str
    reason: str | None = None


class PauseState(Model):
    """Who paused a session or graph, why and since when (``workflow.now()``, UTC). It travels with
    the workflow's state through continue-as-new."""

    principal: str
    reason: str | None = None
    since: datetime


PauseItemKind = Literal["session", "task", "graph"]
PauseOutcome = Literal["paused", "resumed", "already", "refused", "gone", "failed"]


class PauseItem(Model):
    """One workflow an owner-wide pause or resume acted on: ``outcome`` ``paused`` / ``resumed`` (it
    changed now), ``already`` (it was paused already), ``refused`` (the workflow refused: ``detail``
    says why), ``gone`` (it ended meanwhile) or ``failed`` (it could not be reached: no worker or no
    server answered; ``detail``). ``id`` is the session, task or graph id."""

    kind: PauseItemKind
    id: str
    outcome: PauseOutcome
    detail: str | None = Field(default=None, exclude_if=lambda v: v is None)


class OwnerPauseReport(Model):
    """What ``AgentClient.pause_owner`` / ``resume_owner`` did to every running session, task and graph
    of ``owner`` (sessions a task, graph or session started are paused by their parent, so they are
    not listed)."""

    owner: str
    action: Literal["pause", "resume"]
    items: list[PauseItem] = Field(default_factory=list)

    def count(self, outcome: PauseOutcome, kind: PauseItemKind | None = None) -> int:
        """How many items had ``outcome`` (of ``kind`` when given)."""
        return sum(1 for i in self.items if i.outcome == outcome and (kind is None or i.kind == kind))
