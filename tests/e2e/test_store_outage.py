"""The store goes away mid-turn (PostgreSQL stopped): `agentrt run` says so, waits and carries on,
the session's state shows its model call waiting for the store (``sessions.waits``), and the turn
completes once; the model call that met the outage spends one attempt
(worker/_store_outage.py), not one per retry while it lasts (a 25 s outage spent 7 of its 9)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentrt.store import Store
from agentrt.worker import build_worker
from tests.conftest import Harness
from tests.e2e.hostile_tools import gatekeeper, silent_desk

from agentrt.client import AgentClient
from agentrt.schemas import ActivityWait
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig

from tests._private_pg import PrivatePostgres, private_pg  # noqa: F401 - the fixture
from tests.cli.test_cli_process import user_env
from tests.e2e._support import session_config, write_script

OUTAGE_SECONDS = 12  # a model call whose attempts each failed at once spent 4 of its 9 on this
BOUND = 240  # seconds: only so that a broken run fails the test instead of hanging it


async def test_agentrt_run_waits_out_a_stopped_postgresql_and_the_turn_completes_once(
    private_pg: PrivatePostgres, temporal_server, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    url = private_pg.create_database("agentrt")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "once.txt", "content": "one\n"}}]},
        {"text": "all done after a long think", "delay_seconds": 6},
    ])
    env = user_env(
        tmp_path / "home", AGENTRT_DATABASE_URL=url, AGENTRT_TEMPORAL_ADDRESS=temporal_server.address,
        AGENTRT_TASK_QUEUE=f"outage-{tmp_path.name}",
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentrt.cli", "run", "write it", "-w", str(workspace), "--script", script,
        "--approve", "auto", cwd=tmp_path, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    seen: list[str] = []
    assert process.stdout is not None
    while "round 2: calling model" not in "".join(seen):  # the model thinks for 6 s now
        line = (await asyncio.wait_for(process.stdout.readline(), BOUND)).decode()
        assert line, "".join(seen)
        seen.append(line)
    session_id = re.search(r"^session (\S+) \(workflow", "".join(seen), re.MULTILINE).group(1)  # type: ignore[union-attr]
    config = AgentrtConfig.load(env=env)  # the user's: its codec keys decode what the worker heartbeats
    temporal = await Client.connect(temporal_server.address, plugins=[AgentrtClientPlugin(config)])
    client = AgentClient.for_config(temporal, config, principal="alice")
    await asyncio.to_thread(private_pg.stop)
    stopped = asyncio.get_running_loop().time()
    waits: list[ActivityWait] = []
    while not waits and asyncio.get_running_loop().time() - stopped < OUTAGE_SECONDS - 1:
        await asyncio.sleep(0.5)
        waits = [w for w in await client.sessions.waits(session_id) if w.kind == "store_unavailable"]
    await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (asyncio.get_running_loop().time() - stopped)))
    await asyncio.to_thread(private_pg.start)
    stdout, stderr = await asyncio.wait_for(process.communicate(), BOUND)
    out, err = "".join(seen) + stdout.decode(), stderr.decode()

    assert process.returncode == 0, out + err
    assert "Traceback" not in out + err
    assert f"the store does not answer at {url}" in out and "the store answers again (after" in out
    assert "[completed]" in out and "all done after a long think" in out
    assert (workspace / "once.txt").read_text() == "one\n"
    retries = [line for line in out.splitlines() if "retrying provider.complete" in line]
    assert all("StoreUnavailable: the store does not answer" in line for line in retries), retries
    # While the store was away, the session's state said its model call waited for it (typed).
    assert [(w.activity, w.attempt) for w in waits] == [("provider.complete", 1)], waits
    assert f"the store does not answer at {url}" in waits[0].message and waits[0].since is not None
    # Once it is back, nothing waits.
    assert await client.sessions.waits(session_id) == []
    # The model call that met the outage spent one attempt on it: its second one answered.
    history = await temporal.get_workflow_handle(f"session-{session_id}").fetch_history()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    attempts = [
        e.activity_task_started_event_attributes.attempt for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and scheduled[e.activity_task_started_event_attributes.scheduled_event_id] == "provider.complete"
    ]
    assert attempts == [1, 2], attempts


def test_the_private_postgres_is_its_own(private_pg: PrivatePostgres) -> None:
    url = private_pg.create_database("mine")
    result = subprocess.run(
        [sys.executable, "-c", f"import sqlalchemy as s; e = s.create_engine({json.dumps(url)}); print(e.connect().execute(s.text('select current_setting(\\'port\\')')).scalar())"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.stdout.strip() == str(private_pg.port), result.stderr


@pytest.mark.parametrize("then", ["restart", "cancel"])
async def test_a_tool_call_that_met_a_stopped_postgresql_waits_heartbeating_until_it_answers_or_a_cancel(
    private_pg: PrivatePostgres, harness: Harness, workspace: Path, tmp_path: Path, then: str  # noqa: F811 - the fixture
) -> None:
    """``tool.execute`` is a sync activity: the SDK's heartbeat for one blocks up to 10 s for the
    event loop, so the wait's heartbeat, called on the loop, froze the whole worker for 10 s and
    failed the attempt with ``TimeoutError``; and a cancel of a sync activity only sets its event,
    which the wait did not look at (the turn's cancel waited out the attempt's bound, 5 minutes)."""
    store = Store.open(private_pg.create_database("tools"))
    queue = f"{harness.task_queue}-pg"
    try:
        async with build_worker(harness.temporal, harness.config, store, task_queue=queue, agents=[gatekeeper]):
            client = harness.client_on(queue)
            sid = harness.new_session_id()
            script = write_script(tmp_path, [{"tool_calls": [{"name": "gate", "arguments": {}}]}, {"text": "done"}])
            started = await client.start(session_config(client, sid, workspace, script, agent="gatekeeper"), "go")
            handle = harness.temporal.get_workflow_handle(started.workflow_id)
            while not (workspace / "ran.log").exists():  # the tool runs: its staged writes are in the store
                await asyncio.sleep(0.05)
            await asyncio.to_thread(private_pg.stop)
            (workspace / "go").touch()  # the tool returns; writing its result meets the stopped store
            assert "StoreUnavailable since " in await asyncio.wait_for(heartbeat_details(handle, harness), 30)
            if then == "cancel":
                await client.cancel(sid)
                await asyncio.wait_for(tool_call_ended(handle), 30)  # while the store is still stopped
                await asyncio.to_thread(private_pg.start)
                outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), BOUND)
                assert outcome.status == "cancelled"
                return
            await asyncio.to_thread(private_pg.start)
            outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), BOUND)
            history = await handle.fetch_history()
    finally:
        store.close()

    assert outcome.status == "completed"
    started_events = [e.activity_task_started_event_attributes for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    retried = [(a.attempt, a.last_failure.application_failure_info.type) for a in started_events if a.attempt > 1]
    assert retried == [(2, "StoreUnavailable")], retried


async def heartbeat_details(handle: WorkflowHandle[Any, Any], harness: Harness) -> str:
    """The decoded details of the run's pending activity's last heartbeat, once there is one."""
    while True:
        for pending in (await handle.describe()).raw_description.pending_activities:
            if pending.HasField("heartbeat_details"):
                decoded = await harness.temporal.data_converter.decode(pending.heartbeat_details.payloads)
                return " ".join(str(d) for d in decoded)
        await asyncio.sleep(0.1)


async def tool_call_ended(handle: WorkflowHandle[Any, Any]) -> None:
    """Once the run has no pending ``tool.execute``."""
    while any(p.activity_type.name == "tool.execute" for p in (await handle.describe()).raw_description.pending_activities):
        await asyncio.sleep(0.1)


class SilentPostgres:
    """A TCP server on loopback that closes its first connection at once (a store that went away)
    and holds every later one open without a word (a host that drops packets: a connect waits for
    its timeout, 10 s)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted == 1:
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.socket.close()
        for conn in self.held:
            conn.close()


async def test_the_wait_heartbeats_while_a_probe_of_the_store_hangs(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """A probe's connect waits up to 10 s for a silent host; the wait heartbeated only between
    probes, so a session's heartbeat timeout (here 5 s) ended the attempt during the first one.
    The SDK sends heartbeats at most every 0.8 × the timeout: a 2 s timeout left a loaded machine
    0.4 s of slack, and an attempt timed out under CI's load.
    (The tool opens a store of its own there: its engine's errors are a store's, as the worker's.)"""
    silent = SilentPostgres()
    queue = f"{harness.task_queue}-silent"
    try:
        async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[silent_desk]):
            client = harness.client_on(queue)
            sid = harness.new_session_id()
            call = {"name": "silent_store", "arguments": {"port": silent.port}}
            script = write_script(tmp_path, [{"tool_calls": [call]}, {"text": "done"}])
            config = session_config(client, sid, workspace, script, agent="silent-desk", heartbeat_timeout_seconds=5.0)
            started = await client.start(config, "go")
            handle = harness.temporal.get_workflow_handle(started.workflow_id)
            while silent.accepted < 2:  # the store went away; the wait's first probe hangs
                await asyncio.sleep(0.05)
            await asyncio.sleep(9)  # past a heartbeat timeout after the probe began, within its 10 s
            [pending] = [p for p in (await handle.describe()).raw_description.pending_activities if p.activity_type.name == "tool.execute"]
            await handle.terminate("test over")
    finally:
        silent.close()

    assert pending.attempt == 1 and not pending.HasField("last_failure"), pending
    assert "StoreUnavailable since " in " ".join(str(d) for d in await harness.temporal.data_converter.decode(pending.heartbeat_details.payloads))
