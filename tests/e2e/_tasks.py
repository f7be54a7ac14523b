"""Helpers for the autonomous task tests: a client whose tasks run on a virtual clock, scripts with
one section per session, and reads of a task's events and child sessions."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import TimeSkipper

from agentrt.client import AgentClient
from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    SESSION_OWNER,
    SESSION_STATUS,
    AutonomousTaskInput,
    AutonomousTaskResult,
    AutonomousTaskSessionStarted,
    Event,
    TaskConfig,
    session_workflow_id,
    task_workflow_id,
)

if TYPE_CHECKING:
    from agentrt.store import Store
    from tests.conftest import Harness

OWNER = "alice"
# The workflow task timeout ``AgentClient.start_task`` gives a task.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)


def write_task_script(directory: Path, sessions: list[list[dict[str, Any]]], reviews: list[dict[str, Any]] | None = None) -> str:
    """A scripted-model file whose ``sessions[N-1]`` are the replies of a task's session N."""
    path = directory / f"task-{uuid.uuid4().hex[:6]}.json"
    body: dict[str, Any] = {"sessions": [{"turns": turns} for turns in sessions]}
    if reviews is not None:
        body["reviews"] = reviews
    path.write_text(json.dumps(body))
    return str(path)


def write_file(path: str, content: str) -> dict[str, Any]:
    """A scripted reply that calls ``fs.write``."""
    return {"tool_calls": [{"name": "fs.write", "arguments": {"path": path, "content": content}}]}


@dataclass
class TaskRig:
    """Starts tasks through a client wrapped in a ``TimeSkipper``: each task (and every child
    session it starts) gets a virtual clock that skips ahead whenever only timers are pending.
    ``temporal`` is the plain client (workers, histories, describe); ``client`` acts as ``OWNER``
    through the skipper's; ``started`` lists the tasks started here."""

    temporal: Client
    store: Store
    task_queue: str
    skipper: TimeSkipper
    client: AgentClient
    started: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, temporal: Client, store: Store, task_queue: str) -> "TaskRig":
        skipper = TimeSkipper(temporal)
        client = AgentClient(skipper.client, task_queue=task_queue, principal=OWNER, store=store, virtual_clock=True)
        return cls(temporal, store, task_queue, skipper, client)

    @classmethod
    def on(cls, harness: "Harness", task_queue: str | None = None) -> "TaskRig":
        """For the harness's worker (or, with ``task_queue``, a worker process on that queue)."""
        return cls.create(harness.temporal, harness.store, task_queue or harness.task_queue)

    def as_principal(self, principal: str, operators: list[str] | None = None) -> AgentClient:
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=principal, operators=operators, virtual_clock=True)

    def config(self, workspace: Path, script: str, goal: str = "build the thing", **fields: Any) -> TaskConfig:
        """A task owned by ``OWNER`` on the scripted model (fields as ``TaskConfig``'s)."""
        fields.setdefault("task_id", f"t{uuid.uuid4().hex[:10]}")
        return TaskConfig(owner=OWNER, goal=goal, workspace=str(workspace), profile="scripted", script=script, **fields)

    async def start(self, config: TaskConfig, *, skipping: bool = True) -> str:
        """Start ``config`` as ``AgentClient.start_task`` does (its workflow id, task queue, task
        timeout and search attributes) from a whole ``TaskConfig`` (``start_task`` takes no
        ``approval``); ``skipping`` False: on the wall clock until ``skipper.fast_forward``."""
        self.started.append(config.task_id)
        with nullcontext() if skipping else self.skipper.with_time_skipping_disabled():
            await self.skipper.client.start_workflow(
                AUTONOMOUS_TASK_WORKFLOW,
                AutonomousTaskInput(config=config),
                id=task_workflow_id(config.task_id),
                task_queue=self.task_queue,
                task_timeout=WORKFLOW_TASK_TIMEOUT,
                static_summary=f"task {config.task_id} · {config.goal}",
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(SESSION_OWNER, config.owner), SearchAttributePair(SESSION_STATUS, "waiting")]
                ),
            )
        return config.task_id

    def workflow_handles(self) -> list[WorkflowHandle]:
        """The workflows of every task started here: each task's and its child sessions' (from the store)."""
        handles = []
        for task_id in dict.fromkeys(self.started):
            handles.append(self.handle(task_id))
            handles += [self.temporal.get_workflow_handle(session_workflow_id(s)) for s in self.session_ids(task_id).values()]
        return handles

    def handle(self, task_id: str) -> WorkflowHandle:
        return self.temporal.get_workflow_handle(task_workflow_id(task_id))

    def session_ids(self, task_id: str) -> dict[int, str]:
        """The ids the task gave the sessions it started, by number (its stored ``AutonomousTaskSessionStarted``)."""
        return {e.number: e.session_id for e in self.stored_events(task_id) if isinstance(e, AutonomousTaskSessionStarted)}

    async def session_id(self, task_id: str, number: int, timeout: float = 60.0) -> str:
        """The id of the task's session ``number``, once the task has started it (from the store)."""
        started = await self.wait_stored(
            task_id, lambda e: isinstance(e, AutonomousTaskSessionStarted) and e.number == number, timeout
        )
        assert isinstance(started, AutonomousTaskSessionStarted)
        return started.session_id

    def session_handle(self, task_id: str, number: int) -> WorkflowHandle:
        """The workflow of the task's session ``number``; KeyError when the task has not started it."""
        return self.temporal.get_workflow_handle(session_workflow_id(self.session_ids(task_id)[number]))

    async def session_status(self, task_id: str, number: int) -> WorkflowExecutionStatus | None:
        """How the task's session ``number`` stands; None when the task never started it."""
        if number not in self.session_ids(task_id):
            return None
        return (await self.session_handle(task_id, number).describe()).status

    def stored_events(self, task_id: str) -> list[Event]:
        return self.store.task_events(task_id)

    async def wait_stored(self, task_id: str, predicate: Callable[[Event], bool], timeout: float = 60.0) -> Event:
        """Poll the store (not the workflow: a query needs a worker) until one of the task's events matches."""

        async def poll() -> Event:
            while True:
                for event in await asyncio.to_thread(self.stored_events, task_id):
                    if predicate(event):
                        return event
                await asyncio.sleep(0.1)

        return await asyncio.wait_for(poll(), timeout)

    async def wait(self, task_id: str, timeout: float = 60.0) -> AutonomousTaskResult:
        """``AgentClient.wait_task``, bounded by ``timeout`` seconds."""
        return await asyncio.wait_for(self.client.wait_task(task_id), timeout)

    async def wait_status(self, task_id: str, status: str, timeout: float = 60.0) -> None:
        async def poll() -> None:
            while (await self.client.task_status(task_id)).status != status:
                await asyncio.sleep(0.1)

        await asyncio.wait_for(poll(), timeout)


def describe_event(event: Event) -> str:
    """One line per event for a reader: seq, virtual time, type and the fields that matter."""
    keys = {
        "AutonomousTaskCreated": ("schedule", "max_sessions"),
        "AutonomyDecision": ("decision", "source", "seconds", "reason"),
        "AutonomousTaskSessionStarted": ("session_id",),
        "AutonomousTaskSessionEnded": ("session_id", "status", "error"),
        "AutonomousTaskAcceptanceChecked": ("number", "kind", "passed", "detail"),
        "AutonomousTaskWaiting": ("until", "why"),
        "AutonomousTaskFailed": ("reason",),
        "AutonomousTaskCompleted": ("sessions",),
        "AutonomousTaskBudgetExceeded": ("crossing",),
        "AutonomousTaskCancelled": ("principal", "session_id"),
        "AutonomousTaskPaused": ("principal", "reason"),
        "AutonomousTaskResumed": ("principal",),
    }.get(event.type, ())
    fields = []
    for key in keys:
        value = getattr(event, key)
        if value is None:
            continue
        if hasattr(value, "isoformat"):
            value = f"{value:%Y-%m-%d %H:%M:%S}"
        fields.append(f"{key}={value}")
    if event.type == "AutonomousTaskCheckpointed":
        c = event.checkpoint  # type: ignore[attr-defined]
        fields.append(f"session={c.number} status={c.session_status} accepted={c.accepted}")
    if event.type == "AutonomousTaskSessionEnded":
        usage = event.spend.usage  # type: ignore[attr-defined]
        fields.append(f"tokens={usage.input_tokens}+{usage.output_tokens}")
    at = f"{event.at:%Y-%m-%d %H:%M:%S}" if event.at else "-"
    return f"{event.seq:>3}  {at}  {event.type:<32} {' '.join(fields)}"
