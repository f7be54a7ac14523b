"""Autonomous tasks end to end, what a wake and a session's start read: a trigger's ``ignore``
dismisses the run for good, and a session's orientation prompt names the workspace's git commit."""

from __future__ import annotations

import asyncio
import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Iterator

import pytest

from agentrt.schemas import AutonomousTaskWaiting, AutonomyDecision, UserMessageAdded
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._tasks import TaskRig, write_file, write_task_script

PASS = {"verdict": "pass", "summary": "the goal is met"}
FAIL = {"verdict": "fail", "findings": ["not finished"], "summary": "more to do"}
# git, run by the test alone (never by the runtime): no user or system configuration.
GIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


@pytest.fixture
def rig(harness: Harness) -> Iterator[TaskRig]:
    rig = TaskRig.on(harness)
    yield rig
    RECORDED_HISTORIES.extend(rig.workflow_handles())  # tests/test_replay.py replays them


def git(workspace: Path, *args: str) -> str:
    safe = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"]  # the test's own git runs neither
    return subprocess.run(["git", *safe, *args], cwd=workspace, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


def first_prompt(rig: TaskRig, task_id: str, number: int) -> str:
    """The first user message of the task's session ``number`` (its orientation prompt)."""
    added = [e for e in rig.store.events(rig.session_ids(task_id)[number]) if isinstance(e, UserMessageAdded)]
    return added[0].text


async def test_a_trigger_that_says_ignore_dismisses_the_run_for_good_and_only_a_nudge_wakes_the_task(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "went"}]], reviews=[PASS])
    trigger = "if [ -f go ]; then echo execute the go file is there; else echo ignore nothing to do; fi"
    task_id = await rig.start(rig.config(workspace, script, schedule={"trigger_command": trigger}), skipping=False)

    first = await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomyDecision))
    assert (first.decision, first.dismissed, first.reason) == ("ignore", True, "nothing to do")
    await rig.wait_status(task_id, "waiting")
    # Three virtual days pass: before, the trigger was asked again every hour.
    assert await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id), timedelta(days=3)), 60)
    view = await rig.client.task_status(task_id)
    assert (view.status, view.next_wake, view.sessions) == ("waiting", None, 0)
    assert [e for e in rig.stored_events(task_id) if isinstance(e, AutonomyDecision)] == [first]
    assert not any(isinstance(e, AutonomousTaskWaiting) for e in rig.stored_events(task_id))

    (workspace / "go").write_text("")
    await rig.client.nudge_task(task_id)
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 1
    decisions = [(d.decision, d.source, d.dismissed) for d in rig.stored_events(task_id) if isinstance(d, AutonomyDecision)]
    assert decisions == [("ignore", "trigger", True), ("execute", "trigger", False)]


async def test_a_trigger_that_says_ignore_on_an_interval_schedule_waits_for_the_next_scheduled_run(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "went"}]], reviews=[PASS])
    trigger = "if [ -f go ]; then echo execute; else echo ignore not yet; fi"
    config = rig.config(workspace, script, schedule={"trigger_command": trigger, "every_seconds": 3600})
    task_id = await rig.start(config, skipping=False)

    first = await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomyDecision))
    waiting = await rig.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskWaiting))
    (workspace / "go").write_text("")
    assert await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id), timedelta(hours=1)), 60)
    result = await rig.wait(task_id)

    assert (first.decision, first.dismissed) == ("ignore", False)
    assert isinstance(waiting, AutonomousTaskWaiting) and waiting.until - first.at >= timedelta(hours=1)
    assert result.status == "completed" and result.sessions == 1


async def test_each_session_of_a_task_in_a_git_workspace_is_told_the_commit_the_workspace_is_at(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "start")
    start = git(workspace, "rev-parse", "HEAD")
    # A hook and an fsmonitor that would run if anything ran git here: the task reads files only.
    hook = workspace / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/hooked\n")
    hook.chmod(0o755)
    git(workspace, "config", "core.fsmonitor", f"touch {tmp_path}/fsmonitored;")
    script = write_task_script(
        tmp_path,
        [[write_file("part1.txt", "one"), {"text": "wrote part 1"}], [{"text": "all done"}]],
        reviews=[FAIL, PASS],
    )
    task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": 60}), skipping=False)
    await rig.wait_stored(task_id, lambda e: e.type == "AutonomousTaskCheckpointed")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "part 1")
    second = git(workspace, "rev-parse", "HEAD")
    assert await asyncio.wait_for(rig.skipper.fast_forward(rig.handle(task_id), timedelta(minutes=1)), 60)
    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 2
    prompts = [first_prompt(rig, task_id, n) for n in (1, 2)]
    print("\n" + prompts[1])
    assert f"## Workspace\nThe workspace is a git repository at commit {start} " in prompts[0]
    assert f"at commit {second} " in prompts[1] and start not in prompts[1]
    assert not (tmp_path / "fsmonitored").exists() and not (tmp_path / "hooked").exists()


async def test_a_session_in_a_workspace_that_is_no_git_repository_gets_no_commit_and_still_runs(
    rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    (workspace / ".git").write_text("gitdir: /dev/zero\n")  # hostile: a .git file naming a device
    script = write_task_script(tmp_path, [[{"text": "all done"}]], reviews=[PASS])
    task_id = await rig.start(rig.config(workspace, script))

    result = await rig.wait(task_id)

    assert result.status == "completed" and result.sessions == 1
    assert "## Workspace" not in first_prompt(rig, task_id, 1)
