"""Edges of turn control (``turn-control-v1``): cancels that race turn ends, store writes,
approvals, queued operations and the end of the workflow itself.

A ``StoreGate`` holds one session's store write that matches a predicate until the test
releases it, so a cancel can land exactly while the write is in flight; ``release(lost=True)``
then fails that write for good, as a write cut short by the cancel would, so only what the
workflow writes again reaches the store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, Worker

from agentrt.activities import build_activities
from agentrt.activities.tools import ToolRegistry, default_registry
from agentrt.client import AgentClient, connect
from agentrt.schemas import (
    TOOL_EXECUTE,
    CancelTurnInput,
    CompactRequest,
    ContextCompactionStarted,
    EffectReconciled,
    ModelProfile,
    ModelRequestStarted,
    PermissionDecision,
    PermissionDecisionIgnored,
    PermissionRequested,
    ReconcileDecision,
    RequestRejected,
    SessionArchived,
    SessionContinuedAsNew,
    SessionInput,
    StoreAppendInput,
    ToolInvocationStarted,
    TurnEnded,
    TurnOutcome,
    WaitTurnInput,
)
from agentrt.store import Store
from agentrt.worker import WORKFLOWS, AgentrtConfig, AgentrtPlugin, DevServer, build_worker, workflow_runner
from agentrt.workflows.session import MAX_WAIT_TURN_SECONDS, SessionWorkflow
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script

WAIT = 60  # seconds: only so that a broken session fails the test instead of hanging it


async def signal_cancel(client: AgentClient, session_id: str, **fields: Any) -> None:
    """Signal ``cancel_turn`` as the client's principal: fire-and-forget, as any Temporal client
    may send it (``AgentClient.cancel`` uses the update ``cancel``, which refuses a no-op)."""
    handle = client.temporal.get_workflow_handle(f"session-{session_id}")
    await handle.signal(SessionWorkflow.cancel_turn, CancelTurnInput(principal=client.principal, **fields))


class StoreGate:
    """Holds the first store write of ``session_id`` for which ``holds(batch)`` is true until ``release``."""

    def __init__(self, store: Store, session_id: str, holds: Callable[[StoreAppendInput], bool]) -> None:
        self._append = store.append
        self._session_id = session_id
        self._holds = holds
        self._lost = False
        self.entered = threading.Event()
        self.released = threading.Event()

    def append(self, data: StoreAppendInput, **options: Any) -> None:
        if data.session_id == self._session_id and not self.entered.is_set() and self._holds(data):
            self.entered.set()
            self.released.wait(WAIT)
            if self._lost:
                raise ApplicationError("the held store write was lost", non_retryable=True)
        self._append(data, **options)

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, WAIT), "the held store write never came"

    def release(self, lost: bool = False) -> None:
        self._lost = lost
        self.released.set()


@pytest.fixture
def gates(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Any:
    made: list[StoreGate] = []

    def gate(session_id: str, holds: Callable[[StoreAppendInput], bool]) -> StoreGate:
        made.append(StoreGate(harness.store, session_id, holds))
        monkeypatch.setattr(harness.store, "append", made[-1].append)
        return made[-1]

    yield gate
    for g in made:
        g.release()


def has_event(kind: type) -> Callable[[StoreAppendInput], bool]:
    return lambda batch: any(isinstance(e, kind) for e in batch.events)


async def history_event(handle: WorkflowHandle, event_type: int) -> None:
    """Wait until the workflow's history has an event of ``event_type``."""

    async def poll() -> None:
        while True:
            async for event in handle.fetch_history_events():
                if event.event_type == event_type:
                    return
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), WAIT)


async def cancel_acted_on(harness: Harness, session_id: str) -> None:
    """Wait until the session acted on its workflow's cancel: it wrote ``SessionArchived``.

    The held write is a local activity: the cancel reaches the workflow when the SDK
    heartbeats the workflow task it holds open (at 80% of the task timeout, 8 s by default),
    the held write is abandoned and the session writes its end with a new one.
    """

    async def poll() -> None:
        while not any(isinstance(e, SessionArchived) for e in harness.store.events(session_id)):
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), WAIT)


async def cancelled_workflow_result(handle: WorkflowHandle) -> None:
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), WAIT)
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


# ---------------------------------------------------------------- workflow cancel during a store write


async def test_a_workflow_cancelled_while_a_turn_end_is_written_still_records_the_turn_end_and_the_archive(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    sid = harness.new_session_id()
    gate = gates(sid, has_event(TurnEnded))
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await gate.wait_entered()
    handle = harness.handle(sid)
    await handle.cancel()
    await cancel_acted_on(harness, sid)
    gate.release(lost=True)
    await cancelled_workflow_result(handle)
    events = harness.store.events(sid)
    assert [(e.turn_id, e.status) for e in events if isinstance(e, TurnEnded)] == [(started.turn_id, "completed")]
    assert [e.principal for e in events if isinstance(e, SessionArchived)] == ["temporal"]


async def test_a_workflow_cancelled_while_a_compaction_is_announced_answers_the_compact_caller_and_records_the_archive(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first answer " * 20}, {"text": "second answer " * 20}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "one " * 20)
    await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    sent = await harness.client.send(sid, "two " * 20)
    await harness.client.wait(sid, sent.turn_id, timeout_seconds=WAIT)
    gate = gates(sid, has_event(ContextCompactionStarted))
    compact = asyncio.create_task(harness.client.compact(sid))
    await gate.wait_entered()
    handle = harness.handle(sid)
    await handle.cancel()
    await cancel_acted_on(harness, sid)
    gate.release(lost=True)
    try:
        outcome = await asyncio.wait_for(compact, WAIT)
        assert not outcome.compacted
    except RequestRejected:
        pass  # answered: refused because the session ended
    await cancelled_workflow_result(handle)
    assert [e.principal for e in harness.store.events(sid) if isinstance(e, SessionArchived)] == ["temporal"]


async def test_a_workflow_cancelled_before_its_first_task_ends_canceled_not_failed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "never asked"}])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-later"
    config = session_config(harness.client, sid, workspace, script)
    handle = await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=queue
    )
    await handle.cancel()
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        await cancelled_workflow_result(handle)
    assert [e.principal for e in harness.store.events(sid) if isinstance(e, SessionArchived)] == ["temporal"]


# ---------------------------------------------------------------- requests while a cancelled workflow ends


async def test_a_model_switch_asked_while_a_cancelled_workflow_records_its_end_is_refused_not_left_waiting(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    gate = gates(sid, has_event(SessionArchived))
    handle = harness.handle(sid)
    await handle.cancel()
    await gate.wait_entered()
    switch = asyncio.create_task(harness.client.switch_model(sid, "scripted"))
    await asyncio.wait(
        [switch, asyncio.create_task(history_event(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED))],
        timeout=WAIT,
        return_when=asyncio.FIRST_COMPLETED,
    )
    gate.release()
    with pytest.raises(RequestRejected):
        await asyncio.wait_for(switch, WAIT)
    await cancelled_workflow_result(handle)


async def test_a_message_sent_while_a_cancelled_workflow_records_its_end_is_refused_not_lost(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}, {"text": "never asked"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    gate = gates(sid, has_event(SessionArchived))
    handle = harness.handle(sid)
    await handle.cancel()
    await gate.wait_entered()
    try:
        sent = await asyncio.wait_for(harness.client.send(sid, "are you there?"), WAIT)
    except RequestRejected:
        sent = None
    gate.release()
    await cancelled_workflow_result(handle)
    if sent is not None:  # accepted: then the turn must have an outcome
        outcome = await harness.client.wait(sid, sent.turn_id, timeout_seconds=5)
        assert outcome.status == "cancelled"


async def test_a_workflow_cancelled_while_an_archive_is_written_still_records_the_archive(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    gate = gates(sid, has_event(SessionArchived))
    archived = await harness.client.archive(sid, reason="done with it")
    assert archived.status == "archived"
    await gate.wait_entered()
    handle = harness.handle(sid)
    await handle.cancel()
    await cancel_acted_on(harness, sid)
    gate.release(lost=True)
    try:
        await asyncio.wait_for(handle.result(), WAIT)
    except WorkflowFailureError:
        pass  # ended canceled: the cancel came second, either ending is right
    ends = [e for e in harness.store.events(sid) if isinstance(e, SessionArchived)]
    assert [(e.principal, e.reason) for e in ends] == [("alice", "done with it")]


# ---------------------------------------------------------------- wait_turn


async def test_a_wait_turn_with_a_timeout_beyond_any_timer_is_refused_and_the_session_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first", "delay_seconds": 3}, {"text": "second"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    handle = harness.handle(sid)
    too_long = WaitTurnInput(turn_id=started.turn_id, timeout_seconds=1e14)
    with pytest.raises(WorkflowUpdateFailedError):
        await asyncio.wait_for(handle.execute_update(SessionWorkflow.wait_turn, too_long), WAIT)
    sent = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=WAIT)).answer == "second"


async def test_a_wait_turn_with_a_zero_timeout_on_an_ended_turn_answers_its_outcome(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    assert (await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)).status == "completed"
    polled = await harness.handle(sid).execute_update(
        SessionWorkflow.wait_turn, WaitTurnInput(turn_id=started.turn_id, timeout_seconds=0)
    )
    assert polled.status == "completed" and polled.answer == "first"


async def test_a_stream_of_short_wait_turns_answers_pending_until_the_turn_ends_then_its_outcome(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first", "delay_seconds": 2}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    handle = harness.handle(sid)
    statuses = []

    async def poll() -> None:
        while not statuses or statuses[-1] == "pending":
            timeout = [0, 0.05, 0.3][len(statuses) % 3]
            outcome = await handle.execute_update(
                SessionWorkflow.wait_turn, WaitTurnInput(turn_id=started.turn_id, timeout_seconds=timeout)
            )
            assert not outcome.ask_again
            statuses.append(outcome.status)

    await asyncio.wait_for(poll(), WAIT)
    assert statuses[-1] == "completed" and set(statuses[:-1]) == {"pending"}
    assert (await harness.client.state(sid)).status == "idle"


async def test_a_wait_turn_with_the_longest_timeout_answers_when_the_turn_ends(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first", "delay_seconds": 1}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    waiting = WaitTurnInput(turn_id=started.turn_id, timeout_seconds=MAX_WAIT_TURN_SECONDS)
    outcome = await asyncio.wait_for(harness.handle(sid).execute_update(SessionWorkflow.wait_turn, waiting), WAIT)
    assert outcome.status == "completed" and outcome.answer == "first"


# ---------------------------------------------------------------- cancel and the model call


async def test_a_cancel_during_a_model_call_with_the_default_heartbeat_timeout_cancels_the_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "too late", "delay_seconds": 8}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, heartbeat_timeout_seconds=30.0)
    started = await harness.client.start(config, "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await asyncio.sleep(1)  # the model activity is running and has sent its first heartbeat
    await signal_cancel(harness.client, sid)
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "cancelled"


class HeldToolListing(ToolRegistry):
    """The built-in tools, whose listing (activity ``tools.list``) waits until ``release``."""

    def __init__(self) -> None:
        super().__init__(list(default_registry()._tools.values()))
        self.entered = threading.Event()
        self.released = threading.Event()

    def specs(self, names: list[str] | None = None) -> Any:
        self.entered.set()
        self.released.wait(WAIT)
        return super().specs(names)


async def test_a_workflow_cancelled_while_it_lists_its_tools_ends_canceled_not_failed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "never asked"}])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-listing"
    registry = HeldToolListing()
    config = session_config(harness.client, sid, workspace, script)
    async with build_worker(harness.temporal, harness.config, harness.store, registry, task_queue=queue):
        handle = await harness.temporal.start_workflow(
            SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=queue
        )
        try:
            assert await asyncio.to_thread(registry.entered.wait, WAIT)
            await handle.cancel()
            await cancel_acted_on(harness, sid)
        finally:
            registry.released.set()
        await cancelled_workflow_result(handle)
    assert [e.principal for e in harness.store.events(sid) if isinstance(e, SessionArchived)] == ["temporal"]


async def test_an_archive_asked_after_the_workflow_was_cancelled_is_refused_and_the_workflow_ends_canceled(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    gate = gates(sid, has_event(SessionArchived))
    handle = harness.handle(sid)
    await handle.cancel()
    await gate.wait_entered()
    try:
        with pytest.raises(RequestRejected):
            await asyncio.wait_for(harness.client.archive(sid, reason="tidy up"), WAIT)
    finally:
        gate.release()
    await cancelled_workflow_result(handle)


# ---------------------------------------------------------------- queued operations


async def test_a_workflow_cancelled_while_a_model_switch_waits_behind_a_turn_answers_the_switch(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 60}])
    sid = harness.new_session_id()
    await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    switch = asyncio.create_task(harness.client.switch_model(sid, "scripted"))
    compact = asyncio.create_task(harness.client.compact(sid))
    handle = harness.handle(sid)
    await history_event(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    await handle.cancel()
    for caller in (switch, compact):
        with pytest.raises(RequestRejected):
            await asyncio.wait_for(caller, WAIT)
    await cancelled_workflow_result(handle)
    events = harness.store.events(sid)
    assert [e.status for e in events if isinstance(e, TurnEnded)] == ["cancelled"]
    assert [e.principal for e in events if isinstance(e, SessionArchived)] == ["temporal"]


async def test_cancelling_the_queued_turns_keeps_a_queued_model_switch_and_runs_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 60}, {"text": "never asked"}, {"text": "after"}])
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    second = await harness.client.send(sid, "two")
    switch = asyncio.create_task(harness.client.switch_model(sid, "scripted"))
    third = await harness.client.send(sid, "three")
    await signal_cancel(harness.client, sid, include_queued=True)
    result = await asyncio.wait_for(switch, WAIT)
    assert result.profile == "scripted"
    outcomes = [await harness.client.wait(sid, t.turn_id, timeout_seconds=WAIT) for t in (first, second, third)]
    assert [o.status for o in outcomes] == ["cancelled"] * 3
    view = await harness.client.state(sid)
    assert view.status == "idle" and view.queued_turn_ids == []


# ---------------------------------------------------------------- approvals


async def test_a_workflow_cancel_and_a_grant_landing_together_run_no_tool_and_end_canceled(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-together"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    handle = harness.handle(sid)
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        await client.start(session_config(client, sid, workspace, script), "go")
        requested = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
    # No worker now: the grant and the cancel reach the workflow in one workflow task.
    await handle.signal(
        SessionWorkflow.permission_decision,
        PermissionDecision(request_id=requested.request.request_id, decision="grant", principal=OWNER),
    )
    await handle.cancel()
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        await cancelled_workflow_result(handle)
    assert not (workspace / "a.txt").exists()
    assert TOOL_EXECUTE not in await scheduled_activities(handle)
    events = harness.store.events(sid)
    assert [e.status for e in events if isinstance(e, TurnEnded)] == ["cancelled"]
    assert [e.principal for e in events if isinstance(e, SessionArchived)] == ["temporal"]


async def test_decisions_on_a_request_withdrawn_by_a_cancel_are_refused_or_ignored_and_run_nothing(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "next turn"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await signal_cancel(harness.client, sid)
    assert (await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)).status == "cancelled"
    handle = harness.handle(sid)
    grant = PermissionDecision(request_id=requested.request.request_id, decision="grant", principal=OWNER)
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(SessionWorkflow.decide, grant)
    await handle.signal(SessionWorkflow.permission_decision, grant)
    ignored = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionDecisionIgnored))
    assert ignored.why == "already_decided"
    sent = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=WAIT)).answer == "next turn"
    assert not (workspace / "a.txt").exists()


# ---------------------------------------------------------------- cancels that name turns


async def test_a_cancel_naming_a_turn_that_already_ended_leaves_the_running_turn_alone(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}, {"text": "second", "delay_seconds": 2}])
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")
    await harness.client.wait(sid, first.turn_id, timeout_seconds=WAIT)
    second = await harness.client.send(sid, "two")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.turn_id == second.turn_id)
    await signal_cancel(harness.client, sid, turn_id=first.turn_id)
    await signal_cancel(harness.client, sid, turn_id="turn-99")
    with pytest.raises(RequestRejected, match="has already ended"):
        await harness.client.cancel(sid, turn_id=first.turn_id)
    outcome = await harness.client.wait(sid, second.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "completed" and outcome.answer == "second"
    assert not any(e.type == "CancelRequested" for e in (await harness.client.events(sid)).events)


async def test_a_second_cancel_neither_restarts_nor_renames_the_first_and_the_next_turn_runs(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 30"}}]},
        {"text": "next"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL)
    started = await harness.client.start(config, "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ToolInvocationStarted))
    await harness.client.cancel(sid, reason="first")
    await signal_cancel(harness.client, sid, reason="second")
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "cancelled" and outcome.error == "cancelled by alice: first"
    sent = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=WAIT)).answer == "next"
    events = (await harness.client.events(sid)).events
    assert [e.reason for e in events if e.type == "CancelRequested"] == ["first"]


# ---------------------------------------------------------------- the end of a cancelled session


async def test_a_workflow_cancelled_during_a_turn_that_filled_the_context_runs_no_compaction(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    harness.config.profiles["tiny"] = ModelProfile(name="tiny", provider="scripted", context_window=8_000, max_output_tokens=1_000)
    (workspace / "big.txt").write_text("a line of the big file; " * 1500)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "big.txt"}}]},
        {"text": "slow", "delay_seconds": 60},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"], profile="tiny", approval=ALLOW_ALL)
    await harness.client.start(config, "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.round == 2)
    handle = harness.handle(sid)
    await handle.cancel()
    await cancelled_workflow_result(handle)
    events = harness.store.events(sid)
    assert [e.status for e in events if isinstance(e, TurnEnded)] == ["cancelled"]
    assert not any(isinstance(e, ContextCompactionStarted) for e in events)


async def test_a_workflow_cancel_during_a_turn_records_that_temporal_asked_for_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 60}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    handle = harness.handle(sid)
    await handle.cancel()
    await cancelled_workflow_result(handle)
    turn = [e for e in harness.store.events(sid) if e.turn_id == started.turn_id]
    requested = [e for e in turn if e.type == "CancelRequested"]
    assert [e.principal for e in requested] == ["temporal"]
    assert [e.type for e in turn].index("CancelRequested") < [e.type for e in turn].index("SessionCancelled")


# ---------------------------------------------------------------- continue-as-new

SUGGEST_AFTER_EVENTS = 200


@pytest.fixture(scope="module")
async def low_limit_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    server = DevServer.on_free_ports(
        tmp_path_factory.mktemp("edges-can-server"),
        ["--dynamic-config-value", f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER_EVENTS}"],
    )
    await server.start()
    yield server
    server.stop()


async def history_length(handle: WorkflowHandle) -> int:
    return (await handle.describe()).raw_description.workflow_execution_info.history_length


async def near_continue_as_new(client: AgentClient, handle: WorkflowHandle, replies: int) -> int:
    """Run one-reply turns until one more would bring the run's history within 8 events of the suggestion;
    returns the turns run. A turn's event count varies with timing (about 21-24 here; a waiting client that
    asks again adds an update's events), so the stop is measured from the last turn, not a fixed window."""
    sid = handle.id.removeprefix("session-")
    done, length, step = 1, await history_length(handle), 0
    while not (0 < step and length < SUGGEST_AFTER_EVENTS - 8 <= length + step):
        assert done < replies, "the session never came near the continue-as-new suggestion"
        sent = await client.send(sid, f"q{done}")
        await client.wait(sid, sent.turn_id, timeout_seconds=WAIT)
        done += 1
        before, length = length, await history_length(handle)
        step = length - before  # not positive across a continue-as-new
    return done


async def test_a_message_queued_before_a_model_switch_runs_on_the_old_model_when_continue_as_new_is_due(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    config = AgentrtConfig(
        temporal_address=low_limit_server.address, task_queue=f"edges-{uuid.uuid4().hex[:8]}", database_url=store_url
    )
    config.profiles["big"] = ModelProfile(name="big", provider="scripted", context_window=200_000, max_output_tokens=4_000)
    config.profiles["other"] = ModelProfile(name="other", provider="scripted", context_window=200_000, max_output_tokens=4_000)
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    quick = [{"text": f"quick {i}"} for i in range(60)]
    # Rounds enough that the long turn crosses the suggestion (a round adds about 7 history events).
    slow = [
        *[{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]} for _ in range(5)],
        {"text": "slow turn done", "delay_seconds": 2},
        {"text": "queued message answered"},
    ]
    script = write_script(tmp_path, quick + slow)
    sid = uuid.uuid4().hex[:12]
    handle = temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{sid}")
    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        started = await client.start(session_config(client, sid, workspace, script, profile="big", approval=ALLOW_ALL), "q")
        await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
        done = await near_continue_as_new(client, handle, len(quick))
        # Near the suggestion: a long turn crosses it while a message and then a switch queue behind it.
        write_script(tmp_path, quick[:done] + slow)  # the next replies are the long turn's
        long_turn = await client.send(sid, "long")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.turn_id == long_turn.turn_id)
        queued = await client.send(sid, "queued before the switch")
        switch = asyncio.create_task(client.switch_model(sid, "other"))
        await asyncio.wait_for(switch, WAIT)
        assert (await client.wait(sid, queued.turn_id, timeout_seconds=WAIT)).status == "completed"
        events = [e async for e in client.all_events(sid)]
        replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(config, store)])
        await replayer.replay_workflow(await handle.fetch_history())
    long_end = next(e.seq for e in events if isinstance(e, TurnEnded) and e.turn_id == long_turn.turn_id)
    assert any(isinstance(e, SessionContinuedAsNew) and e.seq > long_end for e in events), "continue-as-new was not due"
    asked = [e.profile for e in events if isinstance(e, ModelRequestStarted) and e.turn_id == queued.turn_id]
    assert asked == ["big"]


# ---------------------------------------------------------------- a tool that finishes while its turn stops


def hold_tool_results(
    harness: Harness, session_id: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Event, threading.Event]:
    """Hold the first tool result the session's tool activity writes until the second event is set."""
    entered, released = threading.Event(), threading.Event()
    put_message = harness.store.put_message

    def held_put_message(sid: str, *args: Any, **options: Any) -> None:
        if sid == session_id and not entered.is_set():
            entered.set()
            released.wait(WAIT)
        put_message(sid, *args, **options)

    monkeypatch.setattr(harness.store, "put_message", held_put_message)
    return entered, released


async def test_the_state_says_cancelling_until_the_tool_in_flight_stops_and_its_result_is_kept(
    harness: Harness, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "must not be asked"},
        {"text": "next turn"},
    ])
    sid = harness.new_session_id()
    entered, released = hold_tool_results(harness, sid, monkeypatch)
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=30.0)
    started = await harness.client.start(config, "go")
    try:
        assert await asyncio.to_thread(entered.wait, WAIT)
        await signal_cancel(harness.client, sid, reason="stop")

        async def cancelling() -> None:
            while (await harness.client.state(sid)).status != "cancelling":
                await asyncio.sleep(0.05)

        await asyncio.wait_for(cancelling(), WAIT)
    finally:
        released.set()
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "cancelled"
    assert (workspace / "a.txt").read_text() == "a"
    tool_results = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert [(m.tool_call_id, m.is_error) for m in tool_results] == [("call_0_0", False)]
    assert (await harness.client.state(sid)).status == "idle"
    sent = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=WAIT)).answer == "must not be asked"


async def test_a_reconcile_answer_landing_with_a_workflow_cancel_reaches_the_effect_ledger(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    # An earlier attempt claimed the call's effect and never recorded it: the outcome is unknown.
    harness.store.claim_effect(f"session-{sid}/turn-1/2/call_0_0", sid, "fs.write")
    queue = harness.task_queue + "-reconcile"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    handle = harness.handle(sid)
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "go")
        requested = await wait_for_event(
            client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile"
        )
    # No worker now: the answer and the cancel reach the workflow in one workflow task.
    await handle.signal(
        SessionWorkflow.reconcile,
        ReconcileDecision(request_id=requested.request.request_id, outcome="applied", principal=OWNER),
    )
    await handle.cancel()
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        await cancelled_workflow_result(handle)
    events = harness.store.events(sid)
    assert [e.outcome for e in events if isinstance(e, EffectReconciled)] == ["applied"]
    assert [e.state for e in harness.store.effects(sid)] == ["applied"]


async def test_an_archive_while_a_cancelled_turn_stops_ends_the_turn_once_and_completes_the_session(
    harness: Harness, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    entered, released = hold_tool_results(harness, sid, monkeypatch)
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=30.0)
    started = await harness.client.start(config, "go")
    try:
        assert await asyncio.to_thread(entered.wait, WAIT)
        await signal_cancel(harness.client, sid, reason="first")
        archived = await asyncio.wait_for(harness.client.archive(sid, reason="second"), WAIT)
        assert archived.status == "archived"
        with pytest.raises(RequestRejected):
            await harness.client.send(sid, "too late")
    finally:
        released.set()
    result = await asyncio.wait_for(harness.handle(sid).result(), WAIT)
    assert result.status == "archived" and result.turns == 1
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "cancelled" and outcome.error == "cancelled by alice: first"
    events = harness.store.events(sid)
    assert [e.status for e in events if isinstance(e, TurnEnded)] == ["cancelled"]
    assert [(e.principal, e.reason) for e in events if isinstance(e, SessionArchived)] == [("alice", "second")]
    assert not any(isinstance(e, ModelRequestStarted) and e.round == 2 for e in events)


class SplitWorkers:
    """A worker for the activities of ``queue`` that keeps running, and workflow workers the test
    starts and stops: what lands while no workflow worker runs reaches the workflow in one task."""

    def __init__(self, harness: Harness, queue: str) -> None:
        self._harness = harness
        self._queue = queue
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        activities = build_activities(harness.config, harness.store, default_registry())
        self._activities = Worker(
            harness.temporal, task_queue=queue, activities=activities, activity_executor=self._executor
        )

    async def __aenter__(self) -> "SplitWorkers":
        await self._activities.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._activities.__aexit__(*exc)
        self._executor.shutdown()

    def workflows(self) -> Worker:
        """Workflows and the local activities they run (store writes, fast tools); no activity tasks."""
        return Worker(
            self._harness.temporal,
            task_queue=self._queue,
            workflows=WORKFLOWS,
            workflow_runner=workflow_runner(),
            activities=build_activities(self._harness.config, self._harness.store, default_registry()),
            activity_executor=self._executor,
            no_remote_activities=True,
        )


async def scheduled_activities(handle: WorkflowHandle) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def last_activity_completed(handle: WorkflowHandle, name: str) -> None:
    """Wait until the latest scheduled activity ``name`` of the workflow completed."""

    async def poll() -> None:
        while True:
            scheduled, completed = None, set()
            async for e in handle.fetch_history_events():
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    if e.activity_task_scheduled_event_attributes.activity_type.name == name:
                        scheduled = e.event_id
                elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    completed.add(e.activity_task_completed_event_attributes.scheduled_event_id)
            if scheduled is not None and scheduled in completed:
                return
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), WAIT)


async def test_a_cancel_landing_with_the_final_reply_ends_that_turn_consistently_and_spares_the_next(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "the answer", "delay_seconds": 1}, {"text": "second"}])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-split"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    handle = harness.handle(sid)
    async with SplitWorkers(harness, queue) as workers:
        async with workers.workflows():
            first = await client.start(session_config(client, sid, workspace, script), "one")
            second = await client.send(sid, "two")
            await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted))
        # No workflow worker: the reply lands, then the cancel; both reach one workflow task.
        await last_activity_completed(handle, "provider.complete")
        await signal_cancel(client, sid, turn_id=first.turn_id, reason="late")
        async with workers.workflows():
            outcome = await client.wait(sid, first.turn_id, timeout_seconds=WAIT)
            following = await client.wait(sid, second.turn_id, timeout_seconds=WAIT)
    assert (outcome.status, outcome.answer) in {("completed", "the answer"), ("cancelled", None)}
    assert following.status == "completed" and following.answer == "second"
    ended = {e.turn_id: e.status for e in harness.store.events(sid) if isinstance(e, TurnEnded)}
    assert ended == {first.turn_id: outcome.status, second.turn_id: "completed"}


async def test_a_cancel_landing_with_the_model_reply_keeps_the_tool_it_asks_for_from_running(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "echo ran > ran.txt"}}], "delay_seconds": 1},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-split"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    handle = harness.handle(sid)
    async with SplitWorkers(harness, queue) as workers:
        async with workers.workflows():
            started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "go")
            await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted))
        # No workflow worker: the reply asking for the tool lands, then the cancel, in one task.
        await last_activity_completed(handle, "provider.complete")
        await signal_cancel(client, sid, reason="stop")
        async with workers.workflows():
            outcome = await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "cancelled"
    assert not (workspace / "ran.txt").exists()
    assert TOOL_EXECUTE not in await scheduled_activities(handle)


async def test_a_cancel_landing_with_a_tool_result_sends_no_further_model_request(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 1"}}]},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-split"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    handle = harness.handle(sid)
    async with SplitWorkers(harness, queue) as workers:
        async with workers.workflows():
            started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "go")
            await wait_for_event(client, sid, lambda e: isinstance(e, ToolInvocationStarted))
        # No workflow worker: the tool's result lands, then the cancel, in one task.
        await last_activity_completed(handle, TOOL_EXECUTE)
        await signal_cancel(client, sid, reason="stop")
        async with workers.workflows():
            outcome = await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    assert outcome.status == "cancelled"
    assert (await scheduled_activities(handle)).count("provider.complete") == 1


async def test_a_workflow_cancel_landing_with_the_write_that_starts_a_compaction_runs_no_summary(
    harness: Harness, gates: Any, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first answer " * 20}, {"text": "second answer " * 20}])
    sid = harness.new_session_id()
    queue = harness.task_queue + "-split"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    handle = harness.handle(sid)
    gate = gates(sid, has_event(ContextCompactionStarted))
    async with SplitWorkers(harness, queue) as workers:
        async with workers.workflows():
            started = await client.start(session_config(client, sid, workspace, script), "one " * 20)
            await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
            sent = await client.send(sid, "two " * 20)
            await client.wait(sid, sent.turn_id, timeout_seconds=WAIT)
            compact = asyncio.create_task(client.compact(sid))
            await gate.wait_entered()
            # The write is a local activity of the workflow task: the cancel reaches the
            # session while it is held, and the session ends without summarising.
            await handle.cancel()
            await cancel_acted_on(harness, sid)
            gate.release()
            try:
                assert not (await asyncio.wait_for(compact, WAIT)).compacted
            except RequestRejected:
                pass  # answered: refused because the session ended
            await cancelled_workflow_result(handle)
    assert "context.compact" not in await scheduled_activities(handle)
    assert [e.principal for e in harness.store.events(sid) if isinstance(e, SessionArchived)] == ["temporal"]


async def test_a_waiter_on_a_queued_turn_keeps_waiting_while_a_compaction_runs_before_continue_as_new(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Waiting ``wait_turn`` calls answer ``ask_again`` only once continue-as-new is at hand: a
    client that asks again at once must not spin on the session while a queued operation runs."""
    config = AgentrtConfig(
        temporal_address=low_limit_server.address, task_queue=f"edges-{uuid.uuid4().hex[:8]}", database_url=store_url
    )
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    quick = [{"text": f"quick answer number {i}"} for i in range(60)]
    # Rounds enough that the long turn crosses the suggestion (a round adds about 7 history events).
    slow = [
        *[{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]} for _ in range(4)],
        {"text": "slow turn done", "delay_seconds": 2},
        {"text": "after the compaction"},
    ]
    script = write_script(tmp_path, quick)
    sid = uuid.uuid4().hex[:12]
    handle = temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{sid}")
    entered, released = threading.Event(), threading.Event()
    put_summary = store.put_summary

    def held_put_summary(session_id: str, *args: Any) -> None:
        if session_id == sid:
            entered.set()
            released.wait(WAIT)
        put_summary(session_id, *args)

    monkeypatch.setattr(store, "put_summary", held_put_summary)
    asked_again = 0

    async def wait_turn(turn_id: str) -> TurnOutcome:
        nonlocal asked_again
        while True:
            outcome = await handle.execute_update(SessionWorkflow.wait_turn, WaitTurnInput(turn_id=turn_id))
            if outcome.status != "pending":
                return outcome
            asked_again += 1

    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        started = await client.start(session_config(client, sid, workspace, script), "q")
        await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
        done = await near_continue_as_new(client, handle, len(quick))
        write_script(tmp_path, quick[:done] + slow)
        long_turn = await client.send(sid, "long")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.turn_id == long_turn.turn_id)
        compact = await handle.start_update(
            SessionWorkflow.compact, CompactRequest(principal=OWNER), wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        queued = await client.send(sid, "after the compaction")
        waiter = asyncio.create_task(wait_turn(queued.turn_id))
        try:
            assert await asyncio.to_thread(entered.wait, WAIT)
            await asyncio.sleep(1.5)  # the compaction is held: a waiter told to ask again would ask again and again
        finally:
            released.set()
        assert (await asyncio.wait_for(compact.result(), WAIT)).compacted
        outcome = await asyncio.wait_for(waiter, WAIT)
        events = [e async for e in client.all_events(sid)]
    assert outcome.status == "completed" and outcome.answer == "after the compaction"
    long_end = next(e.seq for e in events if isinstance(e, TurnEnded) and e.turn_id == long_turn.turn_id)
    assert any(isinstance(e, SessionContinuedAsNew) and e.seq > long_end for e in events), "continue-as-new was not due"
    assert asked_again <= 2
