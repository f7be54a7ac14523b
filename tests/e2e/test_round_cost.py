"""What a round costs in Temporal terms (``lean-rounds-v1``, ``lean-start-v1``, ``regular-activities-v1``), read from the workflow's history.

A round is a model call and the tool call it asked for: two activities and two workflow
tasks, as on bare Temporal. Staged events and messages travel with the calls; the store
still gets every event and message, in order. No activity is a local one: a local activity
can race a query in the SDK and leave a history that does not replay
(tests/e2e/test_query_meets_local_activity.py), so a fast read-only tool, the session's
preparation and the turn's last store write are regular activities too.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHandle

from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    QueuedOperation,
    SendMessageInput,
    SessionInitialized,
    SessionInput,
    SessionState,
    TurnEnded,
)
from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.worker import build_worker
from agentrt.workflows.session import SessionWorkflow
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

ROUNDS = 6
# Workflow tasks a turn may add beyond its rounds for reasons of timing, not of its code: an
# update (the client's wait_turn) arriving apart, a workflow task heartbeat on a loaded machine.
INCIDENTAL_TASKS = 3


def _read_rounds(tmp_path: Path, workspace: Path, rounds: int = ROUNDS) -> str:
    for n in range(rounds):
        (workspace / f"file-{n}.txt").write_text(f"file {n}\n" * 50)
    turns = [{"tool_calls": [{"name": "fs.read", "arguments": {"path": f"file-{n}.txt"}}]} for n in range(rounds)]
    return write_script(tmp_path, [*turns, {"text": "read them all"}])


async def _history(harness: Harness, session_id: str) -> list[HistoryEvent]:
    return list((await harness.handle(session_id).fetch_history()).events)


def _scheduled(events: list[HistoryEvent]) -> Counter[str]:
    return Counter(
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )


def _local_activities(events: list[HistoryEvent]) -> Counter[str]:
    """Local activities by type, from their markers (``core_local_activity``, details ``data``)."""
    found: Counter[str] = Counter()
    for e in events:
        if e.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        attributes = e.marker_recorded_event_attributes
        if attributes.marker_name != "core_local_activity":
            continue
        data = json.loads(attributes.details["data"].payloads[0].data)
        found[data["activity_type"]] += 1
    return found


def _describe(events: list[HistoryEvent]) -> str:
    return "history: " + ", ".join(EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in events)


def _workflow_tasks(events: list[HistoryEvent]) -> int:
    return sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)


def _status_upserts(events: list[HistoryEvent]) -> list[dict[str, str]]:
    upserts = []
    for e in events:
        if e.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            continue
        fields = e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        named = {k: json.loads(v.data) for k, v in fields.items() if k in (SESSION_STATUS.name, SESSION_OWNER.name)}
        if named:
            upserts.append(named)
    return upserts


async def _run_turn(harness: Harness, workspace: Path, script: str, **fields: object) -> str:
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, **fields), "read")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed" and outcome.rounds == ROUNDS + 1 and outcome.tool_calls == ROUNDS
    return sid


async def _start_without_a_message(harness: Harness, workspace: Path, tmp_path: Path) -> tuple[str, WorkflowHandle]:
    """A session started as any Temporal client may: plain ``start_workflow``, no message, no search attributes."""
    script = write_script(tmp_path, [{"text": "one"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script)
    handle = await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=harness.task_queue
    )
    return sid, handle


async def test_a_round_is_two_activities_and_two_workflow_tasks(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = await _run_turn(harness, workspace, _read_rounds(tmp_path, workspace), local_tools=False)

    events = await _history(harness, sid)
    # The calls themselves, one preparation before the turn (tools and profile) and one store write
    # at its end (the TurnEnded write); no store write per round.
    assert _scheduled(events) == Counter(
        {"provider.complete": ROUNDS + 1, "tool.execute": ROUNDS, "session.prepare": 1, "store.append": 1}
    )
    assert _local_activities(events) == Counter()
    # Two per round, the final answer's, the start's (the first message is accepted with it), the
    # preparation's and the last write's; before lean-rounds-v1 a round took four.
    assert _workflow_tasks(events) <= 2 * ROUNDS + 4 + INCIDENTAL_TASKS, _describe(events)


async def test_fast_read_only_tools_run_as_regular_activities_even_with_local_tools_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await _run_turn(harness, workspace, _read_rounds(tmp_path, workspace))

    events = await _history(harness, sid)
    assert _scheduled(events)["tool.execute"] == ROUNDS
    assert _local_activities(events) == Counter()
    assert _workflow_tasks(events) <= 2 * ROUNDS + 4 + INCIDENTAL_TASKS, _describe(events)
    results = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert [m.text for m in results] == [f"file {n}\n" * 50 for n in range(ROUNDS)]


async def test_the_store_gets_the_same_events_and_messages_either_way(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = _read_rounds(tmp_path, workspace)
    local = await _run_turn(harness, workspace, script)
    regular = await _run_turn(harness, workspace, script, local_tools=False)

    def shape(sid: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
        events = harness.store.events(sid, 0, 1000)
        messages = harness.store.messages(sid)
        return [(e.seq, e.type) for e in events], [(p, m.role, m.text) for p, m in messages]

    local_events, local_messages = shape(local)
    assert local_events == shape(regular)[0]
    assert local_messages == shape(regular)[1]
    assert [seq for seq, _ in local_events] == list(range(1, len(local_events) + 1))
    assert local_events[-1][1] == "TurnEnded"
    assert [p for p, _, _ in local_messages] == list(range(2 * ROUNDS + 2))


async def test_search_attributes_are_written_only_when_they_change(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "first")
    await harness.client.wait(sid, started.turn_id)
    second = await harness.client.send(sid, "second")
    await harness.client.wait(sid, second.turn_id)

    # Only changes (console-v1: the owner the start set is not written again); a session started
    # with its first message goes straight to running.
    assert _status_upserts(await _history(harness, sid)) == [
        {SESSION_STATUS.name: "running"},
        {SESSION_STATUS.name: "idle"},
        {SESSION_STATUS.name: "running"},
        {SESSION_STATUS.name: "idle"},
    ]
    listed = {s.session_id: s for s in await harness.client.list_sessions()}
    assert listed[sid].owner == OWNER and listed[sid].status == "idle"


async def test_a_session_started_without_search_attributes_gets_them_written(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Any Temporal client may start a session with plain JSON and no search attributes."""
    sid, handle = await _start_without_a_message(harness, workspace, tmp_path)
    sent = await handle.execute_update(SessionWorkflow.send_message, SendMessageInput(text="hi", principal=OWNER))
    outcome = await harness.client.wait(sid, sent.turn_id)
    assert outcome.status == "completed"

    upserts = _status_upserts(await _history(harness, sid))
    assert upserts[0][SESSION_OWNER.name] == OWNER
    # "idle" first when the update came after the start's workflow task, else straight to "running".
    assert [u[SESSION_STATUS.name] for u in upserts] in (["idle", "running", "idle"], ["running", "idle"])
    assert all(SESSION_OWNER.name not in u for u in upserts[1:])


async def test_a_session_started_without_a_message_is_in_the_store_and_idle_at_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, handle = await _start_without_a_message(harness, workspace, tmp_path)
    async with asyncio.timeout(30):
        while not any(s.session_id == sid for s in harness.store.list_sessions(limit=1000)):
            await asyncio.sleep(0.05)
    assert [e.type for e in harness.store.events(sid, 0, 100)] == ["SessionInitialized"]

    sent = await handle.execute_update(SessionWorkflow.send_message, SendMessageInput(text="hi", principal=OWNER))
    assert (await harness.client.wait(sid, sent.turn_id)).status == "completed"
    assert _status_upserts(await _history(harness, sid)) == [
        {SESSION_STATUS.name: "idle", SESSION_OWNER.name: OWNER},
        {SESSION_STATUS.name: "running"},
        {SESSION_STATUS.name: "idle"},
    ]


async def test_a_new_session_records_one_patch_marker_per_patch_since_lean_start(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """lean-start-v1 stands for the three patches before it: one marker (and one TemporalChangeVersion
    upsert) at the start, trajectory-v1, regular-activities-v1 and console-v1 one each beside it;
    context-events-v1 at the first model call (its ContextAssembled); policy-sandbox-v1 and
    policy-decisions-v1 one each at the run's first tool call, not per round."""
    sid = await _run_turn(harness, workspace, _read_rounds(tmp_path, workspace))

    patches = [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in await _history(harness, sid)
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert patches == [
        "lean-start-v1", "trajectory-v1", "regular-activities-v1", "upgrade-at-turn-boundary-v1", "console-v1", "context-events-v1",
        "policy-sandbox-v1", "policy-decisions-v1",
    ]


async def test_a_failed_model_call_leaves_the_turn_complete_in_the_store(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """The events that travelled with a call that failed are written at the turn's end all the same."""
    script = write_script(tmp_path, [{"text": "never"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script).model_copy(update={"script": str(tmp_path / "gone.json")})
    started = await harness.client.start(config, "hello")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "failed"
    types = [e.type for e in harness.store.events(sid, 0, 100)]
    assert types[types.index("TurnStarted"):] == [
        "TurnStarted", "TrajectoryStarted", "UserMessageAdded", "ModelRequestStarted", "TrajectoryCompleted", "TurnEnded"
    ]
    ended = [e for e in harness.store.events(sid, 0, 100) if isinstance(e, TurnEnded)]
    assert ended[0].status == "failed"
    assert [m.role for _, m in harness.store.messages(sid)] == ["user"]
    # The config travelled with the failed call; the turn's end wrote it.
    assert any(s.session_id == sid for s in harness.store.list_sessions(limit=1000))


async def test_a_run_continued_before_its_first_write_still_writes_the_config(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """A first run that continued as new before any store write carries SessionInitialized unwritten:
    the next run writes the config with it (here: that carried state, started directly)."""
    script = write_script(tmp_path, [{"text": "one"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script)
    state = SessionState(
        run=2,
        seq=1,
        turn_counter=1,
        inbox=[QueuedOperation(kind="message", op_id="turn-1", principal=OWNER, text="hi")],
        unflushed_events=[SessionInitialized(seq=1, config=config, tools=[])],
    )
    await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config, state=state), id=f"session-{sid}", task_queue=harness.task_queue
    )

    assert (await harness.client.wait(sid, "turn-1")).status == "completed"
    assert harness.store.session_config(sid) == config
    assert [e.type for e in harness.store.events(sid, 0, 100)][:2] == ["SessionInitialized", "TurnStarted"]


async def test_a_turn_cancelled_before_the_session_started_is_stored_before_its_outcome_is_published(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Two messages and a cancel of the first reach the session in its first workflow task (no
    worker polled before): the cancelled turn's end is written then, not with the second turn's
    first model call, which here waits 30 s."""
    script = write_script(tmp_path, [{"text": "two", "delay_seconds": 30}])
    sid = harness.new_session_id()
    task_queue = f"{harness.task_queue}-late-{sid}"
    config = session_config(harness.client, sid, workspace, script)
    handle = await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=task_queue
    )
    client = AgentClient(harness.temporal, task_queue=task_queue, principal=OWNER)
    sends = [
        asyncio.create_task(handle.execute_update(SessionWorkflow.send_message, SendMessageInput(text=text, principal=OWNER)))
        for text in ("one", "two")
    ]
    await asyncio.sleep(0.5)
    cancel = asyncio.create_task(client.cancel(sid, turn_id="turn-1"))
    await asyncio.sleep(0.5)
    # The store's write lock, held for 3 s from the worker's start: the turn's end cannot be
    # written before then, so its outcome must not be published before then either.
    locked, release = threading.Event(), threading.Event()

    def hold_write_lock() -> None:
        with harness.store.transaction():
            locked.set()
            release.wait(3)

    holder = asyncio.create_task(asyncio.to_thread(hold_write_lock))
    await asyncio.to_thread(locked.wait)
    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=task_queue):
        asyncio.get_running_loop().call_later(3, release.set)
        outcome = await client.wait(sid, "turn-1")
        ended = [e for e in harness.store.events(sid, 0, 100) if isinstance(e, TurnEnded)]
        assert outcome.status == "cancelled"
        assert [(e.turn_id, e.status) for e in ended] == [("turn-1", "cancelled")]
        await asyncio.gather(holder, cancel, *sends)
        await client.cancel(sid)
