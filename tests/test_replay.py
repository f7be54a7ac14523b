"""Replay: every history this run produced, and every committed history, replays without non-determinism."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agentrt.schemas import PermissionRequested
from tests._recorded import RECORDED_HISTORIES, fetch_recorded, histories_of_other_workers, run_dir, xdist_worker
from tests.conftest import Harness
from tests.e2e._support import session_config, wait_for_event, write_script
from agentrt.worker import AgentrtConfig, AgentrtPlugin

HISTORIES = Path(__file__).parent / "histories"


def replayer(store_url: str | None = None) -> Replayer:
    """The worker's plugin in a replayer (workflows, sandbox, converter), reading externally
    stored payloads from the store at ``store_url``. In debug mode, which turns off the SDK's 2 s
    deadlock bound: what a replay checks is the commands, and on a loaded machine a garbage
    collection in the workflow thread once took longer (TMPRL1101 in a committed history's replay)."""
    return Replayer(workflows=[], plugins=[AgentrtPlugin(AgentrtConfig(database_url=store_url))], debug_mode=True)


async def record_one_session(harness: Harness, tmp_path: Path) -> None:
    """When this file runs alone: make a history with tool calls and an approval."""
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "done"},
    ])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.approve(sid, requested.request.request_id)
    await harness.client.wait(sid, started.turn_id)
    await harness.client.archive(sid)
    RECORDED_HISTORIES.append(harness.handle(sid))


@pytest.mark.replay_last
async def test_histories_recorded_by_this_run_replay(
    harness: Harness, tmp_path: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if not RECORDED_HISTORIES:
        await record_one_session(harness, tmp_path)
    by_store = {harness.config.database_url: await fetch_recorded()}
    worker = xdist_worker(request.config)
    if worker is not None:  # and the other workers' (tests/_recorded.py)
        for store_url, histories in (await histories_of_other_workers(run_dir(tmp_path_factory), worker)).items():
            by_store.setdefault(store_url, []).extend(histories)
    histories = [history for group in by_store.values() for history in group]
    assert histories

    async def each(group: list[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
        for history in group:
            yield history

    failures = {}
    for store_url, group in by_store.items():
        results = await replayer(store_url).replay_workflows(each(group), raise_on_replay_failure=False)
        failures.update({wid: str(err) for wid, err in results.replay_failures.items()})
    assert failures == {}
    if os.environ.get("AGENTRT_RECORD_HISTORIES"):
        HISTORIES.mkdir(exist_ok=True)
        for history in histories:  # named by workflow id and run: a recording may hold several runs of one
            run_id = history.events[0].workflow_execution_started_event_attributes.original_execution_run_id
            (HISTORIES / f"{history.workflow_id}-{run_id[:8]}.json").write_text(history.to_json())


def committed_histories() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


@pytest.mark.parametrize("path", committed_histories(), ids=lambda p: p.stem)
async def test_committed_history_replays(path: Path) -> None:
    data = json.loads(path.read_text())
    # Under the workflow id it ran as (a session checks its id is session-<session_id>).
    started = data["events"][0].get("workflowExecutionStartedEventAttributes", {})
    history = WorkflowHistory.from_json(started.get("workflowId") or path.stem, data)
    await replayer().replay_workflow(history)
