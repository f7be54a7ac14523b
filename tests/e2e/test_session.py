"""The session workflow end to end on a real Temporal dev server, a real store and real tools."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from agentrt.client import AgentClient
from agentrt.schemas import (
    ModelRequestStarted,
    PermissionDecisionIgnored,
    PermissionRequested,
    RequestRejected,
    SessionNotFound,
    ToolInvocationFailed,
)
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, event_types, session_config, wait_for_event, write_script
from agentrt.worker import temporal_binary


async def test_turn_with_three_tool_calls_across_rounds_completes(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"text": "listing", "tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "NOTES.md", "content": "notes\n"}}]},
        {"text": "all done"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "go")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    assert outcome.answer == "all done"
    assert outcome.rounds == 4
    assert outcome.tool_calls == 3
    assert (workspace / "NOTES.md").read_text() == "notes\n"
    events = (await harness.client.events(sid)).events
    assert event_types(events).count("ToolInvocationCompleted") == 3
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    transcript = harness.store.messages(sid)
    assert [m.role for _, m in transcript] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    assert "Demo project" in transcript[4][1].text


async def test_several_tool_calls_in_one_response_are_all_handled(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.read", "arguments": {"path": "README.md"}},
            {"name": "fs.read", "arguments": {"path": "src/main.py"}},
            {"name": "fs.list", "arguments": {}},
        ]},
        {"text": "read both"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed" and outcome.tool_calls == 3
    tool_results = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert [m.tool_call_id for m in tool_results] == ["call_0_0", "call_0_1", "call_0_2"]
    assert "print('hello')" in tool_results[1].text


async def test_approval_granted_through_the_temporal_cli_runs_the_tool(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "out.txt", "content": "approved\n"}}]},
        {"text": "written"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "write it")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(requested, PermissionRequested)
    assert not (workspace / "out.txt").exists()
    assert (await harness.client.state(sid)).status == "awaiting_approval"

    body = {"request_id": requested.request.request_id, "decision": "grant", "principal": OWNER}
    subprocess.run(
        [temporal_binary(), "workflow", "signal", "--address", harness.server.address,
         "--workflow-id", f"session-{sid}", "--name", "permission_decision", "--input", json.dumps(body)],
        check=True, capture_output=True, timeout=60,
    )

    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert (workspace / "out.txt").read_text() == "approved\n"
    assert "PermissionGranted" in event_types((await harness.client.events(sid)).events)


async def test_denied_approval_tells_the_model_and_skips_the_tool(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "touch ran.txt"}}]},
        {"text": "ok, not running it"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "run it")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.deny(sid, requested.request.request_id, reason="not today")

    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert not (workspace / "ran.txt").exists()
    tool_message = [m for _, m in harness.store.messages(sid) if m.role == "tool"][0]
    assert tool_message.is_error and "denied by alice: not today" in tool_message.text


async def test_decisions_from_strangers_unknown_requests_and_repeats_are_recorded_and_ignored(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "x"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    request_id = requested.request.request_id

    def signal(request: str, decision: str, principal: str) -> dict[str, str]:
        return {"request_id": request, "decision": decision, "principal": principal}

    # Signals (temporal CLI, UI) are recorded and ignored ...
    await harness.handle(sid).signal("permission_decision", signal(request_id, "grant", "mallory"))
    await harness.handle(sid).signal("permission_decision", signal("req-999", "grant", OWNER))
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionDecisionIgnored) and e.why == "unknown_request")
    # ... while the client's update is rejected with the reason, changing nothing.
    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").approve(sid, request_id)
    with pytest.raises(RequestRejected, match="no pending request req-999"):
        await harness.client.approve(sid, "req-999")
    assert (await harness.client.state(sid)).status == "awaiting_approval"
    await harness.client.approve(sid, request_id)
    await harness.handle(sid).signal("permission_decision", signal(request_id, "deny", OWNER))
    with pytest.raises(RequestRejected, match="already decided"):
        await harness.client.deny(sid, request_id)
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    assert (workspace / "a.txt").read_text() == "x"
    ignored = [e for e in (await harness.client.events(sid)).events if isinstance(e, PermissionDecisionIgnored)]
    assert sorted(e.why for e in ignored) == ["already_decided", "not_owner", "unknown_request"]


async def test_message_sent_during_an_approval_wait_runs_after_the_first_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "first.txt", "content": "1"}}]},
        {"text": "first answer"},
        {"text": "second answer"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "first")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    second = await harness.client.send(sid, "second")
    assert second.queued_behind == 1
    assert (await harness.client.state(sid)).queued_turn_ids == [second.turn_id]

    await harness.client.approve(sid, requested.request.request_id)
    first_outcome = await harness.client.wait(sid, started.turn_id)
    second_outcome = await harness.client.wait(sid, second.turn_id)

    assert (first_outcome.answer, second_outcome.answer) == ("first answer", "second answer")
    users = [m.text for _, m in harness.store.messages(sid) if m.role == "user"]
    assert users == ["first", "second"]


async def test_cancel_turn_during_a_slow_model_call_ends_the_turn_and_the_session_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"text": "too slow", "delay_seconds": 300},
        {"text": "fast answer"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "slow")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await asyncio.sleep(0.5)  # let the activity start and heartbeat
    await harness.client.cancel(sid, reason="changed my mind")

    outcome = await asyncio.wait_for(harness.client.wait(sid, started.turn_id), timeout=60)
    assert outcome.status == "cancelled"
    assert "changed my mind" in (outcome.error or "")
    assert (await harness.client.state(sid)).status == "idle"
    assert [m.role for _, m in harness.store.messages(sid)] == ["user"]

    # The session goes on: the next message starts a model call, and archive cancels it too.
    nxt = await harness.client.send(sid, "again")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.turn_id == nxt.turn_id)
    await harness.client.archive(sid, reason="done for today")
    result = await asyncio.wait_for(harness.handle(sid).result(), timeout=60)
    assert result.status == "archived"
    assert (await harness.client.wait(sid, nxt.turn_id)).status == "cancelled"


async def test_send_message_rejects_empty_text_strangers_and_archived_sessions(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    await harness.client.wait(sid, started.turn_id)

    with pytest.raises(RequestRejected, match="message text is empty"):
        await harness.client.send(sid, "   ")
    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").send(sid, "let me in")
    state = await harness.client.state(sid)
    assert state.turns_completed == 1 and state.queued_turn_ids == []

    await harness.client.archive(sid)
    with pytest.raises(RequestRejected, match="archived"):
        await harness.client.send(sid, "too late")
    result = await harness.handle(sid).result()
    assert result.status == "archived" and result.turns == 1


async def test_unknown_tool_and_malformed_arguments_go_back_to_the_model(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.delete_everything", "arguments": {}},
            {"name": "fs.read", "arguments_raw": "{\"path\": \"README.md\""},
            {"name": "fs.read", "arguments": {"path": 42}},
            {"name": "fs.read", "arguments": {"path": "../../etc/passwd"}},
        ]},
        {"text": "recovered"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed" and outcome.answer == "recovered"
    failures = [e for e in (await harness.client.events(sid)).events if isinstance(e, ToolInvocationFailed)]
    assert [f.reason for f in failures] == ["unknown_tool", "invalid_arguments", "invalid_arguments", "tool_error"]
    assert "available tools" in failures[0].error
    assert "not a JSON object" in failures[1].error
    assert "outside the workspace" in failures[3].error
    results = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert len(results) == 4 and all(m.is_error for m in results)


async def test_round_limit_ends_the_turn_with_a_typed_outcome(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"tool_calls": [{"name": "fs.list", "arguments": {}}]}] * 3)
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, max_rounds_per_turn=3)
    started = await harness.client.start(config, "loop")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "round_limit"
    assert outcome.rounds == 3 and outcome.tool_calls == 3


async def test_approval_timeout_denies_the_call(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "late.txt", "content": "x"}}]},
        {"text": "gave up"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval_timeout_seconds=1.0)
    started = await harness.client.start(config, "go")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert not (workspace / "late.txt").exists()
    denied = [e for e in (await harness.client.events(sid)).events if e.type == "PermissionDenied"]
    assert denied and denied[0].principal == "system"


async def test_a_provider_configuration_error_fails_the_turn_but_not_the_session(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, str(tmp_path / "missing.json"))
    started = await harness.client.start(config, "go")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "failed"
    assert "missing.json" in (outcome.error or "")
    assert (await harness.client.state(sid)).status == "idle"


async def test_sessions_run_concurrently(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "slow one", "delay_seconds": 2}])
    fast = write_script(tmp_path, [{"text": "fast one"}], name="fast.json")
    slow_id, fast_id = harness.new_session_id(), harness.new_session_id()
    slow = await harness.client.start(session_config(harness.client, slow_id, workspace, script), "a")
    quick = await harness.client.start(session_config(harness.client, fast_id, workspace, fast), "b")
    fast_outcome = await harness.client.wait(fast_id, quick.turn_id)
    assert fast_outcome.answer == "fast one"
    assert (await harness.client.state(slow_id)).status == "running"
    assert (await harness.client.wait(slow_id, slow.turn_id)).answer == "slow one"


async def test_following_a_turn_s_deltas_ends_when_its_session_is_terminated_mid_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # No TurnEnded is ever written; the session's closed run still answers the query with the turn running.
    script = write_script(tmp_path, [{"text": "never shown", "delay_seconds": 60}])
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    sid = harness.new_session_id()
    started = await client.start(session_config(client, sid, workspace, script), "go")
    await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await harness.handle(sid).terminate("an operator ended it")
    async with asyncio.timeout(30):
        assert [d async for d in client.deltas(sid, started.turn_id)] == []


async def test_token_deltas_stream_from_the_store_and_join_to_the_answer(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    answer = "one two three four five six seven eight nine ten"
    script = write_script(tmp_path, [{"text": answer, "delay_seconds": 0.5}])
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    sid = harness.new_session_id()
    started = await client.start(session_config(client, sid, workspace, script), "count")
    chunks = [d.text async for d in client.deltas(sid, started.turn_id)]
    assert len(chunks) > 1
    assert "".join(chunks) == answer
    assert "ModelTokenDelta" not in event_types((await client.events(sid)).events)


async def test_a_finished_turn_s_deltas_come_whole_after_earlier_turns_streamed_more_than_a_page(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    long_answer = " ".join(f"w{i}" for i in range(3300))  # 1,100 deltas of three words: more than one store page
    answer = "one two three four five six seven eight nine ten"
    script = write_script(tmp_path, [{"text": long_answer}, {"text": answer}])
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    sid = harness.new_session_id()
    started = await client.start(session_config(client, sid, workspace, script), "long")
    await client.wait(sid, started.turn_id)
    second = await client.send(sid, "short")
    await client.wait(sid, second.turn_id)
    assert "".join([d.text async for d in client.deltas(sid, second.turn_id)]) == answer
