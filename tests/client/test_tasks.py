"""``AgentClient``'s task methods and the `agentrt task` CLI against a real Temporal server, with a
stand-in workflow registered under the autonomous task's type name: what the client sends (start
options, summaries, search attributes, update and query names and inputs) and how it reports what
comes back (refusals, a missing task, an ended task). The real workflow's behaviour is tested in
tests/workflows and tests/e2e."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentrt.client import AgentClient
from agentrt.client._tasks import task_details, task_summary
from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    SESSION_OWNER,
    SESSION_STATUS,
    AmendGoalInput,
    AutonomousTaskCreated,
    AutonomousTaskInput,
    AutonomousTaskResult,
    Budget,
    ConfigurationError,
    Event,
    EventsPage,
    EventsQuery,
    RaiseBudgetInput,
    RequestRejected,
    Spend,
    TaskConfig,
    TaskControlInput,
    TaskNotFound,
    TaskSchedule,
    TaskStatus,
    TaskStatusView,
    task_workflow_id,
)
from agentrt.worker import DevServer
from tests._cli_processes import cli_processes


@workflow.defn(name=AUTONOMOUS_TASK_WORKFLOW, sandboxed=False)
class StandInTaskWorkflow:
    """The autonomous task's interface and nothing else: updates change a status, ``cancel`` ends it."""

    @workflow.init
    def __init__(self, input: AutonomousTaskInput) -> None:
        self._config = input.config
        self._status: TaskStatus = "waiting"
        self._goal = input.config.goal
        self._criteria = list(input.config.criteria)
        self._budget = input.config.budget
        self._max_sessions = input.config.max_sessions
        self._paused_by: str | None = None
        self._events: list[Event] = []

    @workflow.run
    async def run(self, input: AutonomousTaskInput) -> AutonomousTaskResult:
        c = input.config
        self._events.append(AutonomousTaskCreated(
            seq=1, at=workflow.now(), task_id=c.task_id, owner=c.owner, goal=c.goal, criteria=c.criteria,
            max_sessions=c.max_sessions, budget=c.budget, schedule=c.schedule.describe(),
        ))
        await workflow.wait_condition(lambda: self._status == "cancelled")
        await workflow.wait_condition(workflow.all_handlers_finished)
        return AutonomousTaskResult(task_id=c.task_id, status=self._status, sessions=0, spend=Spend())

    def _set(self, status: TaskStatus) -> TaskStatusView:
        self._status = status
        workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])
        return self.status()

    def _check(self, principal: str, reason: str | None) -> None:
        if principal != self._config.owner and not (principal in self._config.operators and (reason or "").strip()):
            raise ValueError(f"principal {principal!r} is not the owner of this task")

    @workflow.update
    def pause(self, input: TaskControlInput) -> TaskStatusView:
        self._paused_by = input.principal
        return self._set("paused")

    @pause.validator
    def _validate_pause(self, input: TaskControlInput) -> None:
        self._check(input.principal, input.reason)
        if self._status == "paused":
            raise ValueError("the task is already paused")

    @workflow.update
    def resume(self, input: TaskControlInput) -> TaskStatusView:
        self._paused_by = None
        return self._set("waiting")

    @resume.validator
    def _validate_resume(self, input: TaskControlInput) -> None:
        self._check(input.principal, input.reason)

    @workflow.update
    def nudge(self, input: TaskControlInput) -> TaskStatusView:
        return self._set("running")

    @nudge.validator
    def _validate_nudge(self, input: TaskControlInput) -> None:
        self._check(input.principal, input.reason)

    @workflow.update
    def cancel(self, input: TaskControlInput) -> TaskStatusView:
        return self._set("cancelled")

    @cancel.validator
    def _validate_cancel(self, input: TaskControlInput) -> None:
        self._check(input.principal, input.reason)

    @workflow.update
    def amend_goal(self, input: AmendGoalInput) -> TaskStatusView:
        self._goal = input.goal
        if input.criteria is not None:
            self._criteria = list(input.criteria)
        return self.status()

    @amend_goal.validator
    def _validate_amend_goal(self, input: AmendGoalInput) -> None:
        self._check(input.principal, input.reason)

    @workflow.update
    def raise_budget(self, input: RaiseBudgetInput) -> TaskStatusView:
        self._budget = self._budget.raised(input.budget)
        self._max_sessions = input.max_sessions or self._max_sessions
        return self.status()

    @raise_budget.validator
    def _validate_raise_budget(self, input: RaiseBudgetInput) -> None:
        self._check(input.principal, input.reason)

    @workflow.query
    def status(self) -> TaskStatusView:
        return TaskStatusView(
            task_id=self._config.task_id, owner=self._config.owner, goal=self._goal, criteria=self._criteria,
            status=self._status, sessions=0, max_sessions=self._max_sessions, spend=Spend(), budget=self._budget,
            remaining=self._budget.remaining(Spend()), schedule=self._config.schedule.describe(), paused_by=self._paused_by,
            last_seq=len(self._events),
        )

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return EventsPage(events=[e for e in self._events if e.seq > input.since_seq][: input.limit], last_seq=len(self._events))


class StandIn:
    """A worker of the stand-in workflow on a fresh task queue, and clients for it."""

    def __init__(self, temporal: Client, task_queue: str, server: DevServer, store_url: str) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.server = server
        self.store_url = store_url
        self.client = self.as_principal("alice")

    def as_principal(self, principal: str, **options: object) -> AgentClient:
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=principal, **options)  # type: ignore[arg-type]


@pytest.fixture
async def stand_in(temporal_server: DevServer, store_url: str) -> AsyncIterator[StandIn]:
    # A client without the agentrt plugin: its worker runs the stand-in only, not agentrt's workflows.
    temporal = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    task_queue = f"tasks-{uuid.uuid4().hex[:8]}"
    worker = Worker(temporal, task_queue=task_queue, workflows=[StandInTaskWorkflow], workflow_runner=UnsandboxedWorkflowRunner())
    async with worker:
        yield StandIn(temporal, task_queue, temporal_server, store_url)


async def test_a_task_starts_with_its_summary_details_and_search_attributes(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.as_principal("alice", operators=["ops"], default_profile="fast")
    task_id = await client.start_task(
        "keep the docs in sync with the code", workspace=str(tmp_path), criteria=["no broken links"], every_seconds=21_600,
        accept_command="make docs", budget=Budget(max_tokens=50_000), max_sessions=4,
    )

    description = await stand_in.temporal.get_workflow_handle(task_workflow_id(task_id)).describe()
    assert description.workflow_type == AUTONOMOUS_TASK_WORKFLOW
    assert description.task_queue == stand_in.task_queue
    assert await description.static_summary() == f"task {task_id} · `keep the docs in sync with the code`"
    details = await description.static_details() or ""
    assert "**Schedule**: every 6h" in details and "**Budget**: 50,000 tokens" in details and "`alice`" in details
    assert description.typed_search_attributes.get(SESSION_OWNER) == "alice"
    view = await client.task_status(task_id)
    assert view.goal == "keep the docs in sync with the code" and view.criteria == ["no broken links"]
    assert view.owner == "alice" and view.max_sessions == 4 and view.schedule == "every 6h"
    [created] = (await client.task_events(task_id)).events
    assert isinstance(created, AutonomousTaskCreated) and created.budget == Budget(max_tokens=50_000)
    await client.cancel_task(task_id)


async def test_the_config_carries_the_client_s_profile_operators_and_absolute_paths(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.as_principal("alice", operators=["ops"], default_profile="fast", tool_task_queue="tools")
    task_id = await client.start_task("g", workspace=".", cron="0 9 * * 1-5")

    history = await stand_in.temporal.get_workflow_handle(task_workflow_id(task_id)).fetch_history()
    [started] = [e for e in history.events if e.HasField("workflow_execution_started_event_attributes")]
    payload = started.workflow_execution_started_event_attributes.input.payloads[0]
    config = AutonomousTaskInput.model_validate_json(payload.data).config
    assert config.profile == "fast" and config.operators == ["ops"] and config.tool_task_queue == "tools"
    assert config.workspace == os.path.abspath(".") and config.schedule.cron == "0 9 * * 1-5"
    assert config.owner == "alice"
    await client.cancel_task(task_id)


async def test_a_used_task_id_is_refused_while_running_and_after_it_ended(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    task_id = await client.start_task("g", workspace=str(tmp_path), task_id=f"dup-{uuid.uuid4().hex[:6]}")

    with pytest.raises(RequestRejected, match=f"task {task_id} rejected start: a task with this id is running"):
        await client.start_task("g", workspace=str(tmp_path), task_id=task_id)
    await client.cancel_task(task_id)
    await client.wait_task(task_id)
    with pytest.raises(RequestRejected, match="has ended \\(task ids are not reused\\)"):
        await client.start_task("g", workspace=str(tmp_path), task_id=task_id)


async def test_arguments_the_task_would_refuse_are_refused_before_anything_starts(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    with pytest.raises(RequestRejected, match="schedule: give every_seconds or cron, not both"):
        await client.start_task("g", workspace=str(tmp_path), every_seconds=60, cron="* * * * *", task_id="never-started")
    with pytest.raises(RequestRejected, match="the goal is empty"):
        await client.start_task(" ", workspace=str(tmp_path), task_id="never-started")
    with pytest.raises(RequestRejected, match="max_sessions: Input should be greater than or equal to 1"):
        await client.start_task("g", workspace=str(tmp_path), max_sessions=0, task_id="never-started")
    with pytest.raises(RequestRejected, match="raise_budget needs at least one limit"):
        await client.raise_task_budget("never-started")
    with pytest.raises(TaskNotFound):
        await client.task_status("never-started")


async def test_updates_return_the_status_and_a_refusal_names_the_task_and_the_reason(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    task_id = await client.start_task("g", workspace=str(tmp_path))

    paused = await client.pause_task(task_id, "holiday")
    assert paused.status == "paused" and paused.paused_by == "alice"
    with pytest.raises(RequestRejected, match=f"^task {task_id} rejected pause: the task is already paused$") as caught:
        await client.pause_task(task_id)
    assert caught.value.request == "pause" and caught.value.reason == "the task is already paused"
    assert (await client.resume_task(task_id)).status == "waiting"
    assert (await client.nudge_task(task_id)).status == "running"
    amended = await client.amend_task_goal(task_id, "a better goal", ["fast"])
    assert amended.goal == "a better goal" and amended.criteria == ["fast"]
    raised = await client.raise_task_budget(task_id, Budget(max_tool_calls=9), max_sessions=30)
    assert raised.budget.max_tool_calls == 9 and raised.max_sessions == 30
    with pytest.raises(TaskNotFound) as hidden:  # another owner's task answers as a missing one
        await stand_in.as_principal("mallory").cancel_task(task_id)
    with pytest.raises(TaskNotFound) as missing:
        await stand_in.as_principal("mallory").cancel_task(task_id + "-missing")
    assert str(hidden.value) == str(missing.value).replace("-missing", "")
    assert (await client.cancel_task(task_id)).status == "cancelled"
    result = await client.wait_task(task_id)
    assert result.status == "cancelled" and result.task_id == task_id


async def test_an_update_to_an_ended_task_says_it_ended(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    task_id = await client.start_task("g", workspace=str(tmp_path))
    await client.cancel_task(task_id)
    await client.wait_task(task_id)

    with pytest.raises(RequestRejected, match="the task has ended \\(its workflow completed\\)"):
        await client.nudge_task(task_id)
    assert (await client.task_status(task_id)).status == "cancelled"  # reads still work


async def test_a_missing_task_is_task_not_found_for_every_method(stand_in: StandIn) -> None:
    client = stand_in.client
    calls = [
        client.task_status("nope"), client.task_events("nope"), client.pause_task("nope"), client.cancel_task("nope"),
        client.amend_task_goal("nope", "g"), client.raise_task_budget("nope", max_sessions=3), client.wait_task("nope"),
    ]
    for call in calls:
        with pytest.raises(TaskNotFound, match="no task 'nope' \\(workflow id task-nope\\)"):
            await call


async def test_a_principal_with_a_backslash_lists_nothing_of_another_s(stand_in: StandIn, tmp_path: Path) -> None:
    """Temporal's list filters read a backslash as an escape ('DOMAIN\\user' found 'DOMAINuser''s
    tasks): such a principal's listing is refused with a clear error instead."""
    with pytest.raises(ConfigurationError, match="backslash"):
        await stand_in.as_principal("DOMAIN\\user").list_tasks()


async def test_list_tasks_shows_the_principal_s_tasks_only_and_filters_by_status(stand_in: StandIn, tmp_path: Path) -> None:
    owner = f"lister-{uuid.uuid4().hex[:6]}"
    client = stand_in.as_principal(owner)
    waiting = await client.start_task("g", workspace=str(tmp_path))
    paused = await client.start_task("g", workspace=str(tmp_path))
    await client.pause_task(paused)
    stranger = await stand_in.as_principal(f"other-{owner}").start_task("g", workspace=str(tmp_path))

    async def listed(status: str | None = None) -> dict[str, str]:
        for _ in range(100):  # visibility is eventually consistent
            rows = {t.task_id: t.status for t in await client.list_tasks(status)}
            if (status is None and len(rows) == 2 and "paused" in rows.values()) or (status is not None and rows):
                return rows
            await asyncio.sleep(0.1)
        return rows

    assert await listed() == {waiting: "waiting", paused: "paused"}
    assert await listed("paused") == {paused: "paused"}
    for task_id, c in ((waiting, client), (paused, client), (stranger, stand_in.as_principal(f"other-{owner}"))):
        await c.cancel_task(task_id)


async def test_a_principal_with_a_quote_is_listed_safely(stand_in: StandIn) -> None:
    assert await stand_in.as_principal("o'brien").list_tasks() == []


# ---------------------------------------------------------------- the CLI as a user runs it


async def agentrt(stand_in: StandIn, *args: str, cwd: Path, principal: str = "alice") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AGENTRT_TEMPORAL_ADDRESS": stand_in.server.address,
        "AGENTRT_TASK_QUEUE": stand_in.task_queue,
        "AGENTRT_DATABASE_URL": stand_in.store_url,
        "AGENTRT_PRINCIPAL": principal,
    }
    env.pop("AGENTRT_CONFIG", None)
    return await cli_processes().run(list(args), env=env, cwd=cwd)


async def test_the_cli_starts_steers_lists_and_waits_for_a_task(stand_in: StandIn, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))
    task_id = f"cli-{uuid.uuid4().hex[:6]}"

    started = await agentrt(
        stand_in, "task", "start", "tidy the repo", "--workspace", str(tmp_path), "--script", str(script), "--every", "1h",
        "--budget-tool-calls", "20", "--id", task_id, "--json", cwd=tmp_path,
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"task_id": task_id}

    status = await agentrt(stand_in, "task", "status", task_id, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["status"] == "waiting" and body["schedule"] == "every 1h" and body["budget"]["max_tool_calls"] == 20
    assert body["usage"] == body["spend"]

    refused = await agentrt(stand_in, "task", "pause", task_id, cwd=tmp_path, principal="mallory")
    missing = await agentrt(stand_in, "task", "pause", task_id + "-x", cwd=tmp_path, principal="mallory")
    assert refused.returncode == missing.returncode == 2
    assert refused.stderr == missing.stderr.replace(task_id + "-x", task_id)  # another owner's task reads as missing

    paused = await agentrt(stand_in, "task", "pause", task_id, "--reason", "later", cwd=tmp_path)
    assert paused.returncode == 0 and "now paused" in paused.stdout, paused.stderr

    events = await agentrt(stand_in, "task", "events", task_id, cwd=tmp_path)
    assert events.returncode == 0 and "AutonomousTaskCreated" in events.stdout and "tidy the repo" in events.stdout

    cancelled = await agentrt(stand_in, "task", "cancel", task_id, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    waited = await agentrt(stand_in, "task", "wait", task_id, "--json", cwd=tmp_path)
    assert waited.returncode == 1 and json.loads(waited.stdout)["status"] == "cancelled"

    missing = await agentrt(stand_in, "task", "status", "no-such-task", cwd=tmp_path)
    assert missing.returncode == 2 and "no task 'no-such-task'" in missing.stderr


async def test_task_start_names_the_missing_worker(temporal_server: DevServer, store_url: str, tmp_path: Path) -> None:
    temporal = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    nobody = StandIn(temporal, f"idle-{uuid.uuid4().hex[:8]}", temporal_server, store_url)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))

    result = await agentrt(nobody, "task", "start", "g", "-w", str(tmp_path), "--script", str(script), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "the task waits until one runs" in result.stderr
    task_id = result.stdout.split()[1]
    await temporal.get_workflow_handle(task_workflow_id(task_id)).terminate("test cleanup", rpc_timeout=timedelta(seconds=10))


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 * * 8", "*/0 * * * *", "H * * * *"])
async def test_a_cron_that_never_fires_is_refused_before_anything_starts(harness: Harness, workspace: Path, cron: str) -> None:
    with pytest.raises(RequestRejected, match="cron"):
        await harness.client.start_task("do it", workspace=str(workspace), cron=cron, task_id=f"cron-{uuid.uuid4().hex[:6]}")


# ---------------------------------------------------------------- what operators see in the Temporal UI


def test_the_summary_is_one_line_with_the_goal_cut() -> None:
    config = TaskConfig(task_id="t1", owner="alice", goal="fix\n" + "x" * 200, workspace="/w")
    summary = task_summary(config)
    assert summary.startswith("task t1 · `fix xxx") and "\n" not in summary and len(summary) < 100


def test_the_details_name_goal_criteria_acceptance_schedule_budget_and_owner() -> None:
    config = TaskConfig(
        task_id="t1", owner="alice", goal="ship it", workspace="/w", criteria=["green CI"], max_sessions=4,
        schedule=TaskSchedule(every_seconds=3600), budget=Budget(max_cost_usd=2),
        acceptance={"command": "make test"},  # type: ignore[arg-type]
    )
    details = task_details(config)
    for part in ("**Goal**: `ship it`", "- `green CI`", "command `make test` exits 0", "**Schedule**: every 1h",
                 "**Budget**: $2", "**Max sessions**: 4", "**Owner**: `alice`", "**Workspace**: `/w`"):
        assert part in details
