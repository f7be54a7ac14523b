"""Waiting for a turn's outcome: the store (or, for a client without one, the ``turn`` query),
then the ``wait_turn`` update as a long-poll."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._patience import Patience, is_unprocessed_update
from agentrt.client._queries import query_workflow
from agentrt.client._start_failures import start_failure
from agentrt.schemas import (
    AssistantMessageCompleted,
    RequestRejected,
    SessionBusy,
    SessionNotFound,
    TurnEnded,
    TurnOutcome,
    WaitTurnInput,
)
from agentrt.store import Store
from agentrt.client._session_handlers import FORGOTTEN_TURN, SessionHandlers

logger = logging.getLogger(__name__)

# The longest one ``wait_turn`` call waits for an answer (seconds) before it asks again, with
# the same update id: it finds the same update, so no second one waits in the session.
WAIT_SLICE_SECONDS = 60.0
# How long ``wait`` pauses when the session answered ``ask_again`` (it continues as new) (seconds).
ASK_AGAIN_SECONDS = 0.05
# The longest a ``turn`` query may take (seconds): without a worker the server holds a query
# until its RPC deadline, so a wait bounded by its caller must bound its queries too.
QUERY_SECONDS = 10.0
# The least time a query is given, also when the caller's deadline has just passed (seconds).
MIN_QUERY_SECONDS = 1.0


async def wait_for_turn(
    handle: WorkflowHandle, store: Store | None, session_id: str, turn_id: str, timeout_seconds: float | None
) -> TurnOutcome:
    """The turn's outcome, or ``pending`` once ``timeout_seconds`` (>= 0, None: no bound) passed.

    First the store, when there is one (a turn that has ended is there before its outcome is
    published, and reading it costs the worker nothing), else the ``turn`` query; then the
    ``wait_turn`` update (no timeout of its own) for the time left, ``WAIT_SLICE_SECONDS`` per
    call, asked again when it answers ``ask_again`` (the session continued as new), when a
    call's time ends, or when no worker or server answered (with backoff: ``Patience``, which
    also warns once a minute while the session's workflow task fails). Raises
    ``RequestRejected`` for an unknown turn or a session whose workflow ended before the turn
    did (terminated, timed out), ``SessionNotFound``; ``asyncio.CancelledError`` when cancelled.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout_seconds is None else loop.time() + timeout_seconds
    patience = Patience(session_id, f"turn {turn_id}", timeout_seconds)
    forgotten = False
    # The update waits without a timer of its own: an update that ends by its timer in the same
    # workflow task as a step of the turn has been seen to replay in another order after a
    # worker crash. Its RPC is bounded instead; an update still waiting when the caller's
    # deadline passes answers when the turn ends. One update id per turn: every wait for the
    # turn (any caller, any retry) finds the same update in the run, so no waits pile up.
    update_id = f"wait-{turn_id}"
    while True:
        outcome = await _known_outcome(handle, store, session_id, turn_id, query_seconds=_query_bound(deadline, loop))
        if outcome is not None:
            return outcome
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            if store is not None:
                # Not in the store: the workflow says whether the turn is known (and may have just ended).
                outcome = await _query_turn(handle, store, session_id, turn_id, MIN_QUERY_SECONDS)
            return outcome or TurnOutcome(turn_id=turn_id, status="pending")
        bound = WAIT_SLICE_SECONDS if remaining is None else min(remaining, WAIT_SLICE_SECONDS)
        try:
            waiting = handle.execute_update(
                SessionHandlers.wait_turn, WaitTurnInput(turn_id=turn_id), id=update_id,
                rpc_timeout=timedelta(seconds=bound),
            )
            outcome = await patience.watched(waiting, handle)
        except WorkflowUpdateFailedError as err:
            if is_unprocessed_update(err):  # the session never saw this wait: ask again
                await patience.pause(err)
                continue
            if FORGOTTEN_TURN in update_failure_cause(err) and store is not None and not forgotten:
                forgotten = True
                continue  # the store may have it meanwhile
            typed = await start_failure(handle)  # the session failed at its start while the update waited
            if typed is not None:
                raise typed from err
            raise RequestRejected(session_id, "wait_turn", update_failure_cause(err)) from err
        except WorkflowUpdateRPCTimeoutOrCancelledError as err:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError() from err  # the caller cancelled the wait
            continue  # no answer within the slice: ask again (the same update), within the deadline
        except RPCError as err:
            ended = await _ended_status(handle)
            if ended == "gone":
                raise SessionNotFound(session_id) from err
            if ended is not None:
                outcome = await _known_outcome(
                    handle, store, session_id, turn_id, ask_workflow=True, query_seconds=_query_bound(deadline, loop)
                )
                if outcome is not None:
                    return outcome
                typed = await start_failure(handle) if ended == "failed" else None
                if typed is not None:
                    raise typed from err
                raise RequestRejected(
                    session_id, "wait_turn", f"the session ended ({ended}) before turn {turn_id} ended"
                ) from err
            # Continued as new meanwhile, or no server answers: ask again (not past the deadline).
            await patience.pause(err)
            continue
        patience.answered()
        if outcome.status != "pending":
            return outcome
        if deadline is not None and loop.time() >= deadline:
            return outcome  # pending at the deadline
        # pending before the deadline: the session is about to continue as new (ask_again); the
        # same update id answers the same in this run, so ask the next run in a moment.
        await asyncio.sleep(ASK_AGAIN_SECONDS)


def _query_bound(deadline: float | None, loop: asyncio.AbstractEventLoop) -> float:
    """Seconds a query may take: ``QUERY_SECONDS``, less when the caller's deadline is nearer,
    never under ``MIN_QUERY_SECONDS``."""
    if deadline is None:
        return QUERY_SECONDS
    return max(MIN_QUERY_SECONDS, min(QUERY_SECONDS, deadline - loop.time()))


async def _known_outcome(
    handle: WorkflowHandle,
    store: Store | None,
    session_id: str,
    turn_id: str,
    *,
    ask_workflow: bool = False,
    query_seconds: float = QUERY_SECONDS,
) -> TurnOutcome | None:
    """The turn's outcome if it has ended: from the store when there is one (then the ``turn``
    query only when ``ask_workflow``), else from the query (at most ``query_seconds``). None
    while it runs."""
    if store is not None:
        try:
            outcome = await asyncio.to_thread(outcome_from_store, store, session_id, turn_id)
        except Exception as err:  # noqa: BLE001 - the store only spares the worker a query: ask it instead
            logger.warning("could not read turn %s of session %s from the store, asking the session: %s", turn_id, session_id, err)
        else:
            if outcome is not None or not ask_workflow:
                return outcome
    return await _query_turn(handle, store, session_id, turn_id, query_seconds)


async def _query_turn(
    handle: WorkflowHandle, store: Store | None, session_id: str, turn_id: str, seconds: float = QUERY_SECONDS
) -> TurnOutcome | None:
    """The ``turn`` query's answer (None while pending or while no worker answers it within ``seconds``)."""
    try:
        return await query_workflow(handle, SessionHandlers.turn, turn_id, rpc_timeout=timedelta(seconds=seconds))
    except WorkflowQueryFailedError as err:
        if FORGOTTEN_TURN in str(err) and store is not None:
            remembered = await asyncio.to_thread(outcome_from_store, store, session_id, turn_id)
            if remembered is not None:
                return remembered
        raise RequestRejected(session_id, "wait_turn", str(err)) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise SessionNotFound(session_id) from err
        return None  # no worker right now (restarting): keep waiting


async def _ended_status(handle: WorkflowHandle) -> str | None:
    """``gone`` when no such workflow exists, the closed run's status (``completed``,
    ``terminated``, ...) when the session's workflow has ended, None while it runs or when
    the server does not answer."""
    try:
        description = await handle.describe()
    except RPCError as err:
        return "gone" if err.status == RPCStatusCode.NOT_FOUND else None
    if description.close_time is None or description.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
        return None
    return description.status.name.lower() if description.status else "closed"


def outcome_from_store(store: Store, session_id: str, turn_id: str) -> TurnOutcome | None:
    """A finished turn's outcome rebuilt from its events in the store (for turns of earlier runs)."""
    answer: str | None = None
    tool_calls = 0
    for event in store.turn_events(session_id, turn_id):
        if isinstance(event, AssistantMessageCompleted):
            answer = event.text
            tool_calls += event.tool_calls
        elif isinstance(event, TurnEnded):
            return TurnOutcome(
                turn_id=turn_id,
                status=event.status,
                answer=answer if event.status in ("completed", "output_invalid") else None,
                error=event.error,
                error_type=event.error_type,
                rounds=event.rounds,
                tool_calls=tool_calls,  # every call its replies asked for, as the session reports it
                usage=event.usage,
                output=event.output,
            )
    return None


def update_rejection(session_id: str, request: str, err: WorkflowUpdateFailedError) -> RequestRejected:
    """The session's refusal of update ``request`` as its most specific error: ``SessionBusy`` (its
    ``busy`` and ``turn_id`` from the failure's details) for a send-only-if-idle message, else
    ``RequestRejected``; the reason is ``update_failure_cause``'s."""
    reason = update_failure_cause(err)
    cause = err.cause
    while cause is not None and not (isinstance(cause, ApplicationError) and cause.type == "SessionBusy"):
        cause = cause.cause if isinstance(cause, FailureError) else None
    if cause is None:
        return RequestRejected(session_id, request, reason)
    details = cause.details[0] if cause.details and isinstance(cause.details[0], dict) else {}
    busy, turn_id = details.get("busy"), details.get("turn_id")
    return SessionBusy(
        session_id, request, reason, busy=busy if isinstance(busy, str) else "turn",
        turn_id=turn_id if isinstance(turn_id, str) else None,
    )


def update_failure_type(err: WorkflowUpdateFailedError) -> str | None:
    """The type of the innermost ``ApplicationError`` of a failed update (``RequestRejected``,
    ``RequestExpired`` ...), or None."""
    found, cause = None, err.cause
    while cause is not None:
        if isinstance(cause, ApplicationError):
            found = cause.type
        cause = cause.cause if isinstance(cause, FailureError) else None
    return found


def update_failure_cause(err: WorkflowUpdateFailedError) -> str:
    """The innermost message of a failed update (the validator's reason)."""
    cause = err.cause
    while getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[union-attr]
    return getattr(cause, "message", None) or str(cause)
