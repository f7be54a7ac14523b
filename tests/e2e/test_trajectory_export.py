"""Trajectories of real sessions read with AgentClient and the CLI: exported as json and jsonl, and
compared (`agentrt trajectory diff` exits 0 for equivalent runs, 1 for different ones); and
`agentrt run --advisor` shows the review live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrt.client import load_trajectory
from agentrt.schemas import TurnNotFound, trajectory_from_events
from tests.cli.test_cli import agentrt
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script


async def run_session(harness: Harness, workspace: Path, tmp_path: Path, turns: list[dict[str, Any]], name: str) -> str:
    script = write_script(tmp_path, turns, name=name)
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "look around")
    assert (await harness.client.wait(sid, started.turn_id)).status == "completed"
    return sid


LOOK = [
    {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]},
    {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
    {"text": "done"},
]


async def test_the_client_s_trajectory_is_the_fold_of_the_session_s_events(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = await run_session(harness, workspace, tmp_path, LOOK, "look.json")

    trajectory = await harness.client.trajectory(sid)

    assert trajectory == trajectory_from_events(sid, harness.store.events(sid, 0, 1000))
    assert [s.action for s in trajectory.turns[0].steps] == ["fs.list", "fs.read"]
    assert (await harness.client.trajectory(sid, "turn-1")) == trajectory
    with pytest.raises(TurnNotFound):
        await harness.client.trajectory(sid, "turn-9")


async def test_an_export_diffs_equivalent_with_its_session_and_another_run_differs(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await run_session(harness, workspace, tmp_path, LOOK, "look.json")
    other = await run_session(harness, workspace, tmp_path, [LOOK[1], LOOK[2]], "read.json")

    as_json = await agentrt(harness, "session", "trajectory", sid, cwd=tmp_path)
    as_jsonl = await agentrt(harness, "session", "trajectory", sid, "--turn", "turn-1", "--format", "jsonl", cwd=tmp_path)
    assert as_json.returncode == 0 and as_jsonl.returncode == 0, as_json.stderr + as_jsonl.stderr
    (tmp_path / "a.json").write_text(as_json.stdout)
    (tmp_path / "a.jsonl").write_text(as_jsonl.stdout)
    assert [json.loads(line)["action"] for line in as_jsonl.stdout.splitlines()] == ["fs.list", "fs.read"]
    assert load_trajectory(tmp_path / "a.json") == await harness.client.trajectory(sid)

    same = await agentrt(harness, "trajectory", "diff", str(tmp_path / "a.jsonl"), f"{sid}:turn-1", cwd=tmp_path)
    different = await agentrt(harness, "trajectory", "diff", str(tmp_path / "a.json"), other, cwd=tmp_path)
    missing = await agentrt(harness, "trajectory", "diff", f"{sid}:turn-9", other, cwd=tmp_path)

    assert same.returncode == 0, same.stdout + same.stderr
    assert different.returncode == 1, different.stdout + different.stderr
    assert "  -   0   -  fs.list" in different.stdout and "  =   1   0  fs.read" in different.stdout
    assert missing.returncode == 2 and f"session {sid} has no turn 'turn-9'" in missing.stderr


async def test_run_with_an_advisor_shows_its_review_and_not_the_trajectory(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "advised.json"
    script.write_text(json.dumps({
        "turns": [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "listed"}],
        "advisor": [{"verdict": "approve_with_warnings", "concerns": ["lists everything"], "summary": "harmless"}],
    }))

    result = await agentrt(
        harness, "run", "list it", "-w", str(workspace), "--script", str(script), "--advisor", "full", cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert "advisor: reviewing 1 call (full: " in result.stdout
    assert "advisor: approve_with_warnings: harmless · concerns: 1) lists everything" in result.stdout
    assert "TrajectoryStepRecorded" not in result.stdout
