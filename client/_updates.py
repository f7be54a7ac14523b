"""A session update sent until the session answers it.

Every ask of one update carries the same update id, so Temporal applies it once however often
it is asked (within the run; ids are remembered per workflow run). While the server restarts
(a transient RPC failure), no worker answers, or the server rejects it because the worker that
took its workflow task did not process it (``UnprocessedUpdate``: the workflow never saw it), the
update is asked again, for at most ``UPDATE_PATIENCE_SECONDS``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from agentrt.client._patience import Patience, failure_text, is_aborted_update, is_transient, is_unprocessed_update
from agentrt.client._starts import raise_if_cancelled
from agentrt.client._turns import update_rejection
from agentrt.schemas import ServerUnavailable, WorkerUnavailable

__all__ = ["UPDATE_PATIENCE_SECONDS", "execute_session_update"]

# How long an update is asked again while the server restarts or no worker answers (seconds).
UPDATE_PATIENCE_SECONDS = 60.0


async def execute_session_update(
    handle: WorkflowHandle[Any, Any],
    session_id: str,
    name: str,
    update: Any,
    argument: Any,
    update_id: str | None,
    translate: Callable[[RPCError], Awaitable[Exception]],
    patience: Patience,
    address: str,
) -> Any:
    """The session's answer to ``update`` (named ``name``) with ``argument``, under ``update_id``
    (a fresh ``NAME-<hex>`` when None), asked again until ``patience`` runs out (its deadline,
    e.g. ``UPDATE_PATIENCE_SECONDS``). Raises ``RequestRejected`` when the session refused it
    (``SessionBusy`` for a send-only-if-idle message while it is busy),
    ``WorkerUnavailable`` when no worker answered in time, ``ServerUnavailable`` (``address``)
    when the server did not, and ``translate(err)`` of any other RPC failure."""
    update_id = update_id or f"{name}-{uuid.uuid4().hex}"
    while True:
        try:
            return await handle.execute_update(update, argument, id=update_id)
        except WorkflowUpdateFailedError as err:
            if not is_unprocessed_update(err) or patience.spent():
                raise update_rejection(session_id, name, err) from err
            await patience.pause(err)
        except WorkflowUpdateRPCTimeoutOrCancelledError as err:
            raise_if_cancelled(err)
            if patience.spent():
                raise WorkerUnavailable(
                    session_id, f"no worker answered update {name} within {UPDATE_PATIENCE_SECONDS:.0f} s"
                ) from err
            await patience.pause(err, f"no answer to update {name} yet")
        except RPCError as err:
            if not (is_transient(err) or is_aborted_update(err)):
                raise await translate(err) from err
            if patience.spent():
                raise ServerUnavailable(address, failure_text(err)) from err
            await patience.pause(err)

