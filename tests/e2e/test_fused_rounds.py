"""Fused rounds (``fused-rounds-v1``, ``SessionConfig.fused_rounds``): a model call runs the read-only
calls its replies ask for, and calls the model again, in one activity; the session records those
rounds as its own. The transcript and the event log are the ones the same turn leaves unfused."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.enums.v1 import EventType

from agentrt.schemas import (
    FUSED_RESULT_BYTES,
    AssistantMessageCompleted,
    ModelRequestStarted,
    ToolInvocationCompleted,
    ToolInvocationFailed,
)
from tests.conftest import Harness
from tests.e2e._support import (
    ALLOW_ALL,
    kill_hard,
    scheduled_activity_counts,
    session_config,
    wait_for_event,
    worker_process,
    write_script,
)

ROUNDS = 5


def _read_rounds(tmp_path: Path, workspace: Path) -> str:
    for n in range(ROUNDS):
        (workspace / f"file-{n}.txt").write_text(f"file {n}\n" * 40)
    turns = [{"tool_calls": [{"name": "fs.read", "arguments": {"path": f"file-{n}.txt"}}]} for n in range(ROUNDS)]
    return write_script(tmp_path, [*turns, {"text": "read them all"}])


async def _turn(harness: Harness, workspace: Path, script: str, text: str = "read", **fields: object) -> tuple[str, object]:
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, **fields), text)
    return sid, await harness.client.wait(sid, started.turn_id)


async def test_read_only_rounds_run_inside_one_model_call(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid, outcome = await _turn(harness, workspace, _read_rounds(tmp_path, workspace), fused_rounds=True)

    assert outcome.status == "completed" and outcome.answer == "read them all"  # type: ignore[attr-defined]
    assert outcome.rounds == ROUNDS + 1 and outcome.tool_calls == ROUNDS  # type: ignore[attr-defined]
    scheduled = await scheduled_activity_counts(harness, sid)
    assert scheduled["provider.complete"] == 1 and scheduled["tool.execute"] == 0
    results = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert [m.text for m in results] == [f"file {n}\n" * 40 for n in range(ROUNDS)]


async def test_a_fused_turn_leaves_the_transcript_and_events_of_the_same_turn_unfused(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = _read_rounds(tmp_path, workspace)
    fused, _ = await _turn(harness, workspace, script, fused_rounds=True)
    plain, _ = await _turn(harness, workspace, script)

    def shape(sid: str) -> tuple[list[str], list[tuple[int, str, str, list[str]]]]:
        events = harness.store.events(sid, 0, 1000)
        messages = harness.store.messages(sid)
        return [e.type for e in events], [(p, m.role, m.text, [c.name for c in m.tool_calls]) for p, m in messages]

    assert shape(fused) == shape(plain)
    events = harness.store.events(fused, 0, 1000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.round for e in events if isinstance(e, ModelRequestStarted)] == list(range(1, ROUNDS + 2))
    assert [e.round for e in events if isinstance(e, AssistantMessageCompleted)] == list(range(1, ROUNDS + 2))
    assert [e.position for e in events if isinstance(e, ToolInvocationCompleted)] == [2 * n + 2 for n in range(ROUNDS)]


async def test_an_effectful_call_ends_the_fused_rounds_and_runs_as_a_tool_activity(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "in.txt").write_text("in")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "in.txt"}}]},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "out.txt", "content": "out"}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "out.txt"}}]},
        {"text": "done"},
    ])
    sid, outcome = await _turn(harness, workspace, script, fused_rounds=True, approval=ALLOW_ALL)

    assert outcome.status == "completed" and outcome.rounds == 4  # type: ignore[attr-defined]
    assert (workspace / "out.txt").read_text() == "out"
    # The first call ran the read and ended with the write's reply; the second ran the last read.
    scheduled = await scheduled_activity_counts(harness, sid)
    assert scheduled["provider.complete"] == 2 and scheduled["tool.execute"] == 1
    assert [m.text for _, m in harness.store.messages(sid) if m.role == "tool"][-1] == "out"


async def test_a_call_the_policy_would_not_run_unasked_is_not_run_inside_the_model_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # Read-only calls are never asked about (policy-decisions-v1): a deny rule is what keeps one out.
    (workspace / "a.txt").write_text("a")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]},
        {"text": "done"},
    ])
    denying = ALLOW_ALL.model_copy(update={"tools": {"fs.read": "deny"}})
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, fused_rounds=True, approval=denying)
    started = await harness.client.start(config, "read")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed" and outcome.rounds == 3
    scheduled = await scheduled_activity_counts(harness, sid)
    assert scheduled["provider.complete"] == 3 and scheduled["tool.execute"] == 0
    failures = [e for e in (await harness.client.events(sid)).events if isinstance(e, ToolInvocationFailed)]
    assert [f.reason for f in failures] == ["denied", "denied"]


async def test_a_hostile_path_in_a_fused_round_gets_the_tool_s_error_and_reads_nothing_outside(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP-SECRET")
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.read", "arguments": {"path": str(outside)}},
            {"name": "fs.read", "arguments": {"path": "../secret.txt"}},
            {"name": "fs.list", "arguments": {"path": "..", "recursive": True}},
        ]},
        {"text": "nothing"},
    ])
    sid, outcome = await _turn(harness, workspace, script, fused_rounds=True)

    assert outcome.status == "completed"  # type: ignore[attr-defined]
    assert (await scheduled_activity_counts(harness, sid))["tool.execute"] == 0
    texts = [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert len(texts) == 3 and not any("TOP-SECRET" in t for t in texts)
    failed = [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, ToolInvocationFailed)]
    assert len(failed) == 3


async def test_the_round_limit_holds_inside_a_fused_call(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid, outcome = await _turn(harness, workspace, _read_rounds(tmp_path, workspace), fused_rounds=True, max_rounds_per_turn=3)

    assert outcome.status == "round_limit" and outcome.rounds == 3 and outcome.tool_calls == 3  # type: ignore[attr-defined]
    assert (await scheduled_activity_counts(harness, sid))["provider.complete"] == 1
    events = harness.store.events(sid, 0, 1000)
    assert [e.round for e in events if isinstance(e, ModelRequestStarted)] == [1, 2, 3]
    assert len([e for e in events if isinstance(e, ToolInvocationCompleted)]) == 3


async def test_a_result_over_the_fused_limit_runs_as_a_tool_activity(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    (workspace / "small.txt").write_text("small")
    (workspace / "big.txt").write_text("b" * (FUSED_RESULT_BYTES + 1))
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "small.txt"}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "big.txt"}}]},
        {"text": "done"},
    ])
    sid, outcome = await _turn(harness, workspace, script, fused_rounds=True)

    assert outcome.status == "completed" and outcome.rounds == 3  # type: ignore[attr-defined]
    scheduled = await scheduled_activity_counts(harness, sid)
    assert scheduled["provider.complete"] == 2 and scheduled["tool.execute"] == 1
    texts = [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert texts[0] == "small" and texts[1].startswith("b" * 1000)


async def test_a_cancel_during_a_fused_call_leaves_only_what_the_session_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("a")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}], "delay_seconds": 30},
        {"text": "never"},
        {"text": "after the cancel"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, fused_rounds=True), "read")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, ModelRequestStarted))
    await harness.client.cancel(sid, started.turn_id)
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "cancelled"

    # Nothing of the rounds the cancelled call ran reached the transcript; the next turn goes on from it.
    assert [m.role for _, m in harness.store.messages(sid)] == ["user"]
    sent = await harness.client.send(sid, "again")
    after = await harness.client.wait(sid, sent.turn_id)
    assert after.status == "completed"
    positions = [p for p, _ in harness.store.messages(sid)]
    assert positions == sorted(set(positions))


async def test_a_worker_killed_during_a_fused_call_leaves_each_round_recorded_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("a")
    read = {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}
    script = write_script(tmp_path, [read, {**read, "delay_seconds": 4}, {"text": "read twice", "delay_seconds": 1}])
    client = harness.client_on(harness.task_queue + "-proc")
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        config = session_config(client, sid, workspace, script, fused_rounds=True, heartbeat_timeout_seconds=2.0)
        started = await client.start(config, "read it twice")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted))
        await asyncio.sleep(1.5)  # the first round ran; its follow-up request is in flight
        kill_hard(first)
    with worker_process(harness, log):
        outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=120)

    assert outcome.status == "completed" and outcome.answer == "read twice" and outcome.rounds == 3
    assert [m.role for _, m in harness.store.messages(sid)] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    events = harness.store.events(sid, 0, 1000)
    assert [e.round for e in events if isinstance(e, ModelRequestStarted)] == [1, 2, 3]
    assert len([e for e in events if isinstance(e, ToolInvocationCompleted)]) == 2
    # The one model call was retried on the new worker, from its first round.
    history = await harness.handle(sid).fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert max(attempts) >= 2 and (await scheduled_activity_counts(harness, sid))["provider.complete"] == 1
