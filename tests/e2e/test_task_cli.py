"""`agentrt task` against the real AutonomousTaskWorkflow, as a user runs it: a task whose scripted
sessions fail their first acceptance review and pass the second, with a one-second timer between
them; `task status --json`, `task events` and `task wait` show how it went."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path

from tests.cli.test_cli import agentrt
from tests.conftest import Harness


async def test_a_task_started_from_the_cli_runs_sessions_until_its_review_passes(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = tmp_path / "task.json"
    script.write_text(json.dumps({
        "sessions": [{"turns": [{"text": "started on the notes"}]}, {"turns": [{"text": "the notes are done"}]}],
        "reviews": [{"verdict": "fail", "findings": ["the notes are not done"]}, {"verdict": "pass", "summary": "done"}],
    }))
    task_id = f"cli-{uuid.uuid4().hex[:8]}"

    started = await agentrt(
        harness, "task", "start", "write the release notes", "-w", str(workspace), "--script", str(script),
        "--accept-review", "the answer says the notes are done", "--every", "1s", "--max-sessions", "3",
        "--id", task_id, "--json", cwd=tmp_path,
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"task_id": task_id}

    waited = await agentrt(harness, "task", "wait", task_id, "--json", cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert json.loads(waited.stdout)["status"] == "completed"

    status = await agentrt(harness, "task", "status", task_id, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["status"] == "completed" and body["sessions"] == 2
    assert body["checkpoint"]["accepted"] is True and body["checkpoint"]["done"] == "the notes are done"
    assert body["usage"] == body["spend"] and body["spend"]["usage"]["output_tokens"] > 0
    sessions = [r["session_id"] for r in body["receipts"] if r["kind"] == "session"]
    assert len(sessions) == 2, sessions
    assert all(re.fullmatch(rf"{task_id}-s{n}-[0-9a-f]{{8}}", s) for n, s in enumerate(sessions, 1)), sessions

    human = await agentrt(harness, "task", "status", task_id, cwd=tmp_path)
    assert f"task       {task_id} (completed)" in human.stdout and "sessions   2 of 3 used" in human.stdout

    events = await agentrt(harness, "task", "events", task_id, cwd=tmp_path)
    assert events.returncode == 0, events.stderr
    types = [line.split()[3] for line in events.stdout.splitlines() if "AutonomousTaskStatusChanged" not in line]
    assert types[0] == "AutonomousTaskCreated" and types[-1] == "AutonomousTaskCompleted"
    assert "AutonomousTaskWaiting" in types and types.count("AutonomousTaskSessionStarted") == 2
    assert "acceptance review after session 1 failed" in events.stdout


async def test_pausing_a_task_from_the_cli_stops_it_until_it_is_resumed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = tmp_path / "task.json"
    script.write_text(json.dumps({"turns": [{"text": "working on it"}], "reviews": [{"verdict": "fail", "findings": ["not yet"]}]}))
    task_id = f"cli-{uuid.uuid4().hex[:8]}"
    started = await agentrt(
        harness, "task", "start", "tend the garden", "-w", str(workspace), "--script", str(script), "--every", "1h",
        "--id", task_id, cwd=tmp_path,
    )
    assert started.returncode == 0, started.stderr

    for _ in range(200):  # the first session runs at once, then the task sleeps for an hour
        view = await harness.client.task_status(task_id)
        if view.status == "waiting" and view.sessions == 1:
            break
        await asyncio.sleep(0.1)
    assert view.status == "waiting" and view.next_wake is not None

    paused = await agentrt(harness, "task", "pause", task_id, "--json", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["status"] == "paused"
    again = await agentrt(harness, "task", "pause", task_id, cwd=tmp_path)  # a pause of a paused task is no error
    assert again.returncode == 0 and again.stdout.startswith(f"task {task_id}: paused; now paused"), again.stderr

    resumed = await agentrt(harness, "task", "resume", task_id, "--json", cwd=tmp_path)
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["status"] != "paused", resumed.stderr
    cancelled = await agentrt(harness, "task", "cancel", task_id, "--reason", "test over", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    result = await harness.client.wait_task(task_id)
    assert result.status == "cancelled"
