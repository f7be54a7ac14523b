"""`agentrt worker --graceful-shutdown SECONDS`: a worker stopped (SIGTERM, as a rolling deploy
stops it) while a tool call runs lets the call finish and records its result before it exits;
the session goes on on another worker without running the call again."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from agentrt.activities.tools import default_registry
from agentrt.schemas import ToolInvocationCompleted, ToolInvocationFailed, ToolInvocationStarted
from agentrt.worker import build_worker
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, worker_process, write_script


async def test_a_worker_stopped_mid_tool_call_lets_it_finish_and_the_call_runs_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue = harness.task_queue + "-proc"
    client = harness.client_on(queue)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 3; echo once >> ran.txt; echo finished"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    with worker_process(harness, tmp_path / "worker.log", "--graceful-shutdown", "60") as process:
        started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "run it")
        await wait_for_event(client, sid, lambda e: isinstance(e, ToolInvocationStarted), timeout=60)
        os.killpg(process.pid, signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 60)
        assert code == 0, (tmp_path / "worker.log").read_text()[-3000:]
    # Before it exited, the call finished and its result is in the effect ledger (cancelled, it would be `claimed`).
    [effect] = harness.store.effects(sid)
    assert effect.state == "applied" and "finished" in (effect.result_text or "")

    async with build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue):
        outcome = await client.wait(sid, started.turn_id, timeout_seconds=60)
    assert outcome.status == "completed", outcome.error
    events = harness.store.events(sid, 0, 1000)
    [done] = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert "finished" in done.preview
    assert not [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert (workspace / "ran.txt").read_text() == "once\n"
