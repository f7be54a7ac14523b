"""A workflow started with an input its type cannot take fails, instead of its first workflow task
failing at every attempt forever.

Any Temporal client can start ``SessionWorkflow``, ``AutonomousTaskWorkflow`` or
``TaskGraphWorkflow`` with plain JSON (``temporal workflow start --input``). An input that does
not validate (``approval_timeout_seconds: 1e308``, a missing field, malformed JSON) made the SDK
fail the run's first workflow task (``Failed decoding arguments``), which Temporal retries for
as long as the run lives. The payload converter raises ``InvalidWorkflowInput`` instead, an
``ApplicationError`` (not retried) with pydantic's reasons, for these three input types only:
the SDK fails a workflow whose start input raises a ``FailureError`` (the run ends ``failed``
with the reasons). Signal, update and query arguments keep their own paths (dropped, rejected,
failed), and an activity's or a child's result is never one of these types.

An input that carries ``state`` is a run continuing as new (the previous run's state, perhaps
written by another build): one this build cannot read stays a workflow task failure, so the run
waits for a worker that can (a rollback, a fixed build) instead of failing for good.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pydantic
from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from agentrt.schemas import AutonomousTaskInput, SessionInput, TaskGraphInput, shorten

__all__ = ["INVALID_WORKFLOW_INPUT", "WORKFLOW_INPUT_TYPES", "invalid_workflow_input"]

INVALID_WORKFLOW_INPUT = "InvalidWorkflowInput"  # the ApplicationError's type
WORKFLOW_INPUT_TYPES: tuple[type, ...] = (SessionInput, AutonomousTaskInput, TaskGraphInput)
MAX_REASONS = 20  # reasons listed; the rest counted
MAX_MESSAGE_CHARS = 4000


def invalid_workflow_input(err: Exception, payloads: Sequence[Payload], type_hints: Sequence[Any] | None) -> ApplicationError | None:
    """The ``InvalidWorkflowInput`` error for ``err``, raised decoding ``payloads`` as ``type_hints``,
    when it is pydantic's refusal of a new run's input of one of ``WORKFLOW_INPUT_TYPES``; None for
    anything else (a storage or codec failure, a continuing run's state: a workflow task failure,
    which a retry on another worker may mend)."""
    if not isinstance(err, pydantic.ValidationError) or not type_hints:
        return None
    index = next((i for i, t in enumerate(type_hints) if t in WORKFLOW_INPUT_TYPES), None)
    if index is None or index >= len(payloads) or _carries_state(payloads[index]):
        return None
    kind = type_hints[index]
    reasons = [f"{'.'.join(str(part) for part in e['loc']) or '(input)'}: {e['msg']}" for e in err.errors()]
    more = len(reasons) - MAX_REASONS
    listed = "; ".join(reasons[:MAX_REASONS]) + (f"; and {more} more" if more > 0 else "")
    message = shorten(f"the workflow's input is not a valid {kind.__name__}: {listed}", MAX_MESSAGE_CHARS)
    return ApplicationError(message, type=INVALID_WORKFLOW_INPUT, non_retryable=True)


def _carries_state(payload: Payload) -> bool:
    """The payload is a JSON object with a ``state`` that is not null: a run continuing as new."""
    try:
        value = json.loads(payload.data)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and value.get("state") is not None
