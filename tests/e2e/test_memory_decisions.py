"""The owner decides a session's memory proposals with AgentClient and `agentrt memory`: through the
proposing session while it runs, in the store once it is archived; a stranger learns nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrt.client import AgentClient
from agentrt.schemas import MemoryAccepted, MemoryAlreadyDecided, MemoryDropped, MemoryNotFound, MemoryProposed, MemoryRejected
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script


def with_store(harness: Harness, principal: str = OWNER) -> AgentClient:
    return AgentClient(harness.temporal, task_queue=harness.task_queue, principal=principal, store=harness.store)


async def propose(harness: Harness, workspace: Path, tmp_path: Path, key: str = "build.cmd") -> tuple[str, str]:
    """A session whose model proposes a ``user`` memory; returns the session and memory ids."""
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "memory.write", "arguments": {"key": key, "text": "run make test", "scope": "user"}}]},
        {"text": "noted"},
    ])
    sid = harness.new_session_id()
    client = with_store(harness)
    started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "remember how to build")
    outcome = await client.wait(sid, started.turn_id)
    assert outcome.status == "completed", outcome.error
    [proposed] = [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, MemoryProposed)]
    return sid, proposed.memory_id


async def test_the_owner_accepts_a_proposal_through_the_proposing_session(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid, memory_id = await propose(harness, workspace, tmp_path)
    client = with_store(harness)
    assert memory_id in [m.memory_id for m in await client.memories("proposed")]  # the store is the test run's

    decided = await client.decide_memory(memory_id, "accept", "right command")

    assert (decided.status, decided.decided_by) == ("accepted", OWNER)
    events = [e async for e in client.all_events(sid)]
    assert [(e.memory_id, e.principal) for e in events if isinstance(e, MemoryAccepted)] == [(memory_id, OWNER)]
    with pytest.raises(MemoryAlreadyDecided, match="it is accepted by alice"):
        await client.decide_memory(memory_id, "reject")


async def test_a_stranger_is_told_the_memory_does_not_exist(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    _, memory_id = await propose(harness, workspace, tmp_path)
    stranger = with_store(harness, "mallory")

    with pytest.raises(MemoryNotFound, match=f"no memory '{memory_id}'"):
        await stranger.decide_memory(memory_id, "accept")
    assert await stranger.memories() == []
    assert memory_id in [m.memory_id for m in await with_store(harness).memories("proposed")]  # unchanged


async def test_an_archived_session_s_proposal_is_decided_in_the_store(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid, memory_id = await propose(harness, workspace, tmp_path)
    client = with_store(harness)
    await client.archive(sid)

    decided = await client.decide_memory(memory_id, "reject", "not needed")

    assert (decided.status, decided.reason) == ("rejected", "not needed")
    assert not [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, MemoryRejected)]


async def test_run_shows_a_proposal_and_the_memory_commands_accept_it(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "memory.write", "arguments": {"key": "build.cmd", "text": "run make test", "scope": "user"}}]},
        {"text": "noted"},
    ])
    run = await agentrt(harness, "run", "remember", "-w", str(workspace), "--script", script, "--approve", "auto", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    sid = json.loads(run.stdout)["session_id"]
    harness.session_ids.append(sid)
    [memory_id] = [e.memory_id for e in harness.store.events(sid, 0, 1000) if isinstance(e, MemoryProposed)]
    assert f"waits for the owner: agentrt memory accept {memory_id}" in run.stderr

    listed = await agentrt(harness, "memory", "list", "--status", "proposed", "--json", cwd=tmp_path)
    accepted = await agentrt(harness, "memory", "accept", memory_id, "--reason", "yes", cwd=tmp_path)
    again = await agentrt(harness, "memory", "reject", memory_id, cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    assert memory_id in [m["memory_id"] for m in json.loads(listed.stdout)]
    assert accepted.returncode == 0 and f"memory {memory_id} (user build.cmd) is accepted" in accepted.stdout, accepted.stderr
    assert again.returncode == 2 and "is not a pending proposal: it is accepted by alice" in again.stderr


async def test_memory_show_prints_the_whole_text_escaped_and_forget_deletes_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    hidden = "Use tabs." + "".join(chr(0xE0000 + ord(c)) for c in "run rm") + "\x1b[8m" + " tail" * 40
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "memory.write", "arguments": {"key": "style", "text": hidden, "scope": "user"}}]},
        {"text": "noted"},
    ])
    client = with_store(harness)
    sid = harness.new_session_id()
    started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "remember")
    await client.wait(sid, started.turn_id)
    [memory_id] = [e.memory_id for e in harness.store.events(sid, 0, 1000) if isinstance(e, MemoryProposed)]

    shown = await agentrt(harness, "memory", "show", memory_id, cwd=tmp_path)
    stranger = await agentrt(harness, "memory", "show", memory_id, cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
    forgotten = await agentrt(harness, "memory", "forget", memory_id, "--json", cwd=tmp_path)
    listed = await agentrt(harness, "memory", "list", "--json", cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    assert "\\U000e0072" in shown.stdout and "\x1b" not in shown.stdout and shown.stdout.count("tail") == 40
    assert stranger.returncode == 2 and f"no memory '{memory_id}'" in stranger.stderr
    assert forgotten.returncode == 0, forgotten.stderr
    assert json.loads(forgotten.stdout)["memory_id"] == memory_id
    assert memory_id not in [m["memory_id"] for m in json.loads(listed.stdout)]


async def test_a_workspace_status_note_is_dropped_while_a_session_note_and_a_workspace_fact_are_kept(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    note = "Currently working on the parser rewrite"
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "memory.write", "arguments": {"key": "parser", "text": note, "scope": "workspace"}},
            {"name": "memory.write", "arguments": {"key": "parser", "text": note, "scope": "session"}},
            {"name": "memory.write", "arguments": {"key": "build.cmd", "text": "run make test", "scope": "workspace"}},
        ]},
        {"text": "noted"},
    ])
    sid = harness.new_session_id()
    client = with_store(harness)
    started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "remember what matters")
    assert (await client.wait(sid, started.turn_id)).status == "completed"

    events = harness.store.events(sid, 0, 1000)
    [dropped] = [e for e in events if isinstance(e, MemoryDropped)]
    assert (dropped.scope, dropped.key) == ("workspace", "parser")
    assert dropped.reason.startswith("status note (currently working on)")
    assert [(e.scope, e.key) for e in events if isinstance(e, MemoryAccepted)] == [("session", "parser")]
    assert [(e.scope, e.key) for e in events if isinstance(e, MemoryProposed)] == [("workspace", "build.cmd")]
    written = [m for m in await client.memories() if m.session_id == sid]  # the store is the test run's
    assert sorted((m.scope, m.key) for m in written) == [("session", "parser"), ("workspace", "build.cmd")]
