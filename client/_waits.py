"""What a workflow's running activities wait for, read from outside: the workflow cannot know that
its model call is waiting for the store or being retried, but its description says so."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from agentrt.schemas import STORE_UNAVAILABLE, ActivityWait

__all__ = ["activity_waits"]

# The store wait's heartbeat detail (worker/_store_outage.py, ``store_wait_detail``).
_STORE_WAIT = re.compile(rf"^{STORE_UNAVAILABLE} since (?P<since>\S+): (?P<message>.*)$", re.DOTALL)
# Longest message kept of a failure or a heartbeat (characters).
MAX_MESSAGE_CHARS = 300
# A retry interval above this is no interval (the server sends a huge one for an attempt that timed out).
MAX_RETRY_SECONDS = 86_400


async def activity_waits(temporal: Client, workflow_id: str) -> list[ActivityWait]:
    """The pending activities of ``workflow_id``'s current run that wait for the store or are being
    retried (``ActivityWait``), in the order the server lists them; empty when none does, when the
    workflow is unknown or closed, or when the server does not answer (this is a view, never a
    reason to fail). One ``DescribeWorkflowExecution`` call."""
    try:
        description = await temporal.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return []
    if description.close_time is not None:
        return []
    waits = []
    for pending in description.raw_description.pending_activities:
        wait = await _store_wait(temporal, pending) or await _retry(temporal, pending)
        if wait is not None:
            waits.append(wait)
    return waits


def _base(pending: Any) -> dict[str, Any]:
    return {
        "activity": pending.activity_type.name, "activity_id": pending.activity_id, "attempt": pending.attempt,
        "maximum_attempts": pending.maximum_attempts or None,
    }


async def _store_wait(temporal: Client, pending: Any) -> ActivityWait | None:
    """The store wait the attempt under way heartbeats about; None when its last heartbeat is older
    than the attempt (Temporal keeps the last attempt's details) or says something else."""
    if not pending.HasField("heartbeat_details") or not pending.HasField("last_heartbeat_time"):
        return None
    if pending.HasField("last_started_time") and pending.last_heartbeat_time.ToDatetime() < pending.last_started_time.ToDatetime():
        return None
    try:
        details = await temporal.data_converter.decode(list(pending.heartbeat_details.payloads))
    except Exception:  # a detail this client cannot decode (another codec key): not a store wait it can read
        return None
    if len(details) < 2 or not isinstance(details[1], str):
        return None
    match = _STORE_WAIT.match(details[1])
    if match is None:
        return None
    try:
        since = datetime.fromisoformat(match["since"])
    except ValueError:
        since = None
    return ActivityWait(**_base(pending), kind="store_unavailable", message=match["message"][:MAX_MESSAGE_CHARS], since=since)


async def _retry(temporal: Client, pending: Any) -> ActivityWait | None:
    if pending.attempt <= 1 or not pending.HasField("last_failure") or not pending.last_failure.message:
        return None
    retry_in = None
    if pending.HasField("current_retry_interval"):
        seconds = pending.current_retry_interval.ToTimedelta().total_seconds()
        retry_in = round(seconds, 1) if 0 < seconds < MAX_RETRY_SECONDS else None
    message = await _failure_message(temporal, pending.last_failure)
    return ActivityWait(**_base(pending), kind="retrying", message=message[:MAX_MESSAGE_CHARS], retry_in=retry_in)


async def _failure_message(temporal: Client, failure: Any) -> str:
    """``failure``'s message, decoded when the payload codec encoded it (history then says ``Encoded failure``)."""
    if not failure.HasField("encoded_attributes"):
        return failure.message
    copy = type(failure)()
    copy.CopyFrom(failure)
    try:
        return str(await temporal.data_converter.decode_failure(copy))
    except Exception:  # a key this client lacks: show what history holds
        return failure.message
