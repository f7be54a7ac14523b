"""Pieces of ``AgentClient``'s starts and sends: the session's start for update-with-start, a
message with its idempotency key and the update id derived from it, ids derived from a key, and
the outcome of a ``send_and_wait`` update asked again."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import timedelta
from typing import Protocol

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from agentrt.client._turns import update_failure_cause
from agentrt.client._workers import check_payload_storage
from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    RequestRejected,
    SendMessageInput,
    SessionConfig,
    SessionInput,
    TurnOutcome,
    idempotency_digest,
    idempotency_key_problem,
)
from agentrt.workflows.session import SessionWorkflow, workflow_id_for

# The server's default ``limit.maxIDLength``: a longer workflow id fails a start with a bare RPC error.
MAX_WORKFLOW_ID_CHARS = 1000
# Hex digits of an id derived from an idempotency key (96 bits of its digest).
KEYED_ID_CHARS = 24


# A session's workflow task timeout (Temporal's default is 10 s). A task a worker held when it
# died (with the local activities it ran: store writes, fast read-only tools) is given to
# another worker only after this, so it bounds how soon a killed worker's session resumes
# (``python -m bench.recovery``). A live worker completes a task in milliseconds (a replay of
# a session's whole history after continue-as-new keeps it short: well under a second); a
# local activity that runs longer heartbeats the task, so it does not time out.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)


def start_operation(config: SessionConfig, task_queue: str) -> WithStartWorkflowOperation:
    """The session's start, for update-with-start: its id, search attributes and summaries.
    Raises ``RequestRejected`` (nothing started) for a session id too long for a workflow id."""
    if len(workflow_id_for(config.session_id)) > MAX_WORKFLOW_ID_CHARS:
        limit = MAX_WORKFLOW_ID_CHARS - len(workflow_id_for(""))
        raise RequestRejected(
            config.session_id[:40] + "...", "start",
            f"a session id may have at most {limit} characters (Temporal's workflow id limit), this one has "
            f"{len(config.session_id)}",
        )
    return WithStartWorkflowOperation(
        SessionWorkflow.run,
        SessionInput(config=config),
        id=workflow_id_for(config.session_id),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # An ended session is not restarted under its id: its transcript positions would collide.
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        task_timeout=WORKFLOW_TASK_TIMEOUT,
        static_summary=f"session {config.session_id} · {config.profile}",
        static_details=f"owner `{config.owner}` · workspace `{config.workspace}`",
        # Set here once: the workflow writes search attributes only when they change.
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SESSION_OWNER, config.owner), SearchAttributePair(SESSION_STATUS, "idle")]
        ),
    )


async def ended_session(session_id: str, operation: WithStartWorkflowOperation) -> RequestRejected:
    """The error for a start under the id of a session that has ended."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await operation.workflow_handle()  # retrieve the start's own failure: no "never retrieved" warning
    return RequestRejected(session_id, "start", "a session with this id has ended; start a new session")


async def update_result(handle: WorkflowHandle, session_id: str, update_id: str) -> TurnOutcome:
    """The outcome of the accepted ``send_and_wait`` update ``update_id``, asked again while its
    RPCs time out (the update is in history: asking again finds the same one). Raises
    ``RequestRejected`` if the update failed, ``asyncio.CancelledError`` when cancelled."""
    update = handle.get_update_handle(update_id, result_type=TurnOutcome)
    while True:
        try:
            return await update.result()
        except WorkflowUpdateFailedError as err:
            raise RequestRejected(session_id, "send_and_wait", update_failure_cause(err)) from err
        except WorkflowUpdateRPCTimeoutOrCancelledError as err:
            raise_if_cancelled(err)


def raise_if_cancelled(err: Exception) -> None:
    """Raise ``asyncio.CancelledError`` when the current task is being cancelled (the SDK reports
    a cancelled update call as a timeout)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from err


def check_key(item_id: str, request: str, idempotency_key: str | None) -> None:
    """Raise ``RequestRejected`` (nothing sent or started) for an ``idempotency_key`` that is not one:
    1 to ``MAX_IDEMPOTENCY_KEY_CHARS`` (200) characters of ``A-Z a-z 0-9 . _ : -``."""
    problem = None if idempotency_key is None else idempotency_key_problem(idempotency_key)
    if problem is not None:
        raise RequestRejected(item_id, request, problem)


def keyed_id(kind: str, principal: str, idempotency_key: str) -> str:
    """The id a start with ``idempotency_key`` and no id of its own gets (``kind``: ``session``,
    ``task``, ``graph``): ``KEYED_ID_CHARS`` hex digits of ``idempotency_digest(kind, principal,
    key)``, so a retry of the start finds the workflow the first one started."""
    return idempotency_digest(kind, principal, idempotency_key)[:KEYED_ID_CHARS]


class Sender(Protocol):
    """What ``message_input`` needs of an ``AgentClient``."""

    temporal: Client
    task_queue: str
    principal: str


async def message_input(
    client: Sender, session_id: str, text: str, request: str, idempotency_key: str | None
) -> SendMessageInput:
    """``text`` from the client's principal with its ``idempotency_key``, for update ``request``.
    Raises ``RequestRejected`` for a key that is not one (``check_key``), ``PayloadStorageMismatch``
    (nothing sent) for a message that would leave history for payload storage the task queue's
    workers do not read."""
    check_key(session_id, request, idempotency_key)
    message = SendMessageInput(text=text, principal=client.principal, idempotency_key=idempotency_key)
    await check_payload_storage(client.temporal, client.task_queue, session_id, message)
    return message


async def first_message(
    client: Sender, session_id: str, text: str, request: str, idempotency_key: str | None
) -> SendMessageInput:
    """A start's first message (``message_input``), refused here when empty: a refused
    update-with-start still starts the session."""
    if not text.strip():
        raise RequestRejected(session_id, request, "message text is empty")
    return await message_input(client, session_id, text, request, idempotency_key)


def new_session_id(principal: str, idempotency_key: str | None) -> str:
    """A new session's id: ``keyed_id("session", principal, key)`` with a key (``RequestRejected`` for a
    malformed one), else 12 random hex digits."""
    if idempotency_key is None:
        return uuid.uuid4().hex[:12]
    check_key("(new)", "start", idempotency_key)
    return keyed_id("session", principal, idempotency_key)


def message_update_id(update: str, message: SendMessageInput) -> str:
    """The id of the ``update`` (``send_message``, ``send_and_wait``) carrying ``message``.

    With an idempotency key: ``<update>-<idempotency_digest(principal, key, text)>``, so a repeat
    reaching the same run is answered by the server with the first update's result (a repeat in
    a later run meets the session's own memory of keys). The text is in it because the server
    answers a known update id without asking the validator: another text under the same key gets
    another id and is refused by the validator. Without a key: a new random id."""
    if message.idempotency_key is None:
        return f"send-{uuid.uuid4().hex}"
    return f"{update}-{idempotency_digest(message.principal, message.idempotency_key, message.text)}"
