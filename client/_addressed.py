"""Calls to a workflow the client addresses by an id of its own kind (a session, ``session-ID``;
an autonomous task, ``task-ID``; a task graph, ``graph-ID``) and by its type name, never its class:
its start (idempotent with a key), updates and queries, and the errors they become, worded for that
kind (``task t1 rejected pause: ...``, ``no task graph 'g1'``). ``WorkflowKind.error`` is the one
translation of an RPC failure for every kind."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import Priority, SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._connection import DECISION_GRACE_SECONDS, DECISION_SECONDS
from agentrt.client._patience import Patience, is_aborted_update, is_unprocessed_update
from agentrt.client._queries import query_workflow
from agentrt.client._starts import (
    IDEMPOTENCY_MEMO,
    WORKFLOW_TASK_TIMEOUT,
    keyed_id,
    raise_if_cancelled,
    reserved_id_problem,
    start_memo,
    started_with,
)
from agentrt.client._turns import update_failure_cause, update_failure_type
from agentrt.client._visibility import claim_id, taken_reason
from agentrt.client._workers import check_payload_storage
from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    ClientError,
    ConfigurationError,
    RequestRejected,
    WorkerUnavailable,
    idempotency_key_problem,
)
from agentrt.store import Store

__all__ = ["IDEMPOTENCY_MEMO", "STUCK_QUERY_SIGNS", "WorkflowKind", "listing_fields", "visibility_literal", "validation_text"]


# What a query to a workflow whose task keeps failing meets: the server's refusal, or the
# worker's non-determinism error when the query itself replays the history.
STUCK_QUERY_SIGNS = ("Workflow Task in failed state", "[TMPRL1100]")


@dataclass(frozen=True)
class WorkflowKind:
    """One kind of addressed workflow: ``noun`` names it in messages (``session``, ``task``,
    ``graph``), ``not_found`` is the error for an id with no workflow, ``stuck`` (when the kind has
    one) the error for a workflow whose task keeps failing."""

    noun: str
    not_found: Callable[[str], ClientError]
    stuck: Callable[[str, str], ClientError] | None = None

    def rejected(self, item_id: str, request: str, reason: str) -> RequestRejected:
        """The ``RequestRejected`` a refusal is (its ``session_id`` field holds the id):
        ``<noun> <id> rejected <request>: <reason>``."""
        error = RequestRejected(item_id, request, reason)
        error.args = (f"{self.noun} {item_id} rejected {request}: {reason}",)
        return error

    def no_worker(self, item_id: str, reason: str) -> WorkerUnavailable:
        error = WorkerUnavailable(item_id, reason)
        error.args = (
            f"{self.noun} {item_id}: no worker is running for its task queue ({reason}); start one with `agentrt worker` or `agentrt dev`",
        )
        return error

    def error(self, item_id: str, err: RPCError) -> Exception:
        """An RPC failure as the most specific error: not found, no worker, stuck (a kind with a
        ``stuck`` error), ended while a query waited (``RequestRejected``), or the failure itself."""
        if err.status == RPCStatusCode.NOT_FOUND:
            return self.not_found(item_id)
        if "no poller" in err.message:
            return self.no_worker(item_id, err.message)
        if self.stuck is not None and any(sign in err.message for sign in STUCK_QUERY_SIGNS):
            return self.stuck(item_id, err.message)
        if "Workflow execution closed" in err.message:  # ended (terminated, say) while the query waited
            return self.rejected(item_id, "query", f"the {self.noun}'s workflow has ended ({err.message})")
        return err

    def build(self, item_id: str, request: str, model: type[Any], /, **fields: Any) -> Any:
        """``model(**fields)``; a refused field is ``RequestRejected`` for ``request``."""
        try:
            return model(**fields)
        except ValidationError as err:
            raise self.rejected(item_id, request, validation_text(err)) from err

    async def update(
        self, handle: WorkflowHandle[Any, Any], item_id: str, update: str, argument: BaseModel, result_type: type[Any],
        decision_seconds: float = DECISION_SECONDS,
        expire: bool = True,
    ) -> Any:
        """Execute ``update``; raises ``RequestRejected`` (refused, or the workflow ended), the
        kind's not-found error, or ``WorkerUnavailable``. An update the server rejected because the
        worker that took it did not process it (``is_unprocessed_update``), or aborted because its
        workflow task failed (``is_aborted_update``), is asked again under its id.

        A decision is never applied behind its caller's back: an ``argument`` with an ``expires_at``
        field (every task and graph update's) gets ``decision_seconds`` from now, and this waits for
        the answer at most ``DECISION_GRACE_SECONDS`` longer. No answer by then (no worker took it)
        is ``WorkerUnavailable`` saying it was not applied: a worker that takes the update later
        refuses it (``RequestExpired``), as it does one that comes in the grace (also
        ``WorkerUnavailable``). Clocks of the client and the Temporal server must agree within the grace.
        ``expire`` False (a client of workflows on a virtual clock, ``AgentClient(virtual_clock=True)``):
        no ``expires_at``, so one no worker took in time may still be applied when one does, and
        ``WorkerUnavailable`` says so."""
        update_id = f"{update}-{uuid.uuid4().hex}"
        if expire and "expires_at" in type(argument).model_fields:
            argument = argument.model_copy(
                update={"expires_at": datetime.now(timezone.utc) + timedelta(seconds=decision_seconds)}
            )
        bound = decision_seconds + DECISION_GRACE_SECONDS
        patience = Patience(item_id, f"update {update}", bound)
        deadline = asyncio.get_running_loop().time() + bound
        fate = "it was not applied and never will be" if expire else "it may still be applied when a worker takes it"
        unanswered = f"no worker took update {update} within {decision_seconds:g} s; {fate}"
        accepted: WorkflowUpdateHandle[Any] | None = None
        while True:
            try:
                if accepted is None:
                    accepted = await asyncio.wait_for(
                        handle.start_update(
                            update, argument, wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=result_type, id=update_id
                        ),
                        max(deadline - asyncio.get_running_loop().time(), 0.001),
                    )
                return await accepted.result()  # taken: its answer, however long it takes (a cancel's)
            except asyncio.TimeoutError:
                raise self.no_worker(item_id, unanswered) from None
            except WorkflowUpdateFailedError as err:
                if update_failure_type(err) == "RequestExpired":
                    raise self.no_worker(item_id, unanswered) from err
                if not is_unprocessed_update(err) or patience.spent():
                    raise self.rejected(item_id, update, update_failure_cause(err)) from err
                accepted = None  # the workflow never saw it: ask again, same id
                await patience.pause(err)
            except WorkflowUpdateRPCTimeoutOrCancelledError as err:
                raise_if_cancelled(err)
                if accepted is not None:
                    raise self.no_worker(
                        item_id, f"update {update} was taken and goes on, but its answer did not come; read the {self.noun}'s status"
                    ) from err
                if patience.spent():
                    raise self.no_worker(item_id, unanswered) from err
                await patience.pause(err, f"no answer to update {update} yet")  # ask again, same id
            except RPCError as err:
                if is_aborted_update(err) and not patience.spent():
                    accepted = None
                    await patience.pause(err)  # the workflow never saw it: ask again, same id
                    continue
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise await self._closed_or_missing(handle, item_id, update) from err
                raise self.error(item_id, err) from err

    async def _closed_or_missing(self, handle: WorkflowHandle[Any, Any], item_id: str, update: str) -> Exception:
        """An update to a closed workflow fails NOT_FOUND: say it ended instead of 'not found'."""
        try:
            description = await handle.describe()
        except RPCError:
            return self.not_found(item_id)
        if description.close_time is None:
            return self.not_found(item_id)
        closed = description.status.name.lower() if description.status else "closed"
        return self.rejected(item_id, update, f"the {self.noun} has ended (its workflow {closed})")

    def start_id(self, item_id: str | None, principal: str, idempotency_key: str | None) -> str:
        """The id a start uses: ``item_id`` when given, else one derived from ``principal`` and
        ``idempotency_key`` (``keyed_id``: a retry finds the first start's workflow), else 12 random
        hex digits. Raises ``RequestRejected`` (request ``start``) for a malformed key and for an
        ``item_id`` in the space of derived ids that is not this key's (``reserved_id_problem``)."""
        problem = None if idempotency_key is None else idempotency_key_problem(idempotency_key)
        if problem is not None:
            raise self.rejected(item_id if item_id is not None else "(new)", "start", problem)
        if item_id is not None:
            problem = reserved_id_problem(self.noun, item_id, principal, idempotency_key)
            if problem is not None:
                raise self.rejected(item_id, "start", problem)
            return item_id
        return keyed_id(self.noun, principal, idempotency_key) if idempotency_key is not None else uuid.uuid4().hex[:12]

    async def start(
        self, temporal: Client, workflow_type: str, argument: BaseModel, item_id: str, *, workflow_id: str, task_queue: str,
        owner: str, status: str, summary: str, details: str, idempotency_key: str | None = None,
        store: Store | None = None, priority: Priority = Priority.default,
    ) -> None:
        """Start the workflow: its id never reused (REJECT_DUPLICATE), the client's workflow task
        timeout, static summary and details, its lane (``priority``: ``Connection.lane``), and
        ``AgentOwner``/``AgentSessionStatus`` set once here
        (the workflow writes them only when they change). Raises ``RequestRejected`` (request
        ``start``) when the id is taken: to its owner saying whether that workflow runs or has ended, to
        anyone else as ``taken_reason`` words it, which never names the owner. With ``store``, an id
        another owner has used is refused so before anything starts, also after Temporal has
        forgotten that workflow (``claim_id``: the store records each id's first owner).

        With ``idempotency_key`` the start is recorded in the workflow's memo (``IDEMPOTENCY_MEMO``)
        and a start whose id is taken by a workflow ``owner`` started with the same key and the same
        ``argument`` returns as if it had started it (a retry; nothing starts). The same key with
        another ``argument`` raises ``RequestRejected`` saying the key was used for another start.

        Raises ``PayloadCodecMismatch`` / ``PayloadStorageMismatch`` (nothing started) when the task
        queue's workers could not read ``argument``, or encrypt and this client has no codec keys
        (``check_payload_storage``)."""
        await check_payload_storage(temporal, task_queue, item_id, argument, kind=self.noun)
        if not await claim_id(store, workflow_id, owner):
            raise self.rejected(item_id, "start", taken_reason(self.noun))
        memo = None if idempotency_key is None else start_memo(owner, idempotency_key, argument)
        try:
            await temporal.start_workflow(
                workflow_type,
                argument,
                id=workflow_id,
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                task_timeout=WORKFLOW_TASK_TIMEOUT,
                static_summary=summary,
                static_details=details,
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(SESSION_OWNER, owner), SearchAttributePair(SESSION_STATUS, status)]
                ),
                memo=memo,
                priority=priority,
            )
        except WorkflowAlreadyStartedError as err:
            try:
                description: WorkflowExecutionDescription | None = await temporal.get_workflow_handle(workflow_id).describe()
            except RPCError:
                description = None
            if memo is not None and description is not None:
                first = await started_with(description, owner)
                if first is not None and first.get("key") == memo[IDEMPOTENCY_MEMO]["key"]:
                    if first.get("request") == memo[IDEMPOTENCY_MEMO]["request"]:
                        return  # a retry: the first start's workflow is this one
                    raise self.rejected(
                        item_id, "start",
                        f"idempotency key {idempotency_key!r} was used for another start of {self.noun} {item_id}; "
                        "a key stands for one request: use a new key for a new one",
                    ) from err
            if description is None or description.typed_search_attributes.get(SESSION_OWNER) != owner:
                raise self.rejected(item_id, "start", taken_reason(self.noun)) from err
            running = description.close_time is None
            state = "is running" if running else f"has ended ({self.noun} ids are not reused)"
            raise self.rejected(item_id, "start", f"a {self.noun} with this id {state}; choose another id") from err

    async def listed(
        self, temporal: Client, workflow_type: str, principal: str, status: str | None, statuses: tuple[str, ...], limit: int
    ) -> list[WorkflowExecution]:
        """``principal``'s workflows of ``workflow_type`` (``AgentOwner``), one per id (its latest
        run), most recently started first, at most ``limit``; ``status``: only those whose
        ``AgentSessionStatus`` is that one of ``statuses``. Raises ``ConfigurationError`` for an
        unknown status."""
        filter_ = (
            f"WorkflowType = '{workflow_type}' AND {SESSION_OWNER.name} = {visibility_literal(principal)}"
            " AND ExecutionStatus != 'ContinuedAsNew'"
        )
        if status is not None:
            if status not in statuses:
                raise ConfigurationError(f"unknown {self.noun} status {status!r}; one of {', '.join(statuses)}")
            filter_ += f" AND {SESSION_STATUS.name} = '{status}'"
        found: dict[str, WorkflowExecution] = {}
        async for execution in temporal.list_workflows(filter_, limit=limit):
            found.setdefault(execution.id, execution)  # a run continuing as new shows briefly
        never = datetime.min.replace(tzinfo=timezone.utc)
        return sorted(found.values(), key=lambda e: e.start_time or never, reverse=True)

    async def result(self, handle: WorkflowHandle[Any, Any], item_id: str) -> Any:
        """The workflow's result, waited for without a bound. Raises ``RequestRejected`` (request
        ``wait``) when it ended without one (terminated, timed out), the kind's not-found error."""
        try:
            return await handle.result()
        except WorkflowFailureError as err:
            cause = err.cause
            why = getattr(cause, "message", None) or type(cause).__name__
            raise self.rejected(item_id, "wait", f"the {self.noun}'s workflow ended without a result ({why})") from err
        except RPCError as err:
            raise self.error(item_id, err) from err

    async def query(
        self, handle: WorkflowHandle[Any, Any], item_id: str, query: str, argument: BaseModel | None, result_type: type[Any]
    ) -> Any:
        args = [] if argument is None else [argument]
        try:
            return await query_workflow(handle, query, *args, result_type=result_type)
        except WorkflowQueryFailedError as err:
            raise self.rejected(item_id, query, str(err)) from err
        except RPCError as err:
            raise self.error(item_id, err) from err


def listing_fields(execution: WorkflowExecution, initial_status: str) -> dict[str, Any]:
    """A listing row's fields from a workflow execution: ``workflow_id``, ``status`` (its
    ``AgentSessionStatus``, ``initial_status`` before it set one; how it closed when it closed
    otherwise than completing: ``terminated``, ``timed_out`` ...), ``owner``, ``started_at``, ``closed``."""
    attrs = execution.search_attributes or {}
    status_values = attrs.get(SESSION_STATUS.name) or []
    owner_values = attrs.get(SESSION_OWNER.name) or []
    closed = execution.close_time is not None
    status = str(status_values[0]) if status_values else initial_status
    if closed and execution.status not in (None, WorkflowExecutionStatus.COMPLETED):
        status = execution.status.name.lower()
    return {
        "workflow_id": execution.id, "status": status, "owner": str(owner_values[0]) if owner_values else None,
        "started_at": execution.start_time, "closed": closed,
    }


def validation_text(err: ValidationError) -> str:
    """A pydantic error as one line: ``schedule: give every_seconds or cron, not both; ...``."""
    parts = []
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"])
        message = str(problem["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def visibility_literal(value: str) -> str:
    """``value`` as a visibility-filter string literal: visibility_literal with a quote character it does not
    hold. Raises ``ConfigurationError`` when it holds both, or a backslash (Temporal's list
    filters read ``\\`` as an escape, inconsistently: ``'a\\b'`` finds ``a\\b``, ``'end\\'`` nothing)."""
    if "\\" in value:
        raise ConfigurationError(f"principal {value!r} holds a backslash: it cannot be put in a visibility filter")
    for quote in ("'", '"'):
        if quote not in value:
            return f"{quote}{value}{quote}"
    raise ConfigurationError(f"principal {value!r} holds both quote characters: it cannot be put in a visibility filter")
