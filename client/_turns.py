"""Waiting for a turn's outcome: the ``turn`` query, the ``wait_turn`` update as a long-poll,
and the store for turns an earlier run of the session has forgotten."""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.schemas import (
    AssistantMessageCompleted,
    RequestRejected,
    SessionNotFound,
    TurnEnded,
    TurnOutcome,
    WaitTurnInput,
)
from agentrt.store import Store
from agentrt.workflows.session import FORGOTTEN_TURN, MAX_WAIT_TURN_SECONDS, SessionWorkflow

# How long ``wait`` pauses before asking again while no worker or server answers (seconds).
WAIT_RETRY_SECONDS = 1.0


async def wait_for_turn(
    handle: WorkflowHandle, store: Store | None, session_id: str, turn_id: str, timeout_seconds: float | None
) -> TurnOutcome:
    """The turn's outcome, or ``pending`` once ``timeout_seconds`` (>= 0, None: no bound) passed.

    The ``turn`` query first; then the ``wait_turn`` update with the time left, asked again
    when it answers ``ask_again`` (the session continued as new) or when no worker or server
    answered it. Raises ``RequestRejected`` for an unknown turn, ``SessionNotFound``.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout_seconds is None else loop.time() + timeout_seconds
    while True:
        outcome = await _query_turn(handle, store, session_id, turn_id)
        if outcome is not None:
            return outcome
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            return TurnOutcome(turn_id=turn_id, status="pending")
        bound = None if remaining is None else min(remaining, MAX_WAIT_TURN_SECONDS)
        try:
            outcome = await handle.execute_update(
                SessionWorkflow.wait_turn, WaitTurnInput(turn_id=turn_id, timeout_seconds=bound)
            )
        except WorkflowUpdateFailedError as err:
            if FORGOTTEN_TURN in update_failure_cause(err):
                continue  # the query answers from the store
            raise RequestRejected(session_id, "wait_turn", update_failure_cause(err)) from err
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and await _is_gone(handle):
                raise SessionNotFound(session_id) from err
            # The session ended or continued as new meanwhile, or no worker or server answers: ask again.
            await asyncio.sleep(WAIT_RETRY_SECONDS if remaining is None else min(WAIT_RETRY_SECONDS, remaining))
            continue
        if outcome.status != "pending" or not outcome.ask_again:
            return outcome  # an outcome, or pending at the deadline


async def _query_turn(handle: WorkflowHandle, store: Store | None, session_id: str, turn_id: str) -> TurnOutcome | None:
    """The ``turn`` query's answer (None while pending or while no worker answers queries)."""
    try:
        return await handle.query(SessionWorkflow.turn, turn_id)
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


async def _is_gone(handle: WorkflowHandle) -> bool:
    try:
        await handle.describe()
    except RPCError as err:
        return err.status == RPCStatusCode.NOT_FOUND
    return False


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
                answer=answer if event.status == "completed" else None,
                error=event.error,
                rounds=event.rounds,
                tool_calls=tool_calls,
                usage=event.usage,
            )
    return None


def update_failure_cause(err: WorkflowUpdateFailedError) -> str:
    """The innermost message of a failed update (the validator's reason)."""
    cause = err.cause
    while getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[union-attr]
    return getattr(cause, "message", None) or str(cause)
