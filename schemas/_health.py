"""A workflow whose workflow task keeps failing cannot say so itself: what a check from outside reports of it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from agentrt.schemas._base import Model

__all__ = [
    "StuckCause",
    "StuckWorkflow",
]

# Why a workflow task fails: ``nondeterminism`` (the code replaying the history issues other
# commands than those recorded, ``[TMPRL1100]``), ``bad_update_message`` (the worker answered an
# update with messages the server refused), ``timeout`` (no worker completed the task in time),
# ``failed`` (anything else the worker reported: an exception in workflow code, say).
StuckCause = Literal["nondeterminism", "bad_update_message", "timeout", "failed"]


class StuckWorkflow(Model):
    """A running session, task or graph whose current workflow task has failed or timed out
    repeatedly: its workflow never moves again until the code or a worker is fixed.

    ``kind``: ``session``, ``task`` or ``graph``; ``owner``: its ``AgentOwner`` (None when it never
    ran far enough to have one); ``session_id``: for a session. ``attempt``: the pending workflow
    task's attempt number (1 is the first try). ``failing_since``: when the first failing attempt
    was scheduled (None when the history does not say). ``message``: the failure's text exactly as
    the worker reported it (for a timeout, which timeout). ``hint``: what an operator does about it.
    """

    workflow_id: str
    run_id: str
    kind: Literal["session", "task", "graph"]
    owner: str | None = None
    session_id: str | None = None
    task_queue: str | None = None
    attempt: int
    failing_since: datetime | None = None
    cause: StuckCause
    message: str
    hint: str
