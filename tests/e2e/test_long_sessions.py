"""Long sessions on a real dev server: linear history, context planning, compaction, model switching."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentrt.client import AgentClient
from agentrt.schemas import (
    ContextCompactionCompleted,
    ContextCompactionStarted,
    ModelProfile,
    ModelProfileSwitched,
    ModelRequestStarted,
    RequestRejected,
    SessionNotFound,
    TurnEnded,
)
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

KB = 1024


def _files(workspace: Path, count: int, size: int, prefix: str = "f") -> list[str]:
    names = []
    for i in range(count):
        name = f"{prefix}{i:04d}.txt"
        line = f"file {name} line; "
        (workspace / name).write_text((line * (size // len(line) + 1))[:size])
        names.append(name)
    return names


def _reading_turns(names: list[str], final: str = "done") -> list[dict]:
    steps = [{"text": f"reading {n}", "tool_calls": [{"name": "fs.read", "arguments": {"path": n}}]} for n in names]
    return steps + [{"text": final}]


def _store_client(harness: Harness) -> AgentClient:
    return AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)


async def _all_events(client: AgentClient, session_id: str) -> list:
    return [event async for event in client.all_events(session_id)]


def _per_round_growth(requests: list[ModelRequestStarted], at_round: int, window: int = 5) -> float:
    """Mean history bytes added per round over rounds ``at_round`` .. ``at_round + window``."""
    by_round = {e.round: e.history_bytes for e in requests}
    return (by_round[at_round + window] - by_round[at_round]) / window


async def test_history_grows_linearly_over_200_rounds_of_5_kb_tool_results(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    names = _files(workspace, 200, 5 * KB)
    script = write_script(tmp_path, _reading_turns(names))
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"], max_rounds_per_turn=300)
    started = await harness.client.start(config, "read every file")
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=600)
    assert outcome.status == "completed" and outcome.rounds == 201

    requests = [e for e in await _all_events(_store_client(harness), sid) if isinstance(e, ModelRequestStarted)]
    assert len(requests) == 201
    early, late = _per_round_growth(requests, 20), _per_round_growth(requests, 190)
    print(f"history bytes per round: round 20 {early:.0f}, round 190 {late:.0f}, total {requests[-1].history_bytes}")
    assert late <= 1.5 * early
    # The context stayed inside the scripted profile's 200k window although the transcript is ~1 MB.
    assert max(e.context_tokens or 0 for e in requests) <= 200_000 - 4_096
    assert requests[-1].omitted_messages > 0


async def test_a_200k_token_conversation_with_100_tool_calls_of_5_kb_completes(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    names = _files(workspace, 100, 5 * KB)
    turns = []
    for t in range(4):
        turns += _reading_turns(names[t * 25 : (t + 1) * 25], final=f"turn {t} done")
    script = write_script(tmp_path, turns)
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"])
    big_message = "Context for the task follows. " + "x" * (75 * KB)
    started = await harness.client.start(config, big_message)
    outcomes = [await harness.client.wait(sid, started.turn_id, timeout_seconds=300)]
    for _ in range(3):
        sent = await harness.client.send(sid, big_message)
        outcomes.append(await harness.client.wait(sid, sent.turn_id, timeout_seconds=300))
    assert [o.status for o in outcomes] == ["completed"] * 4
    assert sum(o.tool_calls for o in outcomes) == 100

    transcript = harness.store.messages(sid)
    transcript_tokens = sum(len(m.text.encode()) for _, m in transcript) // 4
    assert transcript_tokens >= 190_000
    # The last turn crossed the compaction threshold: the compaction runs after its outcome is published.
    async def compacted() -> list[Any]:
        while True:
            found = await _all_events(_store_client(harness), sid)
            if any(isinstance(e, ContextCompactionCompleted) for e in found):
                return found
            await asyncio.sleep(0.2)

    events = await asyncio.wait_for(compacted(), 120)
    requests = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert max(e.context_tokens or 0 for e in requests) <= 200_000 - 4_096
    description = await harness.handle(sid).describe()
    size = description.raw_description.workflow_execution_info.history_size_bytes
    print(f"200k-token conversation: {transcript_tokens} transcript tokens, history {size} bytes, "
          f"{description.raw_description.workflow_execution_info.history_length} events")
    assert size < 2 * 1024 * 1024


async def test_switching_from_a_200k_to_an_8k_profile_compacts_first_and_the_next_turn_fits(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    harness.config.profiles["big"] = ModelProfile(name="big", provider="scripted", context_window=200_000, max_output_tokens=8_000)
    harness.config.profiles["small"] = ModelProfile(name="small", provider="scripted", context_window=8_000, max_output_tokens=1_000)
    names = _files(workspace, 20, 5 * KB)
    turns = []
    for t in range(5):
        turns += _reading_turns(names[t * 4 : (t + 1) * 4], final=f"turn {t} done")
    turns += [{"text": "small model answering"}]
    script = write_script(tmp_path, turns)
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"], profile="big")
    started = await harness.client.start(config, "turn 0")
    assert (await harness.client.wait(sid, started.turn_id, timeout_seconds=120)).status == "completed"
    for t in range(1, 5):
        sent = await harness.client.send(sid, f"turn {t}")
        assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=120)).status == "completed"
    before = await harness.client.state(sid)
    assert before.context_window == 200_000 and before.context_tokens > 8_000
    messages_before = len(harness.store.messages(sid))

    result = await harness.client.switch_model(sid, "small")
    assert result.compacted and result.profile == "small" and result.from_profile == "big"
    assert result.estimated_tokens <= 0.8 * 7_000

    sent = await harness.client.send(sid, "and now?")
    outcome = await harness.client.wait(sid, sent.turn_id, timeout_seconds=120)
    assert outcome.status == "completed" and outcome.answer == "small model answering"
    events = await _all_events(_store_client(harness), sid)
    switched = [e for e in events if isinstance(e, ModelProfileSwitched)]
    assert len(switched) == 1 and switched[0].compacted
    started_compaction = next(e for e in events if isinstance(e, ContextCompactionStarted))
    assert started_compaction.reason == "switch" and started_compaction.profile == "big"
    last_request = [e for e in events if isinstance(e, ModelRequestStarted)][-1]
    assert last_request.profile == "small" and last_request.context_tokens <= 7_000
    assert last_request.summary_id is not None
    # Nothing the user sees is lost: every turn ended, the transcript only grew.
    assert sum(isinstance(e, TurnEnded) for e in events) == 6
    assert len(harness.store.messages(sid)) == messages_before + 2
    summary = harness.store.summary(sid, last_request.summary_id)
    assert summary and "turn 0" in summary


async def test_switching_to_an_unknown_profile_is_refused_and_the_session_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hi")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    with pytest.raises(RequestRejected, match="no-such-profile"):
        await harness.client.switch_model(sid, "no-such-profile")
    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").switch_model(sid, "scripted")
    view = await harness.client.state(sid)
    assert view.profile == "scripted"
    sent = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)).answer == "two"


async def test_compact_on_demand_summarises_and_a_second_request_finds_nothing_new(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    names = _files(workspace, 6, 2 * KB)
    turns = _reading_turns(names[:3], "first done") + _reading_turns(names[3:], "second done") + [{"text": "third"}]
    script = write_script(tmp_path, turns)
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"])
    started = await harness.client.start(config, "one")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    sent = await harness.client.send(sid, "two")
    await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)

    first = await harness.client.compact(sid)
    assert first.compacted and first.summary_id is not None and first.tokens_after < first.tokens_before
    second = await harness.client.compact(sid)
    assert not second.compacted and "nothing to compact" in (second.reason or "")
    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").compact(sid)

    sent = await harness.client.send(sid, "three")
    outcome = await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)
    assert outcome.answer == "third"
    view = await harness.client.state(sid)
    assert view.compactions == 1 and view.summary_id == first.summary_id
    # the whole transcript is still in the store
    assert [m.role for _, m in harness.store.messages(sid)].count("user") == 3


async def test_rereading_a_file_supersedes_the_earlier_read_in_the_context(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.md").write_text("v1 " * 2000)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "notes.md"}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "./notes.md"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read"])
    started = await harness.client.start(config, "read twice")
    assert (await harness.client.wait(sid, started.turn_id, timeout_seconds=60)).status == "completed"
    requests = [e for e in await _all_events(_store_client(harness), sid) if isinstance(e, ModelRequestStarted)]
    # the third call sees both reads, but the first one only as a short note (twice the
    # second call's context without it)
    assert requests[2].context_tokens < 1.6 * requests[1].context_tokens
    tool_results = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert [m.state_keys for m in tool_results] == [["file:notes.md"], ["file:notes.md"]]
    assert all(m.text.startswith("v1 v1") for m in tool_results)  # the audited results are untouched
