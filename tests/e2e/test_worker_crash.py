"""A worker killed with SIGKILL in the middle of a turn: the turn completes on a new worker, effects once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentrt.schemas import ModelRequestStarted, PermissionRequested, TurnOutcome
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, kill_hard, session_config, wait_for_event, worker_process, write_script


async def test_worker_killed_mid_turn_is_replaced_and_the_turn_completes_with_the_file_written_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "log.txt", "content": "once\n", "append": True}}]},
        {"text": "finished after the crash", "delay_seconds": 4},
    ])
    client = harness.client
    client.task_queue = harness.task_queue + "-proc"
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        config = session_config(client, sid, workspace, script, approval=ALLOW_ALL, heartbeat_timeout_seconds=2.0)
        started = await client.start(config, "append a line, then think slowly")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted) and e.round == 2)
        await asyncio.sleep(1.0)  # the slow model call is in flight
        kill_hard(first)
    with worker_process(harness, log):
        outcome: TurnOutcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=120)

    assert outcome.status == "completed"
    assert outcome.answer == "finished after the crash"
    assert (workspace / "log.txt").read_text() == "once\n"
    roles = [m.role for _, m in harness.store.messages(sid)]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_worker_killed_during_an_approval_wait_runs_the_approved_call_exactly_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "log.txt", "content": "approved\n", "append": True}}]},
        {"text": "done"},
    ])
    client = harness.client
    client.task_queue = harness.task_queue + "-proc"
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        started = await client.start(session_config(client, sid, workspace, script, heartbeat_timeout_seconds=2.0), "go")
        requested = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
        kill_hard(first)
        # Decided while no worker runs: the signal waits in history.
        body = {"request_id": requested.request.request_id, "decision": "grant", "principal": client.principal}
        await harness.handle(sid).signal("permission_decision", body)
        await harness.handle(sid).signal("permission_decision", body)
    with worker_process(harness, log):
        outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=120)
    assert outcome.status == "completed"
    assert (workspace / "log.txt").read_text() == "approved\n"
