"""`agentrt session list` and `AgentClient.list_sessions`: one row per session, archived ones on request.

The dev server here suggests continue-as-new after 120 history events, so a session of a
dozen turns runs in several workflow runs; visibility lists each run, the listing must not.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrt.client import AgentClient, connect
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker
from tests.e2e._support import session_config, write_script

OWNER = "lister"
TURNS = 12


@dataclass
class Listed:
    server: DevServer
    client: AgentClient
    continued: str  # a session that continued as new, still open
    archived: str  # a session that was archived
    runs: int  # workflow runs of the continued session


async def settled(client: AgentClient, workflow_id: str, runs: int) -> None:
    """Wait until visibility shows ``runs`` runs of ``workflow_id``, all but one closed."""
    for _ in range(100):
        found = [e async for e in client.temporal.list_workflows(f"WorkflowId = '{workflow_id}'")]
        if len(found) == runs and sum(e.close_time is None for e in found) <= 1:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"visibility did not show {runs} runs of {workflow_id}")


@pytest.fixture(scope="module")
async def listed(tmp_path_factory: pytest.TempPathFactory, store: Store, store_url: str) -> AsyncIterator[Listed]:
    directory = tmp_path_factory.mktemp("list-server")
    server = DevServer.on_free_ports(directory, ["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=120"])
    await server.start()
    config = AgentrtConfig(temporal_address=server.address, task_queue=f"list-{uuid.uuid4().hex[:8]}", database_url=store_url)
    temporal = await connect(server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    workspace = directory / "ws"
    workspace.mkdir()
    script = write_script(directory, [{"text": f"answer {i}"} for i in range(TURNS + 1)])
    try:
        async with build_worker(temporal, config, store):
            continued = uuid.uuid4().hex[:12]
            started = await client.start(session_config(client, continued, workspace, script), "message 0")
            await client.wait(continued, started.turn_id, timeout_seconds=60)
            for n in range(1, TURNS):
                sent = await client.send(continued, f"message {n}")
                await client.wait(continued, sent.turn_id, timeout_seconds=60)
            runs = (await client.state(continued)).run
            assert runs >= 2, "the session should have continued as new"
            archived = uuid.uuid4().hex[:12]
            other = write_script(directory, [{"text": "bye"}], name="other.json")
            first = await client.start(session_config(client, archived, workspace, other), "hello")
            await client.wait(archived, first.turn_id, timeout_seconds=60)
            await client.archive(archived)
            await settled(client, f"session-{continued}", runs)
            await settled(client, f"session-{archived}", 1)
            yield Listed(server, client, continued, archived, runs)
    finally:
        server.stop()


async def test_a_session_that_continued_as_new_is_listed_once_with_its_latest_run(listed: Listed) -> None:
    rows = [s for s in await listed.client.list_sessions() if s.session_id == listed.continued]
    assert len(rows) == 1
    assert (rows[0].status, rows[0].closed, rows[0].owner) == ("idle", False, OWNER)
    latest = await listed.client.temporal.get_workflow_handle(f"session-{listed.continued}").describe()
    assert rows[0].started_at == latest.start_time


async def test_archived_sessions_are_listed_only_when_asked_for(listed: Listed) -> None:
    default = [s.session_id for s in await listed.client.list_sessions()]
    everything = await listed.client.list_sessions(include_archived=True)
    assert listed.archived not in default
    assert [s.session_id for s in everything].count(listed.archived) == 1
    assert [s.status for s in everything if s.session_id == listed.archived] == ["archived"]
    assert [s.session_id for s in everything].count(listed.continued) == 1


async def test_sessions_are_listed_newest_first_whether_open_or_closed(listed: Listed) -> None:
    """Regression: visibility lists open runs before closed ones; the listing is by start time."""
    everything = await listed.client.list_sessions(include_archived=True)
    starts = [s.started_at for s in everything]
    assert starts == sorted(starts, reverse=True)
    assert {listed.archived, listed.continued} <= {s.session_id for s in everything}


async def test_a_query_narrows_the_listing_and_still_shows_one_row_per_session(listed: Listed) -> None:
    idle = await listed.client.list_sessions("AgentSessionStatus = 'idle'", include_archived=True)
    assert [s.session_id for s in idle] == [listed.continued]


async def test_the_cli_lists_one_row_per_session_and_archived_ones_only_with_all(listed: Listed, tmp_path: Path) -> None:
    env = {
        **os.environ, "AGENTRT_TEMPORAL_ADDRESS": listed.server.address, "AGENTRT_TASK_QUEUE": listed.client.task_queue,
        "AGENTRT_PRINCIPAL": OWNER,  # the CLI lists its principal's sessions
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentrt.cli", "session", "list", *args],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )

    plain = await asyncio.to_thread(cli)
    assert plain.returncode == 0, plain.stderr
    rows = [line.split() for line in plain.stdout.splitlines()]
    assert [row[0] for row in rows] == [listed.continued]
    assert rows[0][1:3] == ["idle", OWNER]

    every = await asyncio.to_thread(cli, "--all", "--json")
    assert every.returncode == 0, every.stderr
    sessions = json.loads(every.stdout)
    assert sorted(s["session_id"] for s in sessions) == sorted([listed.continued, listed.archived])
    assert {s["session_id"]: s["status"] for s in sessions}[listed.archived] == "archived"
