"""Finds stuck sessions, tasks and graphs from outside: a workflow whose task keeps failing cannot say so itself."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timezone
from shlex import quote
from typing import Any, Literal, get_args

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, TimeoutType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._filters import check_list_filter
from agentrt.schemas import (
    AGENT_KIND,
    AUTONOMOUS_TASK_WORKFLOW,
    SESSION_ID_PREFIX,
    SESSION_OWNER,
    SESSION_WORKFLOW,
    TASK_GRAPH_WORKFLOW,
    InvalidListFilter,
    StuckCause,
    StuckWorkflow,
)

__all__ = [
    "NONDETERMINISM_STUCK_ATTEMPT",
    "STUCK_ATTEMPT",
    "failing_workflow_task",
    "find_stuck_workflows",
    "is_stuck",
    "stuck_hint",
    "task_failure",
]

# A workflow is stuck once its pending workflow task is on this attempt (1 is the first try):
# one failure can be a one-off (a worker killed mid-task, a cache eviction) and attempt 2 follows
# it at once; a second failure in a row is code or a missing worker, which no retry fixes.
STUCK_ATTEMPT = 3
# A non-determinism error is stuck at its first retry: the same history replayed by the same code
# fails the same way every time.
NONDETERMINISM_STUCK_ATTEMPT = 2
# The system search attribute Temporal 1.28+ keeps on a workflow whose workflow task keeps failing.
REPORTED_PROBLEMS = SearchAttributeKey.for_keyword_list("TemporalReportedProblems")
FLAGGED = f"{REPORTED_PROBLEMS.name} IN ('category=WorkflowTaskFailed', 'category=WorkflowTaskTimedOut')"
# What an agentrt workflow is (``StuckWorkflow.kind``, its ``AgentKind`` search attribute).
KindName = Literal["session", "task", "graph"]
KIND_NAMES: tuple[KindName, ...] = get_args(KindName)
# The kind of each agentrt workflow type: a workflow whose first task never completed has not
# written its ``AgentKind`` yet, so the listing names the types too.
KINDS: dict[str, KindName] = {
    SESSION_WORKFLOW: "session", AUTONOMOUS_TASK_WORKFLOW: "task", TASK_GRAPH_WORKFLOW: "graph"
}
AGENT_WORKFLOWS = (
    f"({AGENT_KIND.name} IN ('session', 'task', 'graph') OR WorkflowType IN ({', '.join(repr(t) for t in KINDS)}))"
)
# The most workflows one check looks at (running ones; with the search attribute, flagged ones).
MAX_EXAMINED = 1000
# Workflows described at once, and history events read back from the end of one for its failure.
CONCURRENT_DESCRIBES = 8
TAIL_EVENTS = 1000
_TAIL_PAGE = 100

_FAILED = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
_TIMED_OUT = EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
_NONDETERMINISM = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
_BAD_UPDATE_MESSAGE = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE


def is_stuck(cause: StuckCause, attempt: int) -> bool:
    """Whether a workflow task failing with ``cause`` and now on ``attempt`` is stuck."""
    return attempt >= STUCK_ATTEMPT or (cause == "nondeterminism" and attempt >= NONDETERMINISM_STUCK_ATTEMPT)


async def find_stuck_workflows(
    temporal: Client, query: str | None = None, *, scan: bool | None = None, limit: int = MAX_EXAMINED
) -> list[StuckWorkflow]:
    """The running sessions, tasks and graphs that are stuck (``is_stuck``), the longest-failing first.

    Temporal leaves such a workflow RUNNING. Two ways to find it, the cheap one first: Temporal
    1.28+ sets the system search attribute ``TemporalReportedProblems`` (``category=...``,
    ``cause=...``) once ``system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute``
    attempts in a row (default 5) failed or timed out, and clears it at the next success, so one
    visibility query lists them; otherwise every running one is described for its pending
    workflow task's attempt. Each one found is then described and the tail of its history read
    for the failure itself.

    ``query``: a visibility filter that narrows the check (``"AgentOwner = 'alice'"``; refused
    with ``InvalidListFilter`` as ``AgentClient.list_sessions`` refuses one). ``scan``: True
    describes every running agentrt workflow (at most ``limit``); False lists only those the
    server flagged with ``TemporalReportedProblems``; None (the default) lists flagged ones
    when the namespace sets that attribute and scans otherwise.
    """
    if query:
        check_list_filter(query)
    if scan is None:
        scan = not await reports_problems(temporal)
    scope = f"ExecutionStatus = 'Running' AND {AGENT_WORKFLOWS}" + (f" AND ({query})" if query else "")
    try:
        listing = temporal.list_workflows(scope if scan else f"{scope} AND {FLAGGED}", limit=limit)
        executions = [execution async for execution in listing]
    except RPCError as err:
        if err.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
        if not scan and REPORTED_PROBLEMS.name in err.message:  # a server before 1.28
            return await find_stuck_workflows(temporal, query, scan=True, limit=limit)
        if query:
            raise InvalidListFilter(query, f"Temporal refused it ({err.message.split(': ')[-1]})") from err
        raise
    gate = asyncio.Semaphore(CONCURRENT_DESCRIBES)

    async def examine(workflow_id: str, run_id: str) -> StuckWorkflow | None:
        async with gate:
            return await failing_workflow_task(temporal, workflow_id, run_id)

    runs = {e.id: e.run_id for e in executions}
    found = await asyncio.gather(*(examine(workflow_id, run_id) for workflow_id, run_id in runs.items()))
    stuck = [s for s in found if s is not None and is_stuck(s.cause, s.attempt)]
    never = datetime.max.replace(tzinfo=timezone.utc)
    return sorted(stuck, key=lambda s: (s.failing_since or never, s.workflow_id))


async def reports_problems(temporal: Client) -> bool:
    """Whether the namespace sets ``TemporalReportedProblems`` on workflows whose task keeps failing."""
    try:
        request = DescribeNamespaceRequest(namespace=temporal.namespace)
        response = await temporal.workflow_service.describe_namespace(request)
    except RPCError:
        return False
    return response.namespace_info.capabilities.reported_problems_search_attribute


async def failing_workflow_task(temporal: Client, workflow_id: str, run_id: str | None = None) -> StuckWorkflow | None:
    """What is wrong with the workflow's current workflow task when it has failed or timed out
    at least once (its attempt is 2 or more), whether or not that makes it stuck yet; None for a
    workflow that is closed, unknown, not an agentrt workflow, or whose task is not failing."""
    handle = temporal.get_workflow_handle(workflow_id, run_id=run_id)
    try:
        description = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    raw = description.raw_description
    pending = raw.pending_workflow_task
    attributes = description.typed_search_attributes
    reported = attributes.get(AGENT_KIND)
    kind = reported if reported in KIND_NAMES else KINDS.get(description.workflow_type or "")
    failing = raw.HasField("pending_workflow_task") and pending.attempt >= 2
    if description.close_time is not None or not failing or kind is None:
        return None
    run_id = description.run_id
    try:
        cause, message, since = await _last_failure(temporal, workflow_id, run_id)
    except RPCError:  # a history the server will not read backwards: the search attribute's words
        cause, message, since = _reported_failure(attributes.get(REPORTED_PROBLEMS) or [])
    task_queue = description.task_queue or None
    return StuckWorkflow(
        workflow_id=workflow_id, run_id=run_id, kind=kind, owner=attributes.get(SESSION_OWNER),
        session_id=workflow_id.removeprefix(SESSION_ID_PREFIX) if kind == "session" else None, task_queue=task_queue,
        attempt=pending.attempt, failing_since=since, cause=cause, message=message,
        hint=stuck_hint(cause, workflow_id, task_queue, message),
    )


async def _last_failure(temporal: Client, workflow_id: str, run_id: str) -> tuple[StuckCause, str, datetime | None]:
    """The cause and message of the last failed (or timed out) workflow task in the history, and
    when the first failing task of the run of failures it ends was scheduled; read from the end
    back to the last completed workflow task (at most ``TAIL_EVENTS`` events). After the first
    failure of a task Temporal writes no more ``WorkflowTaskFailed`` events for its retries (they
    are transient; only the attempt counter rises), so the last one in history is the cause."""
    latest: HistoryEvent | None = None
    first_scheduled_id = 0
    since: datetime | None = None
    token = b""
    read = 0
    while read < TAIL_EVENTS:
        page = await temporal.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=temporal.namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
                maximum_page_size=_TAIL_PAGE, next_page_token=token,
            )
        )
        for event in page.history.events:
            read += 1
            if event.event_type == _COMPLETED:
                token = b""
                break
            if event.event_id == first_scheduled_id:
                since = event.event_time.ToDatetime(tzinfo=timezone.utc)
            scheduled_id = _failed_task_scheduled_id(event)
            if scheduled_id is not None:
                latest = latest or event
                first_scheduled_id, since = scheduled_id, None
        else:
            token = page.next_page_token
        if not token:
            break
    if latest is None:
        return "failed", "the workflow task failed; its history holds no failure", None
    cause, message = await task_failure(temporal, latest)
    return cause, message, since


def _failed_task_scheduled_id(event: HistoryEvent) -> int | None:
    """The scheduled event id of the workflow task ``event`` failed or timed out (a timeout of a
    worker's sticky queue does not count: the task goes to the normal queue, no attempt is lost)."""
    if event.event_type == _FAILED:
        return event.workflow_task_failed_event_attributes.scheduled_event_id
    if event.event_type == _TIMED_OUT:
        timed_out = event.workflow_task_timed_out_event_attributes
        if timed_out.timeout_type != TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START:
            return timed_out.scheduled_event_id
    return None


async def task_failure(temporal: Client, event: HistoryEvent) -> tuple[StuckCause, str]:
    """The cause and message of a ``WorkflowTaskFailed`` or ``WorkflowTaskTimedOut`` event: the
    failure's message as the worker wrote it (decrypted when the payload codec encoded it)."""
    if event.event_type == _TIMED_OUT:
        kind = TimeoutType.Name(event.workflow_task_timed_out_event_attributes.timeout_type)
        words = kind.removeprefix("TIMEOUT_TYPE_").lower().replace("_", "-")
        return "timeout", f"the workflow task timed out ({words}): no worker completed it within the task timeout"
    failed = event.workflow_task_failed_event_attributes
    message = await _failure_message(temporal, failed.failure) or WorkflowTaskFailedCause.Name(failed.cause)
    if failed.cause == _NONDETERMINISM or message.startswith("[TMPRL1100]"):
        return "nondeterminism", message
    if failed.cause == _BAD_UPDATE_MESSAGE:
        return "bad_update_message", message
    return "failed", message


async def _failure_message(temporal: Client, failure: Any) -> str:
    if not failure.HasField("encoded_attributes"):
        return str(failure.message)
    copy = type(failure)()
    copy.CopyFrom(failure)
    try:
        return str(await temporal.data_converter.decode_failure(copy))
    except Exception:  # noqa: BLE001 - a key this client lacks: what history holds
        return str(failure.message)


def _reported_failure(problems: Sequence[str]) -> tuple[StuckCause, str, None]:
    """The cause ``TemporalReportedProblems`` names (``category=...``, ``cause=...``), for a
    history that cannot be read; the message is the attribute's own words."""
    words = ", ".join(problems) or "the workflow task fails (no history or reported problem to say why)"
    if "category=WorkflowTaskTimedOut" in problems:
        return "timeout", words, None
    if "cause=WorkflowTaskFailedCauseNonDeterministicError" in problems:
        return "nondeterminism", words, None
    if "cause=WorkflowTaskFailedCauseBadUpdateWorkflowExecutionMessage" in problems:
        return "bad_update_message", words, None
    return "failed", words, None


def stuck_hint(cause: StuckCause, workflow_id: str, task_queue: str | None, message: str = "") -> str:
    """One line on what to do about a workflow stuck for ``cause`` (``message``: the failure's text)."""
    reset = " ".join([
        "temporal workflow reset --workflow-id", quote(workflow_id),
        "--type LastWorkflowTask --reason", quote(f"stuck: {cause}"),
    ])
    terminate = " ".join(["temporal workflow terminate --workflow-id", quote(workflow_id), "--reason", quote(f"stuck: {cause}")])
    give_up = f"if it cannot be saved, end it: {terminate}"
    if cause == "nondeterminism":
        return (
            "the code replaying it is not the code that ran it: deploy the worker build that started it (guard a "
            f"changed command order with workflow.patched); a reset replays it with the code deployed now: {reset}; "
            + give_up
        )
    if cause == "bad_update_message":
        return (
            "the worker answered an update with messages the server refused (code changed under a running workflow, "
            f"as a non-determinism error): deploy the build that started it, or reset it: {reset}; " + give_up
        )
    if cause == "timeout":
        queue = quote(task_queue) if task_queue else "QUEUE"
        return (
            f"no worker completed its workflow task in time: check that a worker polls task queue {queue} "
            f"(temporal task-queue describe --task-queue {queue}) and look at that worker's log"
        )
    if "decoding" in message.lower() or "validation error" in message.lower():
        return (
            "its input or a message to it cannot be decoded (the worker's log has the validation error): "
            "neither a code fix nor a reset helps a workflow started with bad input; " + give_up
        )
    return (
        "its workflow code raises on every try: the worker's log has the traceback; deploy a fix (the task is "
        f"retried by itself; a reset alone runs the same code again, then: {reset}); " + give_up
    )
