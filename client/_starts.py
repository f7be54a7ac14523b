"""Pieces of ``AgentClient``'s starts and sends: the session's start for update-with-start (with
its idempotency key recorded, and a keyed retry told apart from a start into someone else's
session), a message with its idempotency key and the update id derived from it, and ids derived
from a key (in a space of their own)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._visibility import claim_id, taken_reason
from agentrt.client._workers import check_payload_storage
from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    SESSION_WORKFLOW,
    LaneKind,
    OutputSpec,
    RequestRejected,
    SendMessageInput,
    SessionConfig,
    SessionInput,
    SessionResult,
    idempotency_digest,
    idempotency_key_problem,
    session_workflow_id,
)
from agentrt.client._session_handlers import SessionHandlers
from agentrt.store import Store

# The server's default ``limit.maxIDLength``: a longer workflow id fails a start with a bare RPC error.
MAX_WORKFLOW_ID_CHARS = 1000
# Hex digits of an id derived from an idempotency key (96 bits of its digest).
KEYED_ID_CHARS = 24
# What every id derived from an idempotency key starts with. An id given explicitly may not (the
# client refuses it), so no caller of the client can take the id a keyed start of another
# principal will derive before that start does; only raw access to the namespace could.
KEYED_ID_PREFIX = "k-"
# The memo field of a workflow started with an idempotency key: ``{"key": idempotency_digest(owner,
# key), "request": idempotency_digest(<the start's input as JSON>)}``; a retry of the start compares it.
IDEMPOTENCY_MEMO = "agentrt_idempotency"
T = TypeVar("T")


# A session's workflow task timeout (Temporal's default is 10 s). A task a worker held when it
# died (with the local activities it ran: store writes, fast read-only tools) is given to
# another worker only after this, so it bounds how soon a killed worker's session resumes
# (``python -m bench.recovery``). A live worker completes a task in milliseconds (a replay of
# a session's whole history after continue-as-new keeps it short: well under a second); a
# local activity that runs longer heartbeats the task, so it does not time out.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)


def start_operation(
    config: SessionConfig,
    task_queue: str,
    memo: dict[str, Any] | None = None,
    conflict: WorkflowIDConflictPolicy = WorkflowIDConflictPolicy.USE_EXISTING,
    priority: Priority = Priority.default,
) -> WithStartWorkflowOperation:
    """The session's start, for update-with-start: its id, search attributes, summaries, ``memo``,
    its lane (``priority``: ``Connection.lane``) and what it does when the session already runs
    (``conflict``: by default the update goes to it).
    Raises ``RequestRejected`` (nothing started) for a session id too long for a workflow id."""
    if len(session_workflow_id(config.session_id)) > MAX_WORKFLOW_ID_CHARS:
        limit = MAX_WORKFLOW_ID_CHARS - len(session_workflow_id(""))
        raise RequestRejected(
            config.session_id[:40] + "...", "start",
            f"a session id may have at most {limit} characters (Temporal's workflow id limit), this one has "
            f"{len(config.session_id)}",
        )
    return WithStartWorkflowOperation(
        SESSION_WORKFLOW,
        SessionInput(config=config),
        result_type=SessionResult,
        id=session_workflow_id(config.session_id),
        task_queue=task_queue,
        id_conflict_policy=conflict,
        # An ended session is not restarted under its id: its transcript positions would collide.
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        task_timeout=WORKFLOW_TASK_TIMEOUT,
        static_summary=f"session {config.session_id} · {config.profile}",
        static_details=f"owner `{config.owner}` · workspace `{config.workspace}`",
        # Set here once: the workflow writes search attributes only when they change.
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SESSION_OWNER, config.owner), SearchAttributePair(SESSION_STATUS, "idle")]
        ),
        memo=memo,
        priority=priority,
    )


def start_memo(owner: str, idempotency_key: str, request: BaseModel) -> dict[str, Any]:
    """The memo of a start with ``idempotency_key`` (``IDEMPOTENCY_MEMO``): digests of (``owner``,
    key) and of ``request`` (the start's input) as JSON, never the key or the input themselves."""
    return {IDEMPOTENCY_MEMO: {
        "key": idempotency_digest(owner, idempotency_key), "request": idempotency_digest(request.model_dump_json()),
    }}


async def started_with(description: WorkflowExecutionDescription, owner: str) -> dict[str, Any] | None:
    """The ``IDEMPOTENCY_MEMO`` of a workflow ``owner`` started (its ``AgentOwner``), or None (another
    owner's, or started without a key)."""
    if description.typed_search_attributes.get(SESSION_OWNER) != owner:
        return None
    try:
        recorded = await description.memo_value(IDEMPOTENCY_MEMO, default=None)
    except Exception:  # noqa: BLE001 - a memo this client cannot decode was not written by a keyed start of its own
        return None
    return recorded if isinstance(recorded, dict) else None


async def start_session(
    client: Sender,
    config: SessionConfig,
    idempotency_key: str | None,
    call: Callable[[WithStartWorkflowOperation], Awaitable[T]],
) -> T:
    """``call`` (an update-with-start of the session's first message) with the session's start operation.

    Without a key the update goes to the session if it already runs. With a key it does only when
    that session was started by this client's principal with this key and this same config (a
    retry of this start: the update then answers the first message's turn); the start is recorded
    in the workflow's memo (``start_memo``) for that check, made before the update is sent (the
    server would answer an update id it knows whatever the start's config). Raises
    ``RequestRejected`` (nothing sent) for a session id in the space of derived ids that is not
    this key's (``reserved_id_problem``), an id another owner has used (recorded in the client's
    store, ``claim_id``: also after Temporal has forgotten it; worded as any taken id), a session that was started otherwise (``a session with
    this id exists``), the same key used for a start with another config, and a session that has ended."""
    session_id = config.session_id
    problem = reserved_id_problem("session", session_id, client.principal, idempotency_key)
    if problem is not None:
        raise RequestRejected(session_id, "start", problem)
    if not await claim_id(client.store, session_workflow_id(session_id), client.principal):
        raise RequestRejected(session_id, "start", taken_reason("session"))  # another owner's, now or before
    if client.store is None:  # no record to ask: the workflow under the id, if any, says whose it is
        found = await _described(client.temporal, session_id)
        owner = None if found is None else found.typed_search_attributes.get(SESSION_OWNER)
        if owner is not None and owner != client.principal:
            raise RequestRejected(session_id, "start", taken_reason("session"))
    lane = client.lane("interactive", config.owner)
    if idempotency_key is None:
        operation = start_operation(config, client.task_queue, priority=lane)
        try:
            return await call(operation)
        except WorkflowAlreadyStartedError as err:
            raise await ended_session(session_id, operation) from err
    memo = start_memo(client.principal, idempotency_key, config)
    first = start_operation(config, client.task_queue, memo, WorkflowIDConflictPolicy.FAIL, lane)
    description = await _described(client.temporal, session_id)
    if description is None:
        try:
            return await call(first)
        except WorkflowAlreadyStartedError as err:  # started meanwhile: by another attempt of this start, or not
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await first.workflow_handle()  # retrieve the start's own failure: no "never retrieved" warning
            await _check_retry(await _described(client.temporal, session_id), config, memo, idempotency_key, err)
    else:
        await _check_retry(description, config, memo, idempotency_key, None)
    again = start_operation(config, client.task_queue, memo, priority=lane)  # a retry: the update goes to the first start's session
    try:
        return await call(again)
    except WorkflowAlreadyStartedError as err:
        raise await ended_session(session_id, again) from err


async def _described(temporal: Client, session_id: str) -> WorkflowExecutionDescription | None:
    """The session workflow's description (its latest run), or None when there is none."""
    try:
        return await temporal.get_workflow_handle(session_workflow_id(session_id)).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _check_retry(
    description: WorkflowExecutionDescription | None,
    config: SessionConfig,
    memo: dict[str, Any],
    idempotency_key: str,
    cause: Exception | None,
) -> None:
    """Return when the session ``description`` tells of was started by ``config.owner`` with the key
    and config of ``memo``; raise ``RequestRejected`` otherwise."""
    session_id = config.session_id
    first = None if description is None else await started_with(description, config.owner)
    wanted = memo[IDEMPOTENCY_MEMO]
    if first is not None and first.get("key") == wanted["key"]:
        if first.get("request") == wanted["request"]:
            return
        raise RequestRejected(
            session_id, "start",
            f"idempotency key {idempotency_key!r} was used for another start of session {session_id} (another "
            "config); a key stands for one request: use a new key for a new one",
        ) from cause
    if description is not None and description.close_time is not None:
        raise RequestRejected(session_id, "start", "a session with this id has ended; start a new session") from cause
    raise RequestRejected(
        session_id, "start",
        "a session with this id exists and was not started with this idempotency key by this principal; "
        "choose another id (a keyed start never sends into a session it did not start)",
    ) from cause


async def ended_session(session_id: str, operation: WithStartWorkflowOperation) -> RequestRejected:
    """The error for a start under the id of a session that has ended."""
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await operation.workflow_handle()  # retrieve the start's own failure: no "never retrieved" warning
    return RequestRejected(session_id, "start", "a session with this id has ended; start a new session")


def start_and_send(
    client: Sender, config: SessionConfig, message: SendMessageInput, update_id: str, idempotency_key: str | None,
    on_accepted: Callable[[], object] | None,
) -> Callable[[], Awaitable[WorkflowUpdateHandle[Any]]]:
    """What sends a ``start_and_wait``'s first ``message`` (update ``update_id``), as often as it is
    called: the session's start with the ``send_and_wait`` update (``start_session``), its handle
    answered at the update's end, or at its acceptance with ``on_accepted`` (called once)."""
    stage = WorkflowUpdateStage.COMPLETED if on_accepted is None else WorkflowUpdateStage.ACCEPTED
    accepted: list[bool] = []

    async def send() -> WorkflowUpdateHandle[Any]:
        update = await start_session(
            client, config, idempotency_key,
            lambda operation: client.temporal.start_update_with_start_workflow(
                SessionHandlers.send_and_wait, message, start_workflow_operation=operation, id=update_id,
                wait_for_stage=stage,
            ),
        )
        if on_accepted is not None and not accepted:
            accepted.append(True)
            on_accepted()
        return update

    return send


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
    ``task``, ``graph``): ``KEYED_ID_PREFIX`` and ``KEYED_ID_CHARS`` hex digits of
    ``idempotency_digest(kind, principal, key)``, so a retry of the start finds the workflow the
    first one started. Explicit ids may not start with the prefix (``reserved_id_problem``)."""
    return KEYED_ID_PREFIX + idempotency_digest(kind, principal, idempotency_key)[:KEYED_ID_CHARS]


def reserved_id_problem(kind: str, item_id: str, principal: str, idempotency_key: str | None) -> str | None:
    """Why ``item_id`` may not be given to a start of a ``kind`` (``session``, ``task``, ``graph``), or
    None: an id starting with ``KEYED_ID_PREFIX`` is only the one ``keyed_id`` derives from this
    ``principal`` and ``idempotency_key`` (what a retry that kept the first answer's id passes)."""
    if not item_id.startswith(KEYED_ID_PREFIX):
        return None
    if idempotency_key is not None and item_id == keyed_id(kind, principal, idempotency_key):
        return None
    return (
        f"{kind} ids starting with {KEYED_ID_PREFIX!r} are derived from an idempotency key and may not be "
        "chosen; choose another id, or give the key without an id"
    )


class Sender(Protocol):
    """What ``message_input`` and ``start_session`` need of an ``AgentClient``."""

    temporal: Client
    task_queue: str
    principal: str
    store: Store | None

    def lane(self, kind: LaneKind, owner: str) -> Priority: ...


async def message_input(
    client: Sender, session_id: str, text: str, request: str, idempotency_key: str | None, output: OutputSpec | None = None,
    if_idle: bool = False,
) -> SendMessageInput:
    """``text`` from the client's principal with its ``idempotency_key`` (and the turn's own
    ``output`` spec; ``if_idle``: sent only if the session is idle), for update ``request``.
    Raises ``RequestRejected`` for a key that is not one (``check_key``), ``PayloadStorageMismatch``
    (nothing sent) for a message that would leave history for payload storage the task queue's
    workers do not read, ``PayloadCodecMismatch`` (nothing sent) for one they could not decrypt or,
    from a client without codec keys, one they encrypt (``check_payload_storage``)."""
    check_key(session_id, request, idempotency_key)
    message = SendMessageInput(
        text=text, principal=client.principal, idempotency_key=idempotency_key, output=output, if_idle=if_idle
    )
    await check_payload_storage(client.temporal, client.task_queue, session_id, message)
    return message


async def first_message(
    client: Sender, session_id: str, text: str, request: str, idempotency_key: str | None, output: OutputSpec | None = None
) -> SendMessageInput:
    """A start's first message (``message_input``), refused here when empty: a refused
    update-with-start still starts the session."""
    if not text.strip():
        raise RequestRejected(session_id, request, "message text is empty")
    return await message_input(client, session_id, text, request, idempotency_key, output)


def new_session_id(principal: str, idempotency_key: str | None) -> str:
    """A new session's id: ``keyed_id("session", principal, key)`` with a key (``RequestRejected`` for a
    malformed one), else 12 random hex digits (never ``KEYED_ID_PREFIX``: no hex digit is ``k``)."""
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
