"""A message's outcome (``send_and_wait``, ``start_and_wait``) through worker kills, server
restarts and lost updates: the update asked for again while the server does not answer, found
by its id when its RPC ended without an answer (in the run it went to, or in an earlier run of
the session after a continue-as-new), and sent again when the server lost it, if the message
has an idempotency key (the session then answers for the first one, so it cannot queue twice).

A caller gets the outcome or a typed error: ``SessionNotFound``, ``RequestRejected`` when the
session refused the message or has ended, or when the server lost a message without a key
before the session accepted it (nothing was queued: send it again), never a raw RPC error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._patience import (
    Patience,
    failure_text,
    is_aborted_update,
    is_refused_while_failing,
    is_transient,
    is_unprocessed_update,
)
from agentrt.client._start_failures import start_failure
from agentrt.client._starts import raise_if_cancelled
from agentrt.client._turns import update_rejection
from agentrt.schemas import RequestRejected, SessionNotFound, TurnOutcome, session_workflow_id

# Runs of a session (the current one and those before it) searched for an update the current
# run does not have, at most; only runs that started after the call began can have it.
MAX_RUNS_SEARCHED = 50
# Allowance for the client's clock and the server's disagreeing (seconds) when telling which runs
# started after a call began (a run too many is searched, never one too few).
CLOCK_SKEW_SECONDS = 300.0
LOST_MESSAGE = (
    "the Temporal server lost the message before the session accepted it (a server restart or a failed "
    "workflow task): nothing was queued; send it again (with an idempotency_key a repeat can never queue twice)"
)
REFUSED_MESSAGE = (
    "the session's workflow task keeps failing, so the Temporal server refused the message: nothing was "
    "queued; send it again once a worker runs the session (with an idempotency_key the client sends it again "
    "itself until then)"
)

# What a send answers: the outcome, or a handle on the update (tied to the run it went to).
Sent = TurnOutcome | WorkflowUpdateHandle[Any]


def ended_error(session_id: str, request: str, description: WorkflowExecutionDescription) -> RequestRejected:
    """The error for ``request`` to a session whose workflow has closed (``description``)."""
    status = description.status.name.lower() if description.status else "closed"
    if status == "completed":  # a session's workflow completes only when it is archived
        return RequestRejected(session_id, request, "the session is archived (its workflow completed)")
    return RequestRejected(session_id, request, f"the session has ended (its workflow {status})")


def has_ended(description: WorkflowExecutionDescription) -> bool:
    return description.close_time is not None and description.status != WorkflowExecutionStatus.CONTINUED_AS_NEW


async def message_outcome(
    temporal: Client, session_id: str, update_id: str, send: Callable[[], Awaitable[Sent]], *, keyed: bool,
    starts: bool = False,
) -> TurnOutcome:
    """The outcome of the ``send_and_wait`` update ``update_id`` that ``send`` sends (an update,
    or an update-with-start when ``starts``; ``keyed``: its message has an idempotency key).

    While the server does not answer, asks again with backoff (warning once a minute); when an
    RPC ends without an answer, asks for the update by its id; when the current run does not
    have it, looks in the runs before it that started after the call began; when none has it,
    sends it again if ``keyed`` (or when ``starts`` and no session exists: nothing was started,
    so nothing was queued). Waits without a bound; cancelling the call stops the wait.

    Raises ``RequestRejected`` (refused by the session, the session ended, a keyless message
    lost before the session accepted it: ``LOST_MESSAGE``), ``SessionNotFound``,
    ``asyncio.CancelledError``; each with the server's error as its cause.
    """
    return await _Delivery(temporal, session_id, update_id, send, keyed, starts).outcome()


async def update_result(temporal: Client, session_id: str, update_id: str) -> TurnOutcome:
    """The outcome of the ``send_and_wait`` update ``update_id``, sent before (by this process or
    another), as ``message_outcome`` finds it; one the server no longer has is ``RequestRejected``
    (``LOST_MESSAGE``: there is no message here to send again)."""

    async def nothing_to_send() -> Sent:
        raise AssertionError("update_result never sends")

    delivery = _Delivery(temporal, session_id, update_id, nothing_to_send, keyed=False, starts=False)
    delivery.sending = False
    return await delivery.outcome()


class _Delivery:
    """One message on its way to its outcome (see ``message_outcome``)."""

    def __init__(
        self, temporal: Client, session_id: str, update_id: str, send: Callable[[], Awaitable[Sent]],
        keyed: bool, starts: bool,
    ) -> None:
        self.temporal, self.session_id, self.update_id, self.send = temporal, session_id, update_id, send
        self.keyed, self.starts = keyed, starts
        self.handle = temporal.get_workflow_handle(session_workflow_id(session_id))
        self.patience = Patience(session_id, f"the outcome of message {update_id}")
        self.since = datetime.now(timezone.utc) - timedelta(seconds=CLOCK_SKEW_SECONDS)
        self.sending = True  # the next attempt sends (the first one, or again after a loss)
        self.update: WorkflowUpdateHandle[Any] | None = None  # the update as its send answered (tied to its run)
        self.missing: RPCError | None = None  # the server said it does not have the update (or the session)
        self.refused: RPCError | None = None  # the server refused the update while the session's task failed

    async def outcome(self) -> TurnOutcome:
        while True:
            try:
                return await self.patience.watched(self._attempt(), self.handle)
            except WorkflowUpdateFailedError as err:
                if is_unprocessed_update(err):  # the session never saw it: send it again, same id
                    self._send_again()
                    await self.patience.pause(err)
                    continue
                typed = await start_failure(self.handle)  # the session failed at its start (an unknown agent, say)
                if typed is not None:
                    raise typed from err
                raise update_rejection(self.session_id, "send_and_wait", err) from err
            except WorkflowUpdateRPCTimeoutOrCancelledError as err:
                raise_if_cancelled(err)  # otherwise the RPC was cut (timed out, or cancelled by the server)
                await self.patience.pause(err, "the Temporal server cut the RPC (a restart?)")
            except RPCError as err:
                if is_transient(err):
                    await self.patience.pause(err)
                elif err.status == RPCStatusCode.NOT_FOUND:
                    self.missing, self.update = err, None
                    await self.patience.pause(err, "the Temporal server does not have the update")
                elif is_aborted_update(err) and not is_refused_while_failing(err):  # never seen: send again, same id
                    self._send_again()
                    await self.patience.pause(err)
                elif is_refused_while_failing(err):
                    # Not taken now; one sent before may still be: ask for it by id (then send again if keyed).
                    self.refused, self.update = err, None
                    await self.patience.pause(err)
                else:
                    raise RequestRejected(
                        self.session_id, "send_and_wait", f"the Temporal server refused it ({failure_text(err)})"
                    ) from err

    async def _attempt(self) -> TurnOutcome:
        """One try: look for a missing update, else send (first, or again), else ask for the update."""
        if self.missing is not None:
            found = await self._find_missing(self.missing)
            if found is not None:
                return found
        if self.sending:
            self.sending = False  # from here on the update may be in the session: ask for it by id
            sent = await self.send()
            if isinstance(sent, TurnOutcome):
                return sent
            self.update = sent
        update = self.update or self.handle.get_update_handle(self.update_id, result_type=TurnOutcome)
        outcome = await update.result()
        self.patience.answered()
        return outcome

    async def _find_missing(self, cause: RPCError) -> TurnOutcome | None:
        """The update's outcome from a run that has it; else (None) it is to be sent again; else a
        typed error with ``cause``."""
        try:
            description = await self.handle.describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            if not self.starts:
                raise SessionNotFound(self.session_id) from cause
            self._send_again()  # no session: the start was lost with its message
            return None
        found = await self._in_runs(description)
        if found is not None:
            return found
        if has_ended(description):
            raise ended_error(self.session_id, "send_and_wait", description) from cause
        if not self.keyed:
            if self.refused is not None:
                raise RequestRejected(self.session_id, "send_and_wait", REFUSED_MESSAGE) from self.refused
            raise RequestRejected(self.session_id, "send_and_wait", LOST_MESSAGE) from cause
        self._send_again()
        return None

    def _send_again(self) -> None:
        self.sending, self.missing, self.update = True, None, None

    async def _in_runs(self, description: WorkflowExecutionDescription) -> TurnOutcome | None:
        """The update's outcome from the current run or one before it that started after the call
        began (at most ``MAX_RUNS_SEARCHED``), or None when none of them has it."""
        run_id = description.run_id
        for _ in range(MAX_RUNS_SEARCHED):
            if not run_id:
                return None
            update = self.temporal.get_workflow_handle(self.handle.id, run_id=run_id).get_update_handle(
                self.update_id, workflow_run_id=run_id, result_type=TurnOutcome
            )
            try:
                return await update.result()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
            started = await self._started_event(run_id)
            if started is None or started.event_time.ToDatetime(tzinfo=timezone.utc) < self.since:
                return None  # this run began before the call: no earlier one can have its update
            run_id = started.workflow_execution_started_event_attributes.continued_execution_run_id
        return None

    async def _started_event(self, run_id: str) -> HistoryEvent | None:
        """The first event of run ``run_id`` (its start: when, and the run it continued), or None
        when the server no longer has the run."""
        request = GetWorkflowExecutionHistoryRequest(
            namespace=self.temporal.namespace,
            execution=WorkflowExecution(workflow_id=self.handle.id, run_id=run_id),
            maximum_page_size=1,
        )
        try:
            response = await self.temporal.workflow_service.get_workflow_execution_history(request, retry=True)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return response.history.events[0] if response.history.events else None
