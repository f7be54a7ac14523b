"""Stuck workflows found from outside, against the test run's real Temporal dev server: a session
whose workflow code raises on its first task, a task made non-deterministic (run by one worker,
replayed by another whose code issues other commands), a graph whose workflow task no worker
completes, and a healthy one beside them; what ``find_stuck_workflows``, ``agentrt doctor``,
``agentrt session state`` and ``GET /v1/health/stuck`` report of each."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.enums.v1 import WorkflowTaskFailedCause as Cause
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent, WorkflowTaskFailedEventAttributes, WorkflowTaskTimedOutEventAttributes
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import PollWorkflowTaskQueueRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentrt.client import AgentClient, find_stuck_workflows
from agentrt.client._health import REPORTED_PROBLEMS, is_stuck, reports_problems, task_failure
from agentrt.gateway import create_app
from agentrt.schemas import (
    AGENT_KIND,
    AUTONOMOUS_TASK_WORKFLOW,
    SESSION_OWNER,
    SESSION_WORKFLOW,
    TASK_GRAPH_WORKFLOW,
    InvalidListFilter,
    SessionStuck,
    StuckWorkflow,
)
from agentrt.worker import DevServer, StuckWatch

from tests.gateway.test_gateway import auth, gateway_config, serving

# Each stand-in's workflow task times out after a second, so its attempts climb in seconds.
TASK_TIMEOUT = timedelta(seconds=1)
RAISED = "the stand-in's workflow code raises on every try"


@workflow.defn(name=SESSION_WORKFLOW, sandboxed=False)
class RaisingSession:
    """Registered under the session's type name; a plain exception fails the workflow task, not the workflow."""

    @workflow.run
    async def run(self) -> None:
        raise RuntimeError(RAISED)


@workflow.defn(name=AUTONOMOUS_TASK_WORKFLOW, sandboxed=False)
class TaskBefore:
    """The code a task started on: a timer, then nothing."""

    @workflow.run
    async def run(self) -> None:
        await workflow.sleep(3600)

    @workflow.signal
    def poke(self) -> None:
        pass


@workflow.defn(name=AUTONOMOUS_TASK_WORKFLOW, sandboxed=False)
class TaskAfter:
    """The same type changed under the running task: no timer, so replaying its history fails."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal
    def poke(self) -> None:
        pass


@workflow.defn(name="HealthyStandIn", sandboxed=False)
class Healthy:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


@dataclass
class Stuck:
    temporal: Client
    server: DevServer
    owner: str
    scope: str
    session_id: str
    raising: WorkflowHandle
    changed: WorkflowHandle
    timing_out: WorkflowHandle
    healthy: WorkflowHandle
    queues: dict[str, str]


def attributes(owner: str, kind: str | None) -> TypedSearchAttributes:
    pairs = [SearchAttributePair(SESSION_OWNER, owner)]
    if kind is not None:
        pairs.append(SearchAttributePair(AGENT_KIND, kind))
    return TypedSearchAttributes(pairs)


async def until(check: Callable[[], Awaitable[bool]], what: str, seconds: float = 60) -> None:
    """Poll ``check`` every 0.2 s until it holds, at most ``seconds``."""
    for _ in range(int(seconds / 0.2)):
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {seconds:g} s: {what}")


async def attempt(handle: WorkflowHandle) -> int:
    description = await handle.describe()
    return description.raw_description.pending_workflow_task.attempt


async def attempt_is(handle: WorkflowHandle, number: int) -> bool:
    return await attempt(handle) == number


async def attempt_at_least(handle: WorkflowHandle, number: int) -> bool:
    return await attempt(handle) >= number


async def flagged(handle: WorkflowHandle) -> bool:
    return bool((await handle.describe()).typed_search_attributes.get(REPORTED_PROBLEMS))


async def black_hole(temporal: Client, task_queue: str) -> None:
    """Take every workflow task of ``task_queue`` and never answer it (a worker that hangs)."""
    while True:
        await temporal.workflow_service.poll_workflow_task_queue(PollWorkflowTaskQueueRequest(
            namespace=temporal.namespace, task_queue=TaskQueue(name=task_queue), identity="black-hole",
        ))


@pytest.fixture(scope="module")
async def stuck(temporal_server: DevServer) -> AsyncIterator[Stuck]:
    # A client without the agentrt plugin: its workers run the stand-ins only.
    temporal = await Client.connect(temporal_server.address)
    token = uuid.uuid4().hex[:8]
    owner = f"health-{token}"
    queues = {name: f"health-{name}-{token}" for name in ("raising", "changed", "timing-out")}
    session_id = f"h{token}"
    started: list[WorkflowHandle] = []

    async def start(workflow: Any, workflow_id: str, queue: str, kind: str | None) -> WorkflowHandle:
        handle = await temporal.start_workflow(
            workflow, id=workflow_id, task_queue=queues[queue], task_timeout=TASK_TIMEOUT,
            search_attributes=attributes(owner, kind),
        )
        started.append(handle)
        return handle

    hole = asyncio.create_task(black_hole(temporal, queues["timing-out"]))
    try:
        async with Worker(
            temporal, task_queue=queues["changed"], workflows=[TaskBefore], workflow_runner=UnsandboxedWorkflowRunner(),
            max_cached_workflows=0,
        ):
            changed = await start(TaskBefore.run, f"task-h{token}", "changed", "task")
            await until(partial(attempt_is, changed, 0), "the task's first workflow task completed")
        raising_worker = Worker(
            temporal, task_queue=queues["raising"], workflows=[RaisingSession, Healthy],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        changed_worker = Worker(
            temporal, task_queue=queues["changed"], workflows=[TaskAfter], workflow_runner=UnsandboxedWorkflowRunner(),
            max_cached_workflows=0,
        )
        async with raising_worker, changed_worker:
            # A session starts with its owner only: its kind comes from the workflow type.
            raising = await start(RaisingSession.run, f"session-{session_id}", "raising", None)
            timing_out = await start(TASK_GRAPH_WORKFLOW, f"graph-h{token}", "timing-out", "graph")
            healthy = await start(Healthy.run, f"session-ok{token}", "raising", "session")
            await changed.signal(TaskBefore.poke)  # a new workflow task: TaskAfter replays the history
            for handle, least in ((raising, 3), (changed, 2), (timing_out, 3)):
                await until(partial(attempt_at_least, handle, least), f"{handle.id} on attempt {least}")
                await until(partial(flagged, handle), f"{handle.id} flagged with {REPORTED_PROBLEMS.name}")
            await until(partial(attempt_is, healthy, 0), "the healthy workflow's first task completed")
            yield Stuck(
                temporal, temporal_server, owner, f"AgentOwner = '{owner}'", session_id,
                raising, changed, timing_out, healthy, queues,
            )
    finally:
        hole.cancel()
        for handle in started:
            await handle.terminate("test over")


def by_id(found: list[StuckWorkflow]) -> dict[str, StuckWorkflow]:
    return {s.workflow_id: s for s in found}


# ---------------------------------------------------------------- find_stuck_workflows


async def test_a_workflow_whose_code_raises_is_stuck_with_the_exception_s_message(stuck: Stuck) -> None:
    found = by_id(await find_stuck_workflows(stuck.temporal, stuck.scope))[stuck.raising.id]

    assert (found.kind, found.owner, found.session_id, found.cause) == ("session", stuck.owner, stuck.session_id, "failed")
    assert found.message == RAISED
    assert found.attempt >= 3 and found.failing_since is not None
    assert found.task_queue == stuck.queues["raising"]
    assert f"temporal workflow reset --workflow-id {stuck.raising.id} --type LastWorkflowTask" in found.hint


async def test_a_non_determinism_error_is_stuck_with_its_message_and_a_reset_hint(stuck: Stuck) -> None:
    found = by_id(await find_stuck_workflows(stuck.temporal, stuck.scope))[stuck.changed.id]

    assert (found.kind, found.session_id, found.cause) == ("task", None, "nondeterminism")
    assert found.message.startswith("[TMPRL1100] Nondeterminism error: ")
    assert "deploy the worker build that started it" in found.hint
    assert f"temporal workflow reset --workflow-id {stuck.changed.id} --type LastWorkflowTask" in found.hint


async def test_a_workflow_task_no_worker_completes_is_stuck_as_a_timeout(stuck: Stuck) -> None:
    found = by_id(await find_stuck_workflows(stuck.temporal, stuck.scope))[stuck.timing_out.id]

    assert (found.kind, found.cause) == ("graph", "timeout")
    assert "start-to-close" in found.message
    assert f"a worker polls task queue {stuck.queues['timing-out']}" in found.hint


async def test_a_healthy_workflow_is_not_reported_by_the_flag_or_by_a_scan(stuck: Stuck) -> None:
    for scan in (False, True):
        found = by_id(await find_stuck_workflows(stuck.temporal, stuck.scope, scan=scan))
        assert set(found) == {stuck.raising.id, stuck.changed.id, stuck.timing_out.id}, scan


async def test_the_dev_server_flags_a_failing_workflow_task_so_no_scan_is_needed(stuck: Stuck) -> None:
    assert await reports_problems(stuck.temporal)
    problems = (await stuck.changed.describe()).typed_search_attributes.get(REPORTED_PROBLEMS)
    assert problems == ["category=WorkflowTaskFailed", "cause=WorkflowTaskFailedCauseNonDeterministicError"]
    assert (await stuck.healthy.describe()).typed_search_attributes.get(REPORTED_PROBLEMS) is None


async def test_a_scope_that_reaches_outside_its_group_is_refused(stuck: Stuck) -> None:
    with pytest.raises(InvalidListFilter):
        await find_stuck_workflows(stuck.temporal, "AgentOwner = 'x') OR (WorkflowId != ''")


# ---------------------------------------------------------------- the CLI


def cli(stuck: Stuck, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTRT_TEMPORAL_ADDRESS": stuck.server.address, "AGENTRT_PRINCIPAL": stuck.owner}
    env.pop("AGENTRT_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "agentrt.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
    )


async def test_doctor_json_lists_each_stuck_workflow_with_its_cause_and_exits_1(stuck: Stuck, tmp_path: Path) -> None:
    result = await asyncio.to_thread(cli, stuck, tmp_path, "doctor", "--json", "-q", stuck.scope)

    assert result.returncode == 1, result.stderr
    causes = {s["workflow_id"]: s["cause"] for s in json.loads(result.stdout)}
    assert causes == {stuck.raising.id: "failed", stuck.changed.id: "nondeterminism", stuck.timing_out.id: "timeout"}


async def test_doctor_prints_a_line_and_a_hint_per_stuck_workflow(stuck: Stuck, tmp_path: Path) -> None:
    scope = f"{stuck.scope} AND WorkflowId = '{stuck.changed.id}'"
    result = await asyncio.to_thread(cli, stuck, tmp_path, "doctor", "--scan", "-q", scope)

    assert result.returncode == 1, result.stderr
    line, hint = result.stdout.splitlines()
    assert line.startswith(f"{stuck.changed.id}  task  {stuck.owner}  attempt ")
    assert "nondeterminism: [TMPRL1100] Nondeterminism error: " in line
    assert hint.startswith("  hint: ") and "temporal workflow reset" in hint


async def test_doctor_exits_0_when_nothing_is_stuck(stuck: Stuck, tmp_path: Path) -> None:
    result = await asyncio.to_thread(cli, stuck, tmp_path, "doctor", "-q", f"WorkflowId = '{stuck.healthy.id}'")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no stuck workflows")


async def test_session_state_of_a_stuck_session_names_the_session_and_the_cause(stuck: Stuck, tmp_path: Path) -> None:
    result = await asyncio.to_thread(cli, stuck, tmp_path, "session", "state", stuck.session_id)

    assert result.returncode == 1
    assert result.stderr.startswith(f"error: session {stuck.session_id} is stuck: its workflow task fails (failed, attempt ")
    assert RAISED in result.stderr and "run `agentrt doctor`" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- the gateway


async def test_the_gateway_lists_stuck_workflows_to_an_admin_only(stuck: Stuck, tmp_path: Path) -> None:
    client = AgentClient(stuck.temporal, task_queue=f"gw-{uuid.uuid4().hex[:8]}", principal="nobody")
    async with serving(create_app(client, gateway_config(), workspace_root=tmp_path)) as http:
        listed = await http.get("/v1/health/stuck", headers=auth("root"))
        refused = await http.get("/v1/health/stuck", headers=auth("alice"))

    assert listed.status_code == 200, listed.text
    ours = {s["workflow_id"]: s for s in listed.json() if s["owner"] == stuck.owner}
    assert {wid: s["cause"] for wid, s in ours.items()} == {
        stuck.raising.id: "failed", stuck.changed.id: "nondeterminism", stuck.timing_out.id: "timeout",
    }
    assert ours[stuck.raising.id]["message"] == RAISED and ours[stuck.raising.id]["session_id"] == stuck.session_id
    assert refused.status_code == 403


# ---------------------------------------------------------------- causes and the threshold, without a server


def failed_event(cause: int, message: str) -> HistoryEvent:
    return HistoryEvent(
        event_id=9, event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        workflow_task_failed_event_attributes=WorkflowTaskFailedEventAttributes(
            scheduled_event_id=7, cause=cause, failure=Failure(message=message),  # type: ignore[arg-type]
        ),
    )


@pytest.mark.parametrize(
    ("cause", "message", "expected"),
    [
        (Cause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR, "[TMPRL1100] Nondeterminism error: x", "nondeterminism"),
        (Cause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE, "[TMPRL1100] Nondeterminism error: y", "nondeterminism"),
        (Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE, "bad message", "bad_update_message"),
        (Cause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE, "boom", "failed"),
    ],
)
async def test_a_failed_workflow_task_s_cause_is_named_and_its_message_kept(
    temporal_client: Client, cause: int, message: str, expected: str
) -> None:
    assert await task_failure(temporal_client, failed_event(cause, message)) == (expected, message)


async def test_a_failure_without_a_message_is_described_by_its_cause(temporal_client: Client) -> None:
    event = failed_event(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE, "")
    assert await task_failure(temporal_client, event) == (
        "bad_update_message", "WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE",
    )


async def test_a_timed_out_workflow_task_is_a_timeout(temporal_client: Client) -> None:
    event = HistoryEvent(
        event_id=4, event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        workflow_task_timed_out_event_attributes=WorkflowTaskTimedOutEventAttributes(
            scheduled_event_id=2, timeout_type=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
        ),
    )
    cause, message = await task_failure(temporal_client, event)
    assert cause == "timeout" and "(start-to-close)" in message


def test_a_workflow_is_stuck_from_its_third_attempt_or_its_second_for_a_non_determinism_error() -> None:
    assert [is_stuck("failed", n) for n in (1, 2, 3)] == [False, False, True]
    assert [is_stuck("timeout", n) for n in (2, 3)] == [False, True]
    assert [is_stuck("nondeterminism", n) for n in (1, 2)] == [False, True]


# ---------------------------------------------------------------- the worker's log


async def test_a_worker_names_the_stuck_workflows_of_its_task_queue_once_in_its_log(
    stuck: Stuck, caplog: pytest.LogCaptureFixture
) -> None:
    watch = StuckWatch(stuck.temporal, stuck.queues["raising"])
    with caplog.at_level("WARNING", logger="agentrt.worker"):
        named = await watch.check()
        again = await watch.check()
    assert named == [stuck.raising.id]  # the healthy workflow on the same queue is not named
    assert again == []
    lines = [r.getMessage() for r in caplog.records if r.name == "agentrt.worker"]
    assert len(lines) == 1
    assert stuck.raising.id in lines[0] and stuck.queues["raising"] in lines[0] and "agentrt doctor" in lines[0]


async def test_the_state_of_a_stuck_session_is_a_typed_error_naming_it(stuck: Stuck) -> None:
    client = AgentClient(stuck.temporal, task_queue=stuck.queues["raising"], principal=stuck.owner)
    with pytest.raises(SessionStuck) as raised:
        await client.state(stuck.session_id)
    assert raised.value.session_id == stuck.session_id
    assert "agentrt doctor" in str(raised.value)


async def test_a_stuck_session_is_listed_as_stuck(stuck: Stuck) -> None:
    client = AgentClient(stuck.temporal, task_queue=stuck.queues["raising"], principal=stuck.owner)
    listed = {s.session_id: s.status for s in await client.list_sessions()}
    assert listed[stuck.session_id] == "stuck"
    assert listed.get(stuck.healthy.id.removeprefix("session-")) != "stuck"
