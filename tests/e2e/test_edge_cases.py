"""Edge cases of SessionWorkflow: cancellation and archive at every step, approvals, wait_turn, restarts.

Each test is a regression test for a failure seen once; its name states the behaviour it guards.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from agentrt.schemas import (
    ApprovalPolicy,
    AssistantMessageCompleted,
    CancelIgnored,
    CancelTurnInput,
    ModelRequestStarted,
    PermissionDecision,
    PermissionRequested,
    RequestRejected,
    SessionInput,
    SessionNotFound,
    SessionState,
    ToolInvocationStarted,
    TurnEnded,
    Usage,
)
from agentrt.client import AgentClient
from agentrt.store import Store
from agentrt.workflows.session import SessionWorkflow
from tests.conftest import OWNER, Harness
from tests.e2e._support import (
    ALLOW_ALL,
    event_types,
    kill_hard,
    session_config,
    wait_for_event,
    worker_process,
    write_script,
)

ASK_ALL = ApprovalPolicy(read_only="ask", idempotent="ask", effectful="ask")


async def wait_for_settled_workflow_task(harness: Harness, session_id: str) -> None:
    for _ in range(300):
        description = await harness.handle(session_id).describe()
        if not description.raw_description.HasField("pending_workflow_task"):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the workflow task never settled")


def assert_transcript_valid(messages: list) -> None:
    """Every assistant tool call is followed by exactly one tool result before the next assistant/user message."""
    open_calls: dict[str, int] = {}
    for _, m in messages:
        if m.role == "tool":
            assert m.tool_call_id in open_calls, f"tool result for unknown/duplicate call {m.tool_call_id}"
            del open_calls[m.tool_call_id]
            continue
        assert not open_calls, f"calls without a result before a {m.role} message: {sorted(open_calls)}"
        if m.role == "assistant":
            open_calls = {c.id: 1 for c in m.tool_calls}
    assert not open_calls, f"calls without a result at the end: {sorted(open_calls)}"




async def test_cancel_turn_while_a_shell_command_runs_ends_the_turn_as_cancelled(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 30"}}]},
        {"text": "carried on regardless"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
    started = await harness.client.start(config, "run it")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ToolInvocationStarted))
    await asyncio.sleep(1.0)
    await harness.client.cancel(sid, reason="stop")

    outcome = await asyncio.wait_for(harness.client.wait(sid, started.turn_id), timeout=60)
    events = (await harness.client.events(sid)).events
    assert outcome.status == "cancelled", (outcome, event_types(events))
    assert not any(isinstance(e, ModelRequestStarted) and e.round == 2 for e in events)


async def test_archive_while_a_shell_command_runs_stops_the_turn_without_further_model_calls(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 30"}}]},
        {"text": "still talking after archive"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
    started = await harness.client.start(config, "run it")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ToolInvocationStarted))
    await asyncio.sleep(1.0)
    await harness.client.archive(sid, reason="bye")
    result = await asyncio.wait_for(harness.handle(sid).result(), timeout=60)
    assert result.status == "archived"
    outcome = await harness.client.wait(sid, started.turn_id)
    events = (await harness.client.events(sid)).events
    assert outcome.status == "cancelled", (outcome, event_types(events))
    assert not any(isinstance(e, ModelRequestStarted) and e.round == 2 for e in events)


async def test_a_cancel_turn_signal_from_a_stranger_is_recorded_and_ignored(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow answer", "delay_seconds": 8}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, heartbeat_timeout_seconds=1.0)
    started = await harness.client.start(config, "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await asyncio.sleep(0.5)
    await harness.handle(sid).signal(
        SessionWorkflow.cancel_turn, CancelTurnInput(principal="mallory", reason="griefing", include_queued=True)
    )
    outcome = await asyncio.wait_for(harness.client.wait(sid, started.turn_id), timeout=60)
    assert outcome.status == "completed", outcome
    ignored = [e for e in harness.store.events(sid) if isinstance(e, CancelIgnored)]
    assert [(e.principal, e.why) for e in ignored] == [("mallory", "not_owner")]


async def test_wait_turn_with_a_negative_timeout_is_rejected_and_the_session_keeps_working(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "first")
    await harness.client.wait(sid, started.turn_id)

    nxt = await harness.client.send(sid, "second")
    bad = asyncio.create_task(harness.client.wait(sid, nxt.turn_id, timeout_seconds=-1))
    try:
        with pytest.raises(RequestRejected):
            await asyncio.wait_for(asyncio.shield(bad), timeout=15)
    finally:
        bad.cancel()
    outcome = await asyncio.wait_for(harness.client.wait(sid, nxt.turn_id), timeout=15)
    assert outcome.answer == "two"


async def test_wait_for_an_unknown_turn_of_an_archived_session_says_the_turn_is_unknown(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    await harness.client.wait(sid, started.turn_id)
    await harness.client.archive(sid)
    await asyncio.wait_for(harness.handle(sid).result(), timeout=30)

    assert (await harness.client.wait(sid, started.turn_id)).answer == "hi"  # known turn: works
    # The session exists (it is archived); "no session" is misleading. Expected: RequestRejected naming the turn.
    with pytest.raises(RequestRejected, match="turn-99"):
        await harness.client.wait(sid, "turn-99")


async def test_starting_an_archived_session_id_again_is_refused_and_loses_nothing(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first answer"}, {"text": "second answer"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script)
    started = await harness.client.start(config, "first message")
    await harness.client.wait(sid, started.turn_id)
    await harness.client.archive(sid)
    await asyncio.wait_for(harness.handle(sid).result(), timeout=30)

    # Restarting under the same id would reuse transcript positions and effect keys: refused.
    with pytest.raises(RequestRejected, match="has ended; start a new session"):
        await harness.client.start(config, "second message")
    users = [m.text for _, m in harness.store.messages(sid) if m.role == "user"]
    assert users == ["first message"]


async def test_cancel_during_reconcile_leaves_a_tool_result_for_the_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Worker dies mid effect -> reconcile request; cancelling the turn then must still close the call."""
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "echo x >> effect.txt; sleep 6"}}]},
        {"text": "done"},
        {"text": "next"},
    ])
    client = harness.client_on(harness.task_queue + "-proc")
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        config = session_config(client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
        started = await client.start(config, "append once")
        await wait_for_event(client, sid, lambda e: isinstance(e, ToolInvocationStarted), timeout=60)
        for _ in range(100):
            if (workspace / "effect.txt").exists():
                break
            await asyncio.sleep(0.1)
        kill_hard(first)
    with worker_process(harness, log):
        await wait_for_event(
            client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile", timeout=90
        )
        assert (workspace / "effect.txt").read_text() == "x\n"  # the ledger stopped a second run
        # Let the workflow task that asked for the reconcile settle first: a signal that lands on a
        # workflow task timed out on the dead worker's sticky queue replays differently in
        # temporalio 1.35 (activation split), an SDK matter this test is not about.
        await wait_for_settled_workflow_task(harness, sid)
        await client.cancel(sid, reason="give up")
        outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=60)
        assert outcome.status == "cancelled"
        messages = harness.store.messages(sid)
    assert_transcript_valid(messages)


async def test_cancelling_a_turn_kills_the_running_shell_command(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    marker = "41.7"
    script = write_script(tmp_path, [{"tool_calls": [{"name": "shell.run", "arguments": {"command": f"sleep {marker}"}}]}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
    started = await harness.client.start(config, "run it")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ToolInvocationStarted))
    await asyncio.sleep(1.5)
    assert _processes_with(f"sleep {marker}"), "the command should be running"
    await harness.client.cancel(sid)
    outcome = await asyncio.wait_for(harness.client.wait(sid, started.turn_id), timeout=60)
    assert outcome.status == "cancelled"
    await asyncio.sleep(4.0)  # TERM grace is 2 s
    leftovers = _processes_with(f"sleep {marker}")
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert leftovers == []


def _processes_with(needle: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline and "pytest" not in cmdline:
            found.append(int(name))
    return found


async def test_a_cancelled_queued_turn_gets_a_turn_ended_event(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 2}, {"text": "three"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")
    second = await harness.client.send(sid, "two")
    third = await harness.client.send(sid, "three")
    await harness.client.cancel(sid, turn_id=second.turn_id)
    assert (await harness.client.wait(sid, second.turn_id)).status == "cancelled"
    await harness.client.wait(sid, third.turn_id)
    ended = {e.turn_id for e in (await harness.client.events(sid)).events if isinstance(e, TurnEnded)}
    assert ended == {started.turn_id, second.turn_id, third.turn_id}


async def test_start_with_an_empty_first_message_leaves_no_running_session(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    sid = harness.new_session_id()
    with pytest.raises(RequestRejected, match="empty"):
        await harness.client.start(session_config(harness.client, sid, workspace, script), "   ")
    # The caller was told "rejected", but a session workflow was started and now idles forever.
    with pytest.raises(SessionNotFound):
        await harness.client.state(sid)




async def test_deny_one_and_grant_another_call_of_the_same_response(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}},
            {"name": "fs.write", "arguments": {"path": "b.txt", "content": "b"}},
        ]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.request_id == "req-2")
    state = await harness.client.state(sid)
    assert [r.request_id for r in state.pending_approvals] == ["req-1", "req-2"]
    await harness.client.approve(sid, "req-2")
    await asyncio.sleep(0.5)
    assert not (workspace / "b.txt").exists()  # nothing runs until the whole batch is decided
    await harness.client.deny(sid, "req-1", reason="no a")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert not (workspace / "a.txt").exists() and (workspace / "b.txt").read_text() == "b"
    messages = harness.store.messages(sid)
    assert_transcript_valid(messages)
    tools = [m for _, m in messages if m.role == "tool"]
    assert [m.tool_call_id for m in tools] == ["call_0_0", "call_0_1"]
    assert tools[0].is_error and not tools[1].is_error


async def test_decision_before_the_request_exists_is_ignored_and_a_later_one_counts(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"text": "thinking", "delay_seconds": 1.5},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")
    with pytest.raises(RequestRejected):  # too early: the decide update rejects an unknown request
        await harness.client.approve(sid, "req-1")
    await harness.client.wait(sid, first.turn_id)
    second = await harness.client.send(sid, "two")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    assert (await harness.client.state(sid)).status == "awaiting_approval"
    await harness.client.approve(sid, "req-1")
    assert (await harness.client.wait(sid, second.turn_id)).status == "completed"
    assert (workspace / "a.txt").read_text() == "a"


async def test_archive_while_awaiting_approval_cancels_the_turn_and_closes_the_calls(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.read", "arguments": {"path": "README.md"}},
            {"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}},
        ]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    queued = await harness.client.send(sid, "later")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.archive(sid, reason="bye")
    result = await asyncio.wait_for(harness.handle(sid).result(), timeout=30)
    assert result.status == "archived"
    assert (await harness.client.wait(sid, started.turn_id)).status == "cancelled"
    assert (await harness.client.wait(sid, queued.turn_id)).status == "cancelled"
    assert not (workspace / "a.txt").exists()
    assert_transcript_valid(harness.store.messages(sid))


async def test_cancel_during_approval_leaves_a_valid_transcript_and_the_next_turn_runs(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.list", "arguments": {}},
            {"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}},
            {"name": "nope.tool", "arguments": {}},
        ]},
        {"text": "next turn answer"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.cancel(sid, turn_id=started.turn_id, reason="nah")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "cancelled" and "nah" in (outcome.error or "")
    state = await harness.client.state(sid)
    assert state.pending_approvals == [] and state.status == "idle"
    with pytest.raises(RequestRejected):  # late: rejected (the message says "already decided")
        await harness.client.approve(sid, "req-1")
    nxt = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, nxt.turn_id)).answer == "next turn answer"
    assert not (workspace / "a.txt").exists()
    assert_transcript_valid(harness.store.messages(sid))


async def test_cancel_active_turn_with_several_queued_runs_the_rest_in_order(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "B"},
        {"text": "C"},
    ])
    sid = harness.new_session_id()
    a = await harness.client.start(session_config(harness.client, sid, workspace, script), "a")
    b = await harness.client.send(sid, "b")
    c = await harness.client.send(sid, "c")
    assert c.queued_behind == 2
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    with pytest.raises(RequestRejected, match="unknown turn 'turn-99'"):
        await harness.client.cancel(sid, turn_id="turn-99")
    await harness.client.cancel(sid, turn_id=c.turn_id)  # queued: removed
    await harness.client.cancel(sid)  # the active one
    assert (await asyncio.wait_for(harness.client.wait(sid, a.turn_id), 60)).status == "cancelled"
    assert (await asyncio.wait_for(harness.client.wait(sid, b.turn_id), 60)).answer == "B"
    assert (await harness.client.wait(sid, c.turn_id)).status == "cancelled"
    with pytest.raises(RequestRejected, match="has already ended"):
        await harness.client.cancel(sid, turn_id=a.turn_id)
    d = await harness.client.send(sid, "d")
    assert (await asyncio.wait_for(harness.client.wait(sid, d.turn_id), 60)).answer == "C"
    messages = harness.store.messages(sid)
    assert [m.text for _, m in messages if m.role == "user"] == ["a", "b", "d"]
    assert_transcript_valid(messages)


async def test_wait_turn_for_an_unknown_turn_of_a_running_session_is_rejected(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    await harness.client.wait(sid, started.turn_id)
    for bad in ("turn-2", "turn-0", "nonsense"):
        with pytest.raises(RequestRejected, match="unknown turn"):
            await harness.client.wait(sid, bad)
    pending = await harness.client.wait(sid, started.turn_id, timeout_seconds=0.1)
    assert pending.status == "completed"


async def test_a_rejected_update_is_a_non_retryable_request_rejected_error_for_any_temporal_client(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await harness.handle(sid).execute_update(
            SessionWorkflow.decide, PermissionDecision(request_id="req-9", decision="grant", principal="alice")
        )
    cause = raised.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "RequestRejected" and cause.non_retryable
    assert cause.message == "no pending request req-9 in this session"
    assert (await harness.client.state(sid)).turns_completed == 1


async def test_wait_with_a_store_rejects_what_the_session_rejects_even_with_no_time_to_wait(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """A client with the store reads a turn's end there first; what is not there is still checked
    with the session, so an unknown turn or session is an error, not a ``pending``."""
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [{"text": "hi"}])
    sid = harness.new_session_id()
    started = await client.start(session_config(client, sid, workspace, script), "hello")
    assert (await client.wait(sid, started.turn_id)).answer == "hi"

    for timeout in (0, 0.5, None):
        with pytest.raises(RequestRejected, match="unknown turn"):
            await client.wait(sid, "turn-7", timeout_seconds=timeout)
        with pytest.raises(SessionNotFound):
            await client.wait("no-such-session", "turn-1", timeout_seconds=timeout)
    assert (await client.wait(sid, started.turn_id, timeout_seconds=0)).answer == "hi"


async def test_wait_with_a_store_it_cannot_read_asks_the_session_instead(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    broken = Store.open(f"sqlite:///{tmp_path / 'broken.db'}")
    with broken.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE events")
    try:
        client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=broken)
        script = write_script(tmp_path, [{"text": "hi"}, {"text": "again"}])
        sid = harness.new_session_id()
        started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")

        assert (await client.wait(sid, started.turn_id)).answer == "hi"
        assert (await client.wait(sid, started.turn_id, timeout_seconds=0)).answer == "hi"
        with pytest.raises(RequestRejected, match="unknown turn"):
            await client.wait(sid, "turn-7", timeout_seconds=0)
    finally:
        broken.close()


async def test_wait_with_a_store_counts_a_cancelled_turn_s_tool_calls_and_tokens_as_the_session_does(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    script = write_script(
        tmp_path, [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "unreached"}]
    )
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "write")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.cancel(sid)

    from_session = await harness.client.wait(sid, started.turn_id)
    from_store = await client.wait(sid, started.turn_id)
    assert from_session.status == from_store.status == "cancelled"
    assert from_store == from_session
    assert from_store.tool_calls == 1 and from_store.usage.input_tokens > 0


async def test_a_workflow_whose_id_is_not_its_sessions_fails_and_writes_nothing_into_that_session(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Any Temporal client may start a SessionWorkflow of any id; one whose config names another
    session (here with a carried state forging that session's turn end) must not write into it."""
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "x.txt", "content": "x"}}]}])
    sid = harness.new_session_id()
    config = session_config(client, sid, workspace, script)
    started = await client.start(config, "go")
    await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
    stored = len(harness.store.events(sid, 0, 1000))

    forged = SessionState(
        seq=100_002,
        unflushed_events=[
            AssistantMessageCompleted(seq=100_001, turn_id=started.turn_id, round=1, text="FORGED", tool_calls=0, usage=Usage(), position=99),
            TurnEnded(seq=100_002, turn_id=started.turn_id, status="completed", rounds=1, usage=Usage()),
        ],
    )
    intruder = await harness.temporal.start_workflow(
        SessionWorkflow.run,
        SessionInput(config=config.model_copy(update={"owner": "mallory"}), state=forged),
        id=f"mallory-{sid}",
        task_queue=harness.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await intruder.result()
    assert isinstance(failed.value.cause, ApplicationError) and failed.value.cause.type == "SessionIdMismatch"
    assert f"session-{sid}" in str(failed.value.cause)

    written = harness.store.events(sid, 0, 1000)  # the session's own events may still arrive meanwhile
    assert len(written) >= stored and max(e.seq for e in written) < 100_000
    assert not any(getattr(e, "text", None) == "FORGED" for e in written)
    assert harness.store.session_config(sid).owner == OWNER
    assert (await client.wait(sid, started.turn_id, timeout_seconds=0)).status == "pending"
    await client.cancel(sid)


@pytest.mark.parametrize("with_store", [False, True])
async def test_a_bounded_wait_on_a_session_no_worker_serves_answers_pending_near_its_deadline(
    harness: Harness, workspace: Path, with_store: bool
) -> None:
    from agentrt.schemas import SessionInput

    unserved = f"{harness.task_queue}-nobody"
    client = AgentClient(
        harness.temporal, task_queue=unserved, principal=OWNER, store=harness.store if with_store else None
    )
    config = client.new_config(str(workspace), session_id=harness.new_session_id())
    await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{config.session_id}", task_queue=unserved
    )

    # Without a worker the server holds a query until its RPC deadline (30 s by default): the
    # wait bounds its queries by its own deadline, so it answers within a few seconds of it.
    outcome = await asyncio.wait_for(client.wait(config.session_id, "turn-1", timeout_seconds=2), timeout=20)

    assert outcome.status == "pending"
    await harness.temporal.get_workflow_handle(f"session-{config.session_id}").terminate("test over")
