"""Cancellation lands wherever the turn is: a model call, a tool call, an approval wait, the queue,
or a cancellation of the whole workflow from Temporal; nothing further runs after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from agentrt.schemas import (
    CancelRequested,
    ModelRequestStarted,
    PermissionRequested,
    RequestRejected,
    SessionArchived,
    SessionCancelled,
    SessionNotFound,
    ToolInvocationFailed,
    ToolInvocationStarted,
    TurnEnded,
)
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script

# Default heartbeat timeout: a cancel must not depend on a short one.
DEFAULTS = {"heartbeat_timeout_seconds": 30.0}


async def turn_events(harness: Harness, sid: str, turn_id: str) -> list:
    page = await harness.client.events(sid)
    return [e for e in page.events if e.turn_id == turn_id]


async def test_cancel_during_a_slow_model_call_ends_the_turn_cancelled_without_the_reply(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "too late", "delay_seconds": 120}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, **DEFAULTS), "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await harness.client.cancel(sid, reason="changed my mind")
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    assert outcome.status == "cancelled"
    assert outcome.error == "cancelled by alice: changed my mind"
    events = await turn_events(harness, sid, started.turn_id)
    assert [type(e).__name__ for e in events if isinstance(e, (CancelRequested, SessionCancelled, TurnEnded))] == [
        "CancelRequested", "SessionCancelled", "TurnEnded",
    ]
    assert not any(e.type == "AssistantMessageCompleted" for e in events)
    receipts = harness.store.usage_receipts(sid)
    assert [r.status for r in receipts] == ["interrupted"]  # the provider call itself was cancelled
    assert (await harness.client.state(sid)).status == "idle"


async def test_cancel_during_a_sleeping_tool_kills_it_and_runs_no_further_model_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 30; echo finished > done.txt"}}]},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, **DEFAULTS)
    started = await harness.client.start(config, "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ToolInvocationStarted))
    await harness.client.cancel(sid)
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    assert outcome.status == "cancelled"
    events = await turn_events(harness, sid, started.turn_id)
    assert sum(isinstance(e, ModelRequestStarted) for e in events) == 1
    failed = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert len(failed) == 1 and "cancelled" in failed[0].error, [(e.type, getattr(e, "error", None)) for e in events]
    assert not (workspace / "done.txt").exists()
    # The transcript stays valid: the call has exactly one result message.
    tool_messages = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert len(tool_messages) == 1 and tool_messages[0].is_error


async def test_cancel_during_an_approval_wait_ends_the_turn_and_withdraws_the_request(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "must not be asked"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, **DEFAULTS), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    assert (await harness.client.state(sid)).status == "awaiting_approval"
    await harness.client.cancel(sid)
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    assert outcome.status == "cancelled"
    view = await harness.client.state(sid)
    assert view.pending_approvals == [] and view.status == "idle"
    assert not (workspace / "a.txt").exists()
    # The cancelled turn reports what its model call spent and the call it asked for, as the session does.
    assert outcome.usage == view.usage and outcome.usage.input_tokens > 0 and outcome.tool_calls == 1
    with pytest.raises(Exception, match="already decided"):
        await harness.client.approve(sid, requested.request.request_id)


async def test_cancel_with_queued_turns_takes_every_queued_turn_with_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 120}, {"text": "second"}, {"text": "third"}])
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, script, **DEFAULTS), "one")
    second = await harness.client.send(sid, "two")
    third = await harness.client.send(sid, "three")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await harness.client.cancel(sid, include_queued=True)
    outcomes = [await harness.client.wait(sid, t.turn_id, timeout_seconds=60) for t in (first, second, third)]
    assert [o.status for o in outcomes] == ["cancelled", "cancelled", "cancelled"]
    assert [o.error for o in outcomes[1:]] == ["cancelled before it started"] * 2
    view = await harness.client.state(sid)
    assert view.queued_turn_ids == [] and view.status == "idle"
    # The session goes on: a new message starts a new turn.
    assert (await harness.client.send(sid, "four")).queued_behind == 0


async def test_cancelling_the_workflow_cancels_the_running_and_queued_turns_and_records_the_end(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 120}, {"text": "second"}])
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, script, **DEFAULTS), "one")
    second = await harness.client.send(sid, "two")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    handle = harness.handle(sid)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    events = harness.store.events(sid)
    ended = {e.turn_id: e.status for e in events if isinstance(e, TurnEnded)}
    assert ended == {first.turn_id: "cancelled", second.turn_id: "cancelled"}
    archived = [e for e in events if isinstance(e, SessionArchived)]
    assert len(archived) == 1 and archived[0].principal == "temporal"
    assert [r.status for r in harness.store.usage_receipts(sid)] == ["interrupted"]


async def test_a_cancel_from_a_stranger_is_refused_with_the_reason_and_the_turn_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done", "delay_seconds": 1}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").cancel(sid, include_queued=True)
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    assert outcome.status == "completed" and outcome.answer == "done"


async def test_a_cancel_with_nothing_running_or_queued_is_refused(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    with pytest.raises(RequestRejected, match="nothing to cancel"):
        await harness.client.cancel(sid)
    assert (await harness.client.send(sid, "still here")).turn_id == "turn-2"


async def test_a_cancel_sent_right_after_start_cancels_the_turn_about_to_run(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Regression: the first turn was still queued (the session was listing its tools) and a
    cancel naming no turn matched nothing; the turn then ran to the end."""
    script = write_script(tmp_path, [{"text": "too late", "delay_seconds": 120}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, **DEFAULTS), "go")
    await harness.client.cancel(sid)
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    assert outcome.status == "cancelled"
    events = harness.store.events(sid)
    assert events[0].type == "SessionInitialized"  # events of the cancel come after it
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_a_cancel_of_everything_right_after_start_records_the_session_first(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Regression: SessionCancelled and TurnEnded of the queued turns were numbered before
    SessionInitialized when the cancel arrived while the session initialised."""
    # Slow enough that the cancel arrives while the first turn runs, however fast the session starts.
    script = write_script(tmp_path, [{"text": "one", "delay_seconds": 60}, {"text": "two"}])
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")
    second = await harness.client.send(sid, "two")
    await harness.client.cancel(sid, include_queued=True)
    outcomes = [await harness.client.wait(sid, t.turn_id, timeout_seconds=60) for t in (first, second)]
    assert [o.status for o in outcomes] == ["cancelled", "cancelled"]
    types = [e.type for e in harness.store.events(sid)]
    assert types[0] == "SessionInitialized"
    assert types.count("TurnEnded") == 2
