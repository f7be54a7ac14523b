"""The store goes away mid-turn (PostgreSQL stopped): `agentrt run` says so, waits and carries on,
the session's state shows its model call waiting for the store (``sessions.waits``), and the turn
completes once; the model call that met the outage spends one attempt
(worker/_store_outage.py), not one per retry while it lasts (a 25 s outage spent 7 of its 9)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.schemas import ActivityWait
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig

from tests._private_pg import PrivatePostgres, private_pg  # noqa: F401 - the fixture
from tests.cli.test_cli_process import user_env
from tests.e2e._support import write_script

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
