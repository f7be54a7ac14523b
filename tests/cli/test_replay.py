"""`agentrt replay`: exported histories and the runs of a namespace replayed against the installed
workflow code; a history changed so that it no longer matches the code is named, with the event
and command that differ, and the command exits 1."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from agentrt.schemas import ConfigurationError
from agentrt.worker import histories_in_files
from tests.cli.test_cli import agentrt
from tests.conftest import Harness
from tests.e2e._support import session_config, write_script

HISTORIES = Path(__file__).parent.parent / "histories"


def recorded_id(path: Path) -> str:
    """The workflow id a committed history's start event records."""
    return json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"]


def broken_copy(source: Path, target: Path) -> None:
    """``source`` with its first scheduled activity's type changed: code that schedules the
    original activity there no longer matches it."""
    data = json.loads(source.read_text())
    for event in data["events"]:
        scheduled = event.get("activityTaskScheduledEventAttributes")
        if scheduled:
            scheduled["activityType"]["name"] = "tools.renamed"
            break
    target.write_text(json.dumps(data))


async def test_a_folder_with_one_changed_history_fails_naming_it_and_the_difference(harness: Harness, tmp_path: Path) -> None:
    folder = tmp_path / "exported"
    folder.mkdir()
    shutil.copy(HISTORIES / "approval-denied.json", folder / "session-denied.json")
    broken_copy(HISTORIES / "approval-granted.json", folder / "session-granted.json")

    denied, granted = recorded_id(folder / "session-denied.json"), recorded_id(folder / "session-granted.json")

    result = await agentrt(harness, "replay", str(folder), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"{granted}  SessionWorkflow  non-determinism: [TMPRL1100] Nondeterminism error: Activity type of scheduled "
        "event 'tools.renamed' does not match activity type of activity command 'tools.list'  "
        f"({folder / 'session-granted.json'})",
        "1 of 2 histories replay; 1 do not",
    ]
    as_json = await agentrt(harness, "replay", str(folder), "--json", cwd=tmp_path)
    body = json.loads(as_json.stdout)
    assert (as_json.returncode, body["replayed"], body["failed"]) == (1, 1, 1)
    assert [(o["workflow_id"], o["replayed"], o["nondeterminism"]) for o in body["outcomes"]] == [
        (denied, True, False), (granted, False, True),
    ]


async def test_a_session_a_task_and_a_graph_replay_through_the_command(harness: Harness, tmp_path: Path) -> None:
    # Every committed history replays in tests/test_replay.py; one of each workflow kind here.
    folder = tmp_path / "kinds"
    folder.mkdir()
    for name in ("approval-granted", "autonomous-v1-task-three-sessions-completed", "console-v1-graph-direct-answer"):
        shutil.copy(HISTORIES / f"{name}.json", folder)
    result = await agentrt(harness, "replay", str(folder), "--json", cwd=tmp_path, timeout=600)
    body = json.loads(result.stdout)
    assert result.returncode == 0 and body["failed"] == 0, [o for o in body["outcomes"] if not o["replayed"]]
    assert sorted(o["workflow_type"] for o in body["outcomes"]) == ["AutonomousTaskWorkflow", "SessionWorkflow", "TaskGraphWorkflow"]


async def test_what_is_not_a_history_is_a_clear_error(harness: Harness, tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text('{"events": "no"}')
    (tmp_path / "garbage.json").write_text("not json")
    (tmp_path / "deep.json").write_text('{"events": ' + "[" * 200_000 + "]" * 200_000 + "}")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "empty").mkdir()
    for path, said in (
        (tmp_path / "empty", "empty: export some with"),  # an empty export must not pass a check before a deploy
        (tmp_path / "missing", "missing: no such file or directory"),
        (tmp_path / "fifo.json", "fifo.json: not a regular file or a directory"),
        (tmp_path / "deep.json", "deep.json: not a JSON history"),
        (tmp_path / "notes.json", 'not a workflow history (no "events" list'),
        (tmp_path / "garbage.json", "not a JSON history"),
    ):
        result = await agentrt(harness, "replay", str(path), cwd=tmp_path)
        assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr, result.stderr


async def test_the_runs_of_the_namespace_a_query_finds_replay(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"text": "noted"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    assert (await harness.client.wait(sid, started.turn_id, timeout_seconds=60)).status == "completed"

    result = await agentrt(harness, "replay", "--query", f"WorkflowId = 'session-{sid}'", "--json", cwd=tmp_path)
    body = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr
    assert [(o["workflow_id"], o["replayed"], o["origin"]) for o in body["outcomes"]] == [(f"session-{sid}", True, "namespace default")]


async def test_a_history_of_a_workflow_type_this_code_does_not_run_fails_the_check(harness: Harness, tmp_path: Path) -> None:
    data = json.loads((HISTORIES / "approval-denied.json").read_text())
    data["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"] = "NoSuchWorkflow"
    (tmp_path / "other.json").write_text(json.dumps(data))
    result = await agentrt(harness, "replay", str(tmp_path / "other.json"), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed: workflow type 'NoSuchWorkflow' is not one this code runs" in result.stdout


def test_a_history_file_larger_than_a_history_can_be_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentrt.worker._replay.MAX_HISTORY_FILE_BYTES", 1000)
    (tmp_path / "big.json").write_text('{"events": [' + ", ".join(["{}"] * 1000) + "]}")
    with pytest.raises(ConfigurationError, match=r"big.json: \d+ bytes, more than a Temporal history holds \(1000 bytes"):
        list(histories_in_files([tmp_path / "big.json"]))
