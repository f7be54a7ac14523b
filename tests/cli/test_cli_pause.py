"""`agentrt session pause|resume`, `agentrt graph pause|resume` and `agentrt pause|resume --owner` as a
user runs them: real processes against the test run's Temporal server and a worker."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from agentrt.cli._pause import report_lines
from agentrt.schemas import OwnerPauseReport, PauseItem
from tests.cli.test_cli import agentrt, plain
from tests.conftest import Harness
from tests.e2e._support import session_config, write_script


async def test_a_session_paused_and_its_owner_s_work_resumed_from_the_command_line(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    owner = f"cli-{uuid.uuid4().hex[:8]}"  # of its own: the dev server holds other tests' work too
    client = harness.as_principal(owner)
    config = session_config(client, harness.new_session_id(), workspace, write_script(tmp_path, [{"text": "hello"}]))
    sid = config.session_id
    started = await client.start(config, "hi")
    await client.wait(sid, started.turn_id, timeout_seconds=60)
    me = {"AGENTRT_PRINCIPAL": owner}

    paused = await agentrt(harness, "session", "pause", sid, "--reason", "incident 9", "--json", cwd=tmp_path, env=me)
    assert paused.returncode == 0, paused.stderr
    body = json.loads(paused.stdout)
    assert (body["status"], body["paused"]["principal"], body["paused"]["reason"]) == ("paused", owner, "incident 9")
    again = await agentrt(harness, "session", "pause", sid, cwd=tmp_path, env=me)
    assert again.returncode == 0 and again.stdout.startswith(f"session {sid} is paused (by {owner} since ")
    assert f"`agentrt session resume {sid}`" in again.stdout
    stranger = await agentrt(harness, "pause", "--owner", owner, cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
    assert stranger.returncode == 2
    assert f"principal 'mallory' may not pause the work of owner '{owner}'" in plain(stranger.stderr)
    missing = await agentrt(harness, "graph", "resume", "no-such-graph", cwd=tmp_path, env=me)
    assert missing.returncode == 2 and "no task graph 'no-such-graph'" in missing.stderr

    while not [r for r in await client.list_sessions() if r.session_id == sid and r.status == "paused"]:
        await asyncio.sleep(0.05)  # the listing shows the pause (visibility follows the workflow)
    resumed = await agentrt(harness, "resume", "--owner", owner, "--reason", "all clear", cwd=tmp_path, env=me)

    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == f"resumed 1 session, 0 tasks, 0 graphs of owner {owner}"
    assert (await client.state(sid)).status == "idle"


def test_an_owner_wide_report_counts_each_outcome_and_names_each_refusal() -> None:
    report = OwnerPauseReport(owner="alice", action="pause", items=[
        PauseItem(kind="graph", id="g1", outcome="paused"),
        PauseItem(kind="session", id="s1", outcome="paused"),
        PauseItem(kind="session", id="s2", outcome="already"),
        PauseItem(kind="task", id="t1", outcome="refused", detail="operator 'ops' must give a reason"),
    ])
    assert report_lines(report) == [
        "paused 1 session, 0 tasks, 1 graph of owner alice; 1 already paused; 1 refused",
        "  refused task t1: operator 'ops' must give a reason",
    ]
