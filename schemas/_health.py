"""A workflow whose workflow task keeps failing cannot say so itself: what a check from outside reports of it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from agentrt.schemas._base import Model

__all__ = [
    "ActivityWait",
    "ActivityWaitKind",
    "STORE_UNAVAILABLE",
    "StuckCause",
    "StuckWorkflow",
]

# The type of the retryable ``ApplicationError`` an activity attempt raises after it waited out a
# store that did not answer, and the word that opens the heartbeat it sends while it waits.
STORE_UNAVAILABLE = "StoreUnavailable"

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


# What a running activity waits for: ``store_unavailable`` (its attempt met a store that does not
# answer and waits, heartbeating, until it does), ``retrying`` (an earlier attempt failed; the
# message is that failure's).
ActivityWaitKind = Literal["store_unavailable", "retrying"]


class ActivityWait(Model):
    """A pending activity of a workflow (a model call, a tool call) that is not simply running: read
    from outside, from the workflow's description (its pending activities' attempts, last failure
    and last heartbeat), so it is seen while the workflow itself cannot know.

    ``activity``: its type (``provider.complete``); ``attempt``: the attempt under way (1 is the
    first); ``maximum_attempts``: its retry policy's bound (None: unbounded). ``message``: for
    ``store_unavailable`` the store's address and why it does not answer, for ``retrying`` the last
    failure's text. ``since``: when the store wait began (None for ``retrying``). ``retry_in``:
    seconds until the next attempt, when the server says (``retrying`` only)."""

    activity: str
    activity_id: str
    kind: ActivityWaitKind
    attempt: int
    maximum_attempts: int | None = None
    message: str
    since: datetime | None = None
    retry_in: float | None = None
