"""Child sessions: how a task, a graph and a delegating session start a ``SessionWorkflow`` as a
child, wait for its end and learn its spend.

``ChildSessions`` holds the one option set: the workflow task timeout, ``REJECT_DUPLICATE`` (an
ended session is not restarted under its id, as client starts are not: client/_starts.py), the
parent close policy and the search attributes a child starts with (owner, status ``idle`` and,
under ``console-v1``, its kind and profile). ``wait`` turns however the child ended into a
``ChildEnd``: its turn's status, answer, error and spend.

A cancelled workflow returns no result, so a child session that ends cancelled first signals
its spend to its parent (``report_cancelled``, signal ``child_spend``; sessions recorded since
``child-spend-v1``): each parent workflow hands the signal to ``ChildSessions.record``, and
``wait`` gives that spend as the cancelled child's. A failed child's spend stays unknown.
Workflow code only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, ChildWorkflowError, FailureError

from agentrt.schemas import (
    CHILD_SPEND_SIGNAL,
    SET_PAUSED_SIGNAL,
    SESSION_OWNER,
    SESSION_STATUS,
    SESSION_WORKFLOW,
    BudgetCrossing,
    ChildSpendReport,
    SessionConfig,
    SessionInput,
    SessionResult,
    SetPausedInput,
    Spend,
    session_workflow_id,
)
from agentrt.workflows import _console as console
from agentrt.workflows._errors import error_text

# A child session's workflow task timeout, as client-started sessions have (client/_starts.py).
CHILD_WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)
# frame-v1: task and graph children start with parent close policy REQUEST_CANCEL (a task or a
# graph that fails or is terminated asks its sessions to end, as a delegating session does);
# before it, Temporal's default (TERMINATE). A graph also writes its events to the store
# (graph.record). Asked once, in the run's first workflow task.
FRAME_PATCH = "frame-v1"


@dataclass(frozen=True)
class ChildEnd:
    """How a child session ended: its turn's ``status`` (``completed``, ``failed``, ``cancelled``,
    ``round_limit``, ``budget_exceeded``), ``answer``, ``error`` and the ``spend`` its result
    reported (a cancelled child's: what it signalled as it ended, ``ChildSpendReport``; nothing
    for one that failed or did not report);
    ``cancelled``: its workflow was cancelled (it ended Canceled, not with a turn's outcome);
    ``error_type`` and ``crossing``: its turn's (a model call refused before it was sent, by its
    budget or its tenant's quota, has a ``crossing``)."""

    status: str
    answer: str | None
    error: str | None
    spend: Spend
    cancelled: bool = False
    error_type: str | None = None
    crossing: BudgetCrossing | None = None


def child_end(
    result: SessionResult | None, error: str | None, cancelled: bool, reported: Spend | None = None
) -> ChildEnd:
    """How a child ended, from its workflow's ``result`` (None when it failed or was cancelled),
    the ``error`` of its failure, whether it was ``cancelled`` and the spend it ``reported`` as
    it ended without a result."""
    if result is None:
        status = "cancelled" if cancelled else "failed"
        return ChildEnd(status, None, error or ("cancelled" if cancelled else None), reported or Spend(), cancelled)
    spend = result.spend or Spend(usage=result.usage)
    if result.outcome is None:
        return ChildEnd("failed", None, "the session ended without a turn", spend)
    outcome = result.outcome
    return ChildEnd(outcome.status, outcome.answer, outcome.error, spend, error_type=outcome.error_type, crossing=outcome.crossing)


def plausible(spend: Spend) -> bool:
    """Whether every number of ``spend`` is finite and not negative (NaN fails every comparison)."""
    numbers = [spend.cost_usd, spend.tool_calls, spend.wall_seconds, *spend.usage.model_dump().values()]
    return all(isinstance(n, int | float) and 0 <= n < float("inf") for n in numbers)


class ChildSessions:
    """Starts child sessions with one option set and waits for them; ``running``: the handles of
    those not yet awaited to their end, by session id. The parent workflow hands each
    ``child_spend`` signal to ``record``.

    ``parent_close``: what Temporal does to a running child when this workflow closes;
    ``console``: the children start with their kind and profile (``console-v1``);
    ``task_timeout``: the children's workflow task timeout.
    """

    def __init__(
        self,
        owner: str,
        *,
        parent_close: workflow.ParentClosePolicy,
        console: bool,
        task_timeout: timedelta = CHILD_WORKFLOW_TASK_TIMEOUT,
    ) -> None:
        self.owner = owner
        self.parent_close = parent_close
        self.console = console
        self.task_timeout = task_timeout
        self.running: dict[str, workflow.ChildWorkflowHandle] = {}
        self._reported: dict[str, Spend] = {}  # what running children reported as they ended cancelled
        # Set by a parent that pauses: the pause a child started meanwhile is told at once (``set_paused``).
        self.pause_of: Callable[[], SetPausedInput | None] | None = None

    def record(self, report: ChildSpendReport) -> None:
        """Keep what a running child reported it spent (signal ``child_spend``), for ``wait``; a
        report from a workflow that is no running child of this one, or whose numbers are negative,
        NaN or infinite (any Temporal client can send the signal), is ignored."""
        if report.session_id in self.running and plausible(report.spend):
            self._reported[report.session_id] = report.spend

    async def start(self, config: SessionConfig, *, summary: str, details: str) -> workflow.ChildWorkflowHandle:
        """Start the session ``config`` as a child (``summary`` and ``details``: the Temporal UI's
        static ones). Raises ``WorkflowAlreadyStartedError`` when its workflow id is taken."""
        attributes: list[SearchAttributePair] = [
            SearchAttributePair(SESSION_OWNER, self.owner), SearchAttributePair(SESSION_STATUS, "idle")
        ]
        if self.console:
            attributes += console.child_session_attributes(config.profile)
        handle = await workflow.start_child_workflow(
            SESSION_WORKFLOW,
            SessionInput(config=config),
            id=session_workflow_id(config.session_id),
            result_type=SessionResult,
            task_timeout=self.task_timeout,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            parent_close_policy=self.parent_close,
            static_summary=summary,
            static_details=details,
            search_attributes=TypedSearchAttributes(attributes),
        )
        self.running[config.session_id] = handle
        paused = self.pause_of() if self.pause_of is not None else None
        if paused is not None:  # the parent was paused while the child started
            await self.set_paused(paused, [handle])
        return handle

    async def set_paused(self, paused: SetPausedInput, handles: list[workflow.ChildWorkflowHandle] | None = None) -> None:
        """Signal ``set_paused`` to every running child (or ``handles``) at once; one that has ended
        meanwhile is passed over."""
        targets = list(self.running.values()) if handles is None else handles
        if targets:
            await asyncio.gather(*(h.signal(SET_PAUSED_SIGNAL, paused) for h in targets), return_exceptions=True)

    async def wait(
        self, session_id: str, handle: workflow.ChildWorkflowHandle, *, cancel_when: Callable[[], bool] | None = None,
        shield: bool = False,
    ) -> ChildEnd:
        """Wait until the child has ended and say how (a cancelled child's spend: what it reported).

        ``cancel_when``: cancel the child (once) as soon as it holds. ``shield``: a cancellation of
        the waiting task cancels the child once and the wait goes on until it has ended; without
        it, that cancellation propagates (unless it reaches the final await: a cancelled end).
        """
        try:
            if shield:
                asked = False
                while not handle.done():
                    try:
                        await workflow.wait_condition(handle.done)
                    except asyncio.CancelledError:
                        if not asked:
                            handle.cancel()
                            asked = True
            elif cancel_when is not None:
                await workflow.wait_condition(lambda: handle.done() or cancel_when())
                if not handle.done():
                    handle.cancel()
            try:
                return child_end(await handle, None, False)
            except ChildWorkflowError as err:
                cancelled = isinstance(err.cause, CancelledError)
                return child_end(None, error_text(err), cancelled, self._reported.get(session_id) if cancelled else None)
            except asyncio.CancelledError:
                return child_end(None, "cancelled", True, self._reported.get(session_id))
        finally:
            self.running.pop(session_id, None)
            self._reported.pop(session_id, None)

    def cancel_all(self) -> None:
        """Ask every running child to end (no await)."""
        for handle in list(self.running.values()):
            handle.cancel()

    async def end_all(self) -> None:
        """Cancel every running child and wait until each has ended, whatever its end."""
        handles = list(self.running.values())
        for handle in handles:
            handle.cancel()
        for handle in handles:
            try:
                await handle
            except (ChildWorkflowError, asyncio.CancelledError):
                pass


async def report_cancelled(session_id: str, result: SessionResult) -> None:
    """As session ``session_id`` ends cancelled: signal ``child_spend`` with its spend (from the
    ``result`` it would have returned) to the workflow that started it as a child, and wait until
    the signal is delivered, so the parent has it before it learns the child ended. Nothing for a
    session that no workflow started; a parent that has closed meanwhile is ignored."""
    parent = workflow.info().parent
    if parent is None:
        return
    report = ChildSpendReport(session_id=session_id, spend=result.spend or Spend(usage=result.usage))
    try:
        await workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id).signal(CHILD_SPEND_SIGNAL, report)
    except FailureError:
        pass  # the parent has closed: nobody counts this spend any more
