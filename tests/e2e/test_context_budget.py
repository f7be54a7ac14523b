"""The context budget on a real dev server: every model call records its input by source
(``ContextAssembled``); a call whose pinned parts alone pass the window is never sent and its turn
fails ``context_overflow``; compaction follows its threshold, says when it skips, and falls back
to the sliding window when its summary fails."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentrt.client import AgentClient
from agentrt.schemas import (
    ContextAssembled,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    ModelProfile,
    ModelRequestStarted,
    PermissionRequested,
)
from tests.activities.providers._loopback import LoopbackServer, Reply, json_reply
from tests.conftest import OWNER, Harness
from tests.e2e.conftest import KEY_ENV
from tests.e2e.test_memory_recall import RECORDED_TEXT
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script

KB = 1024


def _store_client(harness: Harness) -> AgentClient:
    return AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)


async def _events(harness: Harness, session_id: str) -> list:
    return [event async for event in _store_client(harness).all_events(session_id)]


def _tiny_profile(harness: Harness, **fields: object) -> str:
    harness.config.profiles["tiny"] = ModelProfile(
        name="tiny", provider="scripted", context_window=4_000, max_output_tokens=1_000, **fields  # type: ignore[arg-type]
    )
    return "tiny"


async def test_each_model_call_records_its_input_by_source_with_the_memories_it_shows(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "memory.write", "arguments": {"key": "db", "text": "the database is PostgreSQL 16"}}]},
        {"text": "noted"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, system_prompt="Answer briefly.")
    started = await harness.client.start(config, "which database do we use?")
    assert (await harness.client.wait(sid, started.turn_id)).status == "completed"

    first, second = [e for e in await _events(harness, sid) if isinstance(e, ContextAssembled)]
    assert (first.round, second.round, first.overflow) == (1, 2, False)
    # The memory written in round 1 joins round 2's (the owner's memories of other tests may be there too).
    assert second.breakdown.memories > first.breakdown.memories
    for event in (first, second):
        b = event.breakdown
        assert min(b.system_prompt, b.tool_specs, b.current_message) > 0
        assert b.total == b.system_prompt + b.tool_specs + b.memories + b.summary + b.history + b.current_message
        assert b.total <= b.budget == 200_000 - 4_096  # the harness's scripted profile
    assert second.breakdown.history > 0  # round 1's call and its result


async def test_a_message_bigger_than_the_window_fails_the_turn_context_overflow_before_any_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    profile = _tiny_profile(harness)
    script = write_script(tmp_path, [{"text": "small answer"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, profile=profile), "x" * (64 * KB))
    outcome = await harness.client.wait(sid, started.turn_id)

    assert (outcome.status, outcome.error_type) == ("failed", "context_overflow")
    assert "nothing was sent" in (outcome.error or "")
    [assembled] = [e for e in await _events(harness, sid) if isinstance(e, ContextAssembled)]
    assert assembled.overflow and assembled.breakdown.current_message > assembled.breakdown.budget == 3_000
    assert harness.store.usage_receipts(sid) == []  # no attempt reached the provider
    # The session goes on: a message that fits is answered.
    sent = await harness.client.send(sid, "a short one")
    assert (await harness.client.wait(sid, sent.turn_id)).answer == "small answer"


async def test_a_system_prompt_bigger_than_the_window_fails_the_turn_context_overflow(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    profile = _tiny_profile(harness)
    script = write_script(tmp_path, [{"text": "never sent"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, profile=profile, system_prompt="rule. " * 4_000)
    started = await harness.client.start(config, "hi")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert (outcome.status, outcome.error_type) == ("failed", "context_overflow")
    [assembled] = [e for e in await _events(harness, sid) if isinstance(e, ContextAssembled)]
    assert assembled.breakdown.system_prompt > assembled.breakdown.budget
    assert harness.store.usage_receipts(sid) == []


def _files(workspace: Path, count: int, size: int) -> list[str]:
    names = [f"f{i:03d}.txt" for i in range(count)]
    for name in names:
        (workspace / name).write_text(("line of " + name + "; ") * (size // 16))
    return names


async def _reading_session(
    harness: Harness, workspace: Path, tmp_path: Path, turns: int, size: int = 2 * KB, **fields: object
) -> str:
    """A session of ``turns`` turns, each reading one file of ``size`` bytes."""
    names = _files(workspace, turns, size)
    steps: list[dict] = []
    for name in names:
        steps += [{"tool_calls": [{"name": "fs.read", "arguments": {"path": name}}]}, {"text": f"read {name}"}]
    script = write_script(tmp_path, steps)
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"], **fields)
    started = await harness.client.start(config, "read the first")
    assert (await harness.client.wait(sid, started.turn_id)).status == "completed"
    for t in range(1, turns):
        sent = await harness.client.send(sid, f"read number {t}")
        assert (await harness.client.wait(sid, sent.turn_id)).status == "completed"
    return sid


def _small_profile(harness: Harness, **fields: object) -> str:
    harness.config.profiles["small"] = ModelProfile(
        name="small", provider="scripted", context_window=8_000, max_output_tokens=1_000, **fields  # type: ignore[arg-type]
    )
    return "small"


async def test_a_profile_threshold_compacts_earlier_than_the_default(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = await _reading_session(harness, workspace, tmp_path, 4, profile=_small_profile(harness, compact_threshold=0.3))

    started = [e for e in await _events(harness, sid) if isinstance(e, ContextCompactionStarted)]
    assert started and started[0].reason == "threshold"
    assert started[0].estimated_tokens < 0.8 * 7_000  # the default would not have compacted yet


async def test_a_session_threshold_of_1_turns_automatic_compaction_off_over_the_profile_s(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    profile = _small_profile(harness, compact_threshold=0.3)
    sid = await _reading_session(harness, workspace, tmp_path, 8, size=4 * KB, profile=profile, compact_threshold=1.0)

    events = await _events(harness, sid)
    assert not [e for e in events if isinstance(e, ContextCompactionStarted)]
    requests = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert requests[-1].omitted_messages > 0 and max(r.context_tokens or 0 for r in requests) <= 7_000  # the sliding window


async def test_a_compaction_with_nothing_old_enough_is_recorded_as_skipped(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "one"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hi")
    await harness.client.wait(sid, started.turn_id)

    outcome = await harness.client.compact(sid)

    assert not outcome.compacted
    [skipped] = [e for e in await _events(harness, sid) if isinstance(e, ContextCompactionSkipped)]
    assert (skipped.trigger, skipped.reason, skipped.principal) == ("requested", "not_enough_history", OWNER)


async def test_a_failed_summary_falls_back_to_the_sliding_window_and_says_so(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    harness.config.profiles["loopback"] = ModelProfile(
        name="loopback", provider="openai", model="gpt-4o-mini", base_url=provider_server.url, api_key_env=KEY_ENV
    )
    answer = Reply(chunks=[RECORDED_TEXT.read_bytes()])
    for reply in (answer, answer, json_reply(400, {"error": {"message": "no summaries today"}}), answer):
        provider_server.reply(reply)
    client = harness.client
    config = client.new_config(str(workspace), session_id=harness.new_session_id(), profile="loopback")
    sid = config.session_id
    started = await client.start(config, "first")
    assert (await client.wait(sid, started.turn_id)).status == "completed"
    sent = await client.send(sid, "second")
    assert (await client.wait(sid, sent.turn_id)).status == "completed"

    outcome = await client.compact(sid)

    assert not outcome.compacted and "no summaries today" in (outcome.error or "") and outcome.fallback_used
    [failed] = [e for e in await _events(harness, sid) if isinstance(e, ContextCompactionFailed)]
    assert failed.fallback_used
    sent = await client.send(sid, "third")
    assert (await client.wait(sid, sent.turn_id)).status == "completed"
    last = [e for e in await _events(harness, sid) if isinstance(e, ModelRequestStarted)][-1]
    assert last.summary_id is None  # no summary: the newest messages that fit went


async def test_a_compact_request_while_one_is_queued_is_recorded_as_already_compacting_and_joins_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        {"text": "written"},
    ])
    sid = harness.new_session_id()
    client = harness.client
    started = await client.start(session_config(client, sid, workspace, script), "write it")
    requested = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(requested, PermissionRequested)
    # Both wait behind the turn (it waits for an approval): whichever comes second joins the first.
    first, second = asyncio.create_task(client.compact(sid)), asyncio.create_task(client.compact(sid))
    skipped = await wait_for_event(client, sid, lambda e: isinstance(e, ContextCompactionSkipped))

    assert isinstance(skipped, ContextCompactionSkipped)
    assert (skipped.trigger, skipped.reason, skipped.principal) == ("requested", "already_compacting", OWNER)
    await client.approve(sid, requested.request.request_id)
    assert (await client.wait(sid, started.turn_id)).status == "completed"
    assert await first == await second  # one compaction answered both


async def test_agentrt_run_gives_the_session_its_compaction_threshold(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    from tests.cli.test_cli import agentrt

    script = write_script(tmp_path, [{"text": "ok"}])
    ran = await agentrt(harness, "run", "hi", "-w", str(workspace), "--script", script, "--compact-threshold", "1.0", "--json", cwd=tmp_path)

    assert ran.returncode == 0, ran.stderr
    session_id = json.loads(ran.stdout)["session_id"]
    assert harness.store.session_config(session_id).compact_threshold == 1.0
