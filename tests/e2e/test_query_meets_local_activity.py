"""A query that comes with a workflow task while a local activity runs: the SDK race sessions avoid.

With temporalio 1.35.0, when a query is delivered with a workflow task, the workflow's first
activation schedules a local activity, and that activity finishes while the worker answers the
query, the SDK reports the activity's marker in that workflow task but hands the activity's
result to the workflow only in the next one. Replay hands the result over in the first task,
so what the workflow did after the activity moves to another task. The first test shows the
race on a minimal workflow (it fails the day the SDK fixes it: local activities may come back
then); the second runs a session through the same moment and checks that its history replays,
since sessions run every activity as a regular one (``regular-activities-v1``). The chaos run's
stuck sessions of 2026-12-05 (``tests/histories/sdk-race-*.json``) were this race.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import (
    HandleQueryInput,
    Interceptor,
    Replayer,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from agentrt.activities import build_activities
from agentrt.activities.tools import default_registry
from agentrt.schemas import ModelRequestStarted
from agentrt.worker import AgentrtConfig, AgentrtPlugin
from agentrt.worker import WORKFLOWS as AGENTRT_WORKFLOWS
from tests.conftest import Harness
from tests.e2e._support import session_config, wait_for_event, write_script

# Two sessions the race left stuck in the chaos run of 2026-12-05, as exported then (paths rewritten).
RACE_HISTORIES = Path(__file__).parents[1] / "histories" / "sdk-race"
# How long a held query waits for the test (seconds): under the SDK's two-second deadlock bound.
HOLD_SECONDS = 1.5
# Bound on every wait of these tests (seconds); a wait never comes near it when things work.
BOUND = 60.0


class QueryGate:
    """Holds the next query of a given type inside the worker until the test lets it go, so that
    what the test does meanwhile lands while the worker answers the query."""

    def __init__(self, query_type: str) -> None:
        self.query_type = query_type
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def hold(self, query_type: str) -> None:
        if self.armed and query_type == self.query_type:
            self.armed = False
            self.entered.set()
            self.release.wait(HOLD_SECONDS)

    def interceptor(self) -> Interceptor:
        gate = self

        class Inbound(WorkflowInboundInterceptor):
            def handle_query(self, input: HandleQueryInput) -> Any:
                gate.hold(input.query)
                return super().handle_query(input)

        class GateInterceptor(Interceptor):
            def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
                return Inbound

        return GateInterceptor()


# ---------------------------------------------------------------- the race on a minimal workflow


@activity.defn(name="race.quick")
async def quick() -> None:
    return None


@activity.defn(name="race.slow")
async def slow() -> None:
    await asyncio.sleep(0.5)


@workflow.defn(name="LocalActivityQueryRace", sandboxed=False)
class LocalActivityQueryRace:
    """An activity, then a local activity, then another activity; a signal that writes a note."""

    def __init__(self) -> None:
        self.step = "start"
        self.notes: list[str] = []

    @workflow.run
    async def run(self, queue: str) -> list[str]:
        await workflow.execute_activity("race.slow", task_queue=queue, start_to_close_timeout=timedelta(seconds=30))
        await workflow.execute_local_activity("race.quick", start_to_close_timeout=timedelta(seconds=30))
        self.step = "after the local activity"
        await workflow.execute_activity("race.slow", task_queue=queue, start_to_close_timeout=timedelta(seconds=30))
        return self.notes

    @workflow.signal
    def note(self, text: str) -> None:
        self.notes.append(text)
        workflow.upsert_memo({"note": text})

    @workflow.query
    def where(self) -> str:
        return self.step


# The race needs the query to come with the workflow task; the server sometimes sends it on its own
# after the task instead (then the workflow has the result before it answers). Tries per test:
RACE_ATTEMPTS = 5


async def test_sdk_still_hands_over_a_local_activity_result_a_task_after_its_marker(temporal_server: Any) -> None:
    """The SDK race itself: the day this fails, the SDK reports a local activity's marker and its
    result in the same workflow task again (check its changelog), and local activities may return."""
    client = await Client.connect(temporal_server.address)
    answers = []
    for _ in range(RACE_ATTEMPTS):
        answer, history = await _race_once(client)
        answers.append(answer)
        if answer == "start":  # answered before the workflow saw the result: the race
            replay = await Replayer(workflows=[LocalActivityQueryRace]).replay_workflow(history, raise_on_replay_failure=False)
            assert replay.replay_failure is not None
            assert "Nondeterminism" in str(replay.replay_failure)
            return
    raise AssertionError(f"the race did not show in {RACE_ATTEMPTS} tries (query answers {answers}): has the SDK fixed it?")


async def _race_once(client: Client) -> tuple[str, WorkflowHistory]:
    """One try: the query's answer, and the workflow's history once it ended."""
    queue, activities_queue = f"race-{uuid.uuid4().hex[:8]}", f"race-acts-{uuid.uuid4().hex[:8]}"
    gate = QueryGate("where")
    async with Worker(client, task_queue=activities_queue, activities=[slow]):
        async with Worker(client, task_queue=queue, workflows=[LocalActivityQueryRace], activities=[quick]):
            handle = await client.start_workflow(
                LocalActivityQueryRace.run, activities_queue, id=f"race-{uuid.uuid4().hex}", task_queue=queue
            )
            await _until(lambda: _has_event(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED))
        # No workflow worker now: the activity ends, its workflow task waits, and so does a query.
        await _until(lambda: _has_event(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED))
        query = asyncio.create_task(handle.query(LocalActivityQueryRace.where, rpc_timeout=timedelta(seconds=BOUND)))
        await asyncio.sleep(0.3)  # the query reaches the server before a worker takes the task
        gate.armed = True
        async with Worker(
            client, task_queue=queue, workflows=[LocalActivityQueryRace], activities=[quick],
            interceptors=[gate.interceptor()], max_concurrent_local_activities=1,
        ):
            assert await asyncio.to_thread(gate.entered.wait, BOUND)
            await handle.signal(LocalActivityQueryRace.note, "while the query was answered")
            gate.release.set()
            answer = await asyncio.wait_for(query, BOUND)
            assert await asyncio.wait_for(handle.result(), BOUND) == ["while the query was answered"]
    return answer, await handle.fetch_history()


@pytest.mark.parametrize(
    ("name", "workflow_id", "event_id", "second"),
    [
        ("stuck-update-accepted-after-marker", "session-chaos1-s16", 182, EventType.EVENT_TYPE_MARKER_RECORDED),
        ("stuck-send-after-turn-end", "session-chaos1-s32", 255, EventType.EVENT_TYPE_MARKER_RECORDED),
        # Not this race: no local activity in it (regular-activities-v1); see docs/durability.md, "Still open".
        ("stuck-update-accepted-after-approval-write", "session-chaos1-s9", 181, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
        # 2026-12-07: a worker died in the task after a tool call's failure; the run ran ahead on a fresh
        # worker answering a query, and its task then accepted an update after the held commands.
        ("stuck-update-accepted-after-a-run-ahead-on-a-fresh-worker", "session-chaos1-s15", 581, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
    ],
)
async def test_histories_left_stuck_fail_replay_where_their_last_task_took_an_update_late(
    name: str, workflow_id: str, event_id: int, second: int
) -> None:
    """Their last workflow task holds a search-attribute upsert and a store write (a local activity's
    marker, or a regular activity), then an update the workflow took after the call's result:
    replay hands the workflow the update first and expects it first. The same error stopped every
    later workflow task."""
    history = WorkflowHistory.from_json(workflow_id, (RACE_HISTORIES / f"{name}.json").read_text())
    replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(AgentrtConfig())])
    replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert f"Update machine does not handle this event: HistoryEvent(id: {event_id}, UpsertWorkflowSearchAttributes)" in str(
        replay.replay_failure
    )
    split = [e for e in history.events if e.event_id >= event_id][:2]
    assert [e.event_type for e in split] == [EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, second]


# ---------------------------------------------------------------- a session at the same moment


async def test_session_replays_after_a_query_meets_its_turn_end(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    """A session's turn ends (status, store write, outcome) in a workflow task that came with a
    query, and a message arrives while the worker answers it: the session goes on, its history
    replays, and no activity of it is a local activity."""
    script = write_script(tmp_path, [{"text": "first answer", "delay_seconds": 1.5}, {"text": "second answer"}])
    queue = f"{harness.task_queue}-race"
    client = harness.client_on(queue)
    gate = QueryGate("state")
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    activities = Worker(
        harness.temporal, task_queue=queue, activity_executor=executor,
        activities=build_activities(harness.config, harness.store, default_registry()),
    )
    sid = harness.new_session_id()
    async with activities:
        async with Worker(harness.temporal, task_queue=queue, workflows=list(AGENTRT_WORKFLOWS)):
            config = session_config(client, sid, workspace, script)
            started = await client.start(config, "answer slowly")
            first = asyncio.create_task(client.wait(sid, started.turn_id))  # a wait_turn update, accepted now
            await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted))
            await _until(lambda: _has_update(harness.handle(sid), f"wait-{started.turn_id}"))
        # The model call ends on the activity worker; its workflow task and a state query wait.
        await _until(lambda: _has_event(harness.handle(sid), EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, "provider.complete"))
        query = asyncio.create_task(client.state(sid))
        await asyncio.sleep(0.3)
        gate.armed = True
        async with Worker(
            harness.temporal, task_queue=queue, workflows=list(AGENTRT_WORKFLOWS), interceptors=[gate.interceptor()]
        ):
            assert await asyncio.to_thread(gate.entered.wait, BOUND)
            second = await client.send(sid, "and again")
            gate.release.set()
            await asyncio.wait_for(query, BOUND)
            assert (await asyncio.wait_for(first, BOUND)).answer == "first answer"
            assert (await asyncio.wait_for(client.wait(sid, second.turn_id), BOUND)).answer == "second answer"
            history = await harness.handle(sid).fetch_history()
    executor.shutdown(wait=False)

    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert not [m for m in markers if m.marker_recorded_event_attributes.marker_name == "core_local_activity"]
    replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(AgentrtConfig(database_url=harness.config.database_url), harness.store)])
    replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None


async def _until(check: Any) -> None:
    """Wait (at most ``BOUND`` seconds) until the async ``check()`` is true."""
    async def poll() -> None:
        while not await check():
            await asyncio.sleep(0.05)
    await asyncio.wait_for(poll(), BOUND)


async def _has_event(handle: Any, event_type: int, activity_type: str | None = None) -> bool:
    history: WorkflowHistory = await handle.fetch_history()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    for event in history.events:
        if event.event_type != event_type:
            continue
        if activity_type is None:
            return True
        if scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id) == activity_type:
            return True
    return False


async def _has_update(handle: Any, update_id: str) -> bool:
    history: WorkflowHistory = await handle.fetch_history()
    return any(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        and e.workflow_execution_update_accepted_event_attributes.accepted_request.meta.update_id == update_id
        for e in history.events
    )
