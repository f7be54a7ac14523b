"""Patience for a wait that gets no answer: which Temporal failures mean "ask again" (the server
restarting, an RPC cut, cancelled or timed out), a bounded backoff between asks that never
sleeps past the caller's deadline, and a warning naming the session at most once a minute while
the wait gets nowhere (the server does not answer, the session's workflow task keeps failing or
no worker takes it), so that no wait hangs silently."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

from temporalio.api.enums.v1 import PendingWorkflowTaskState
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.schemas import ServerUnavailable

logger = logging.getLogger("agentrt.client")
T = TypeVar("T")

# The first pause before asking again after a failed RPC (seconds); each next one doubles, up to
# RETRY_MAX_SECONDS, until the server answers again.
RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 5.0
# The least time between two warnings of one wait (seconds).
WARN_EVERY_SECONDS = 60.0
# A workflow task scheduled this long ago (seconds) and not started: no worker takes it.
UNSTARTED_TASK_SECONDS = 30.0
# What the server answers while it restarts or when an RPC was cut (the Temporal client retries
# most of them itself for a few seconds first): asking again is safe.
TRANSIENT_STATUSES = frozenset({
    RPCStatusCode.UNAVAILABLE, RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.ABORTED,
    RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.UNKNOWN, RPCStatusCode.INTERNAL,
})


def is_transient(err: BaseException) -> bool:
    """True for an RPC failure that asking again may cure (``TRANSIENT_STATUSES``)."""
    return isinstance(err, RPCError) and (err.status in TRANSIENT_STATUSES or "operation was canceled" in err.message)


# The failure type the server rejects an update with when a worker completed the workflow task
# that carried it without accepting or rejecting it (temporalio/temporal, service/history/workflow/
# update: "Workflow Update is rejected because it wasn't processed by worker"). The workflow never
# saw the update, so asking again under the same update id is safe.
UNPROCESSED_UPDATE = "UnprocessedUpdate"


def is_unprocessed_update(err: BaseException | None) -> bool:
    """True for an update the server rejected because no worker processed it (``UNPROCESSED_UPDATE``)."""
    cause = err.cause if isinstance(err, WorkflowUpdateFailedError) else None
    return isinstance(cause, ApplicationError) and cause.type == UNPROCESSED_UPDATE


# The failure detail of an update the server aborted before the workflow took it, because the
# workflow task carrying it failed while being completed (a persistence timeout under load, a
# completion the server refused): temporalio/temporal#7296 (1.27+) answers FAILED_PRECONDITION
# "Unable to perform workflow execution update due to unexpected workflow task failure" with this.
WORKFLOW_NOT_READY = "temporal.api.errordetails.v1.WorkflowNotReadyFailure"


def is_aborted_update(err: BaseException | None) -> bool:
    """True for an update the server aborted before the workflow took it (``WORKFLOW_NOT_READY``):
    the workflow never saw it, so sending it again under the same update id is safe."""
    if not isinstance(err, RPCError) or err.status != RPCStatusCode.FAILED_PRECONDITION or is_refused_while_failing(err):
        return False  # a task that keeps failing refuses updates: that is said, not asked again
    status = err.grpc_status
    return any(detail.type_url.endswith(WORKFLOW_NOT_READY) for detail in status.details) if status else False


def is_refused_while_failing(err: BaseException | None) -> bool:
    """True for the server's refusal of an update while the workflow's task keeps failing (it takes
    updates again once a worker runs the task)."""
    return (
        isinstance(err, RPCError) and err.status == RPCStatusCode.FAILED_PRECONDITION
        and "workflow task in failed state" in err.message.lower()
    )


class Patience:
    """One wait's asking again, for ``what`` (``turn turn-3``) of ``session_id``, for at most
    ``timeout_seconds`` (None: no bound): ``pause`` after a failed RPC, ``watched`` around a long
    poll, ``retried`` around a call; each warns at most once per ``WARN_EVERY_SECONDS``."""

    def __init__(self, session_id: str, what: str, timeout_seconds: float | None = None) -> None:
        self.session_id = session_id
        self.what = what
        self._loop = asyncio.get_running_loop()
        self._started = self._last_warning = self._loop.time()
        self.deadline = None if timeout_seconds is None else self._started + timeout_seconds
        self._delay = RETRY_FIRST_SECONDS

    def remaining(self) -> float | None:
        """Seconds to the deadline (<= 0 once it passed), None without one."""
        return None if self.deadline is None else self.deadline - self._loop.time()

    def spent(self) -> bool:
        """Whether the deadline has passed (never without one)."""
        remaining = self.remaining()
        return remaining is not None and remaining <= 0

    def warn(self, reason: str) -> None:
        """Log ``reason`` as a warning naming the session, unless one was logged less than
        ``WARN_EVERY_SECONDS`` ago (or the wait began less than that ago)."""
        now = self._loop.time()
        if now - self._last_warning < WARN_EVERY_SECONDS:
            return
        self._last_warning = now
        bound = "until its deadline" if self.deadline is not None else "(no deadline: cancel the call to stop)"
        logger.warning(
            "session %s: still waiting for %s after %.0f s: %s; the wait goes on %s",
            self.session_id, self.what, now - self._started, reason, bound,
        )

    async def pause(self, err: BaseException | None = None, reason: str | None = None) -> None:
        """Sleep before asking again (``RETRY_FIRST_SECONDS``, doubling up to ``RETRY_MAX_SECONDS``,
        never past the deadline); warns with ``reason`` (default: what ``err`` says)."""
        self.warn(reason or failure_reason(err))
        delay, self._delay = self._delay, min(self._delay * 2, RETRY_MAX_SECONDS)
        remaining = self.remaining()
        await asyncio.sleep(delay if remaining is None else max(0.0, min(delay, remaining)))

    def answered(self) -> None:
        """The server answered: the next failure pauses briefly again."""
        self._delay = RETRY_FIRST_SECONDS

    async def retried(self, call: Callable[[], Awaitable[T]], address: str) -> T:
        """``call()``, asked again while it fails transiently (``is_transient``); past the deadline,
        ``ServerUnavailable`` (``address``: the server's). Other errors propagate as they are."""
        while True:
            try:
                result = await call()
            except RPCError as err:
                if not is_transient(err):
                    raise
                remaining = self.remaining()
                if remaining is not None and remaining <= 0:
                    raise ServerUnavailable(address, failure_text(err)) from err
                await self.pause(err)
            else:
                self.answered()
                return result

    async def watched(self, work: Awaitable[T], handle: WorkflowHandle[Any, Any]) -> T:
        """``work`` (a long poll of the session), warning while it runs when the session is stuck:
        every ``WARN_EVERY_SECONDS`` the session's workflow task is looked at (``stuck_reason``).
        Cancelling the call cancels ``work``."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WARN_EVERY_SECONDS)
                if done:
                    return task.result()
                reason = await stuck_reason(handle)
                if reason is not None:
                    self.warn(reason)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):  # the cancelled poll's own error: the caller's cancel wins
                    await task


async def stuck_reason(handle: WorkflowHandle[Any, Any]) -> str | None:
    """Why the session cannot answer now, or None when nothing seems wrong: its workflow task
    fails again and again, or no worker has started it for ``UNSTARTED_TASK_SECONDS``, or the
    server does not answer."""
    try:
        description = await handle.describe()
    except RPCError as err:
        return f"the Temporal server does not answer ({failure_text(err)})" if is_transient(err) else None
    raw = description.raw_description
    if description.close_time is not None or not raw.HasField("pending_workflow_task"):
        return None
    task = raw.pending_workflow_task
    if task.attempt > 1:
        return (
            f"its workflow task keeps failing (attempt {task.attempt}); the worker's log or the Temporal UI "
            "says why, and the session goes on once a worker can run it"
        )
    scheduled = task.scheduled_time.ToDatetime(tzinfo=timezone.utc)
    unstarted = task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
    if unstarted and (datetime.now(timezone.utc) - scheduled).total_seconds() >= UNSTARTED_TASK_SECONDS:
        return "no worker has taken its workflow task (is a worker running for its task queue?)"
    return None


def failure_reason(err: BaseException | None) -> str:
    """What a failure that is asked again after says about the wait (for its warning)."""
    if is_unprocessed_update(err):
        return "the worker that took the update's workflow task did not process it; it is asked again"
    if is_refused_while_failing(err):
        return f"its workflow task keeps failing, so the server refuses updates ({failure_text(err)})"
    if is_aborted_update(err):
        return "the workflow task that carried it failed before the workflow saw it; it is sent again"
    return f"the Temporal server does not answer ({failure_text(err)})"


def failure_text(err: BaseException | None) -> str:
    """``UNAVAILABLE: tcp connect error`` for an RPC failure, else the error's type and text."""
    if isinstance(err, RPCError):
        return f"{err.status.name}: {err.message}"
    return f"{type(err).__name__}: {err}" if err is not None else "no answer"
