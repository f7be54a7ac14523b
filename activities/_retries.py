"""A model call's retry made visible in its session: when an attempt of ``provider.complete``
fails with a retryable error and attempts remain, the activity signals its session
(``model_call_retried``), which records ``ModelCallRetried`` (profile, model, base URL, the next
attempt, the cause), so ``agentrt session events`` shows each retry as it happens, not only the
worker's log. The signal is best effort: a failure to send it is logged and never changes the
call's own failure."""

from __future__ import annotations

import asyncio
import re

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrt.activities._attempts import previous_attempt_elsewhere
from agentrt.activities.providers import redact
from agentrt.schemas import MODEL_CALL_RETRIED_SIGNAL, SESSION_WORKFLOW, ModelCallRetry, ModelProfile

__all__ = ["announce_lost_attempt", "announce_retry", "failure_code"]

# The longest wait for the signal to reach the server (seconds): the retry must not wait on it.
SIGNAL_TIMEOUT_SECONDS = 5.0


def failure_code(failure: ApplicationError) -> str:
    """The failure's type as a snake_case code without an ``Error`` suffix (``StreamStalled`` →
    ``stream_stalled``, ``ProviderHTTPError`` → ``provider_http``), as turn failures name it."""
    name = (failure.type or "failure").removesuffix("Error") or "failure"
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()[:64]


async def announce_retry(failure: ApplicationError, profile: ModelProfile, turn_id: str | None, round: int) -> None:
    """Signal the session that runs this activity that ``failure`` ends this attempt and the call
    will be tried again; nothing when it will not be (non-retryable, the last attempt), or when the
    caller is no session (a graph's or task's own call) or this is a local activity."""
    info = activity.info()
    policy = info.retry_policy
    last = policy is not None and policy.maximum_attempts > 0 and info.attempt >= policy.maximum_attempts
    if failure.non_retryable or last or info.is_local or info.workflow_type != SESSION_WORKFLOW or info.workflow_id is None:
        return
    await _signal(profile, turn_id, round, info.attempt + 1, failure_code(failure), failure.message)


async def announce_lost_attempt(profile: ModelProfile, turn_id: str | None, round: int) -> None:
    """At the start of a retried attempt whose previous attempt left no heartbeat from a live
    process (``previous_attempt_elsewhere``: its worker died mid-call, so no failing attempt could
    announce the retry), signal the session as ``announce_retry`` does, cause ``worker_lost``. The
    session records one ``ModelCallRetried`` per attempt: a retry its failing attempt announced
    first is not recorded twice."""
    info = activity.info()
    if info.is_local or info.workflow_type != SESSION_WORKFLOW or not previous_attempt_elsewhere(info):
        return
    detail = f"attempt {info.attempt - 1} ended without an answer: its worker stopped heartbeating (it died or lost the server)"
    await _signal(profile, turn_id, round, info.attempt, "worker_lost", detail)


async def _signal(profile: ModelProfile, turn_id: str | None, round: int, attempt: int, cause: str, detail: str) -> None:
    info = activity.info()
    if info.workflow_id is None:
        return
    report = ModelCallRetry(
        turn_id=turn_id, round=round, profile=profile.name, model=profile.model,
        base_url=redact(profile.base_url, []) if profile.base_url else None,
        attempt=attempt, cause=cause, detail=detail[:2_000],
    )
    try:
        handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await handle.signal(MODEL_CALL_RETRIED_SIGNAL, report)
    except Exception as err:  # noqa: BLE001 - best effort: the call's own work is what counts
        activity.logger.warning("could not record the retry of model call attempt %d: %s", attempt, type(err).__name__)
