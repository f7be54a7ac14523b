"""Activity contracts across builds, for real: the previous release's code (a commit of this
repository, exported with `git archive` and run as `agentrt worker` processes) beside this one.
This release's sessions run their tool calls on the previous release's tools worker, and the
previous release's sessions on this release's; both complete, each call run once where it was
sent. Were the previous release outside this one's activity contract window, each call would be
refused instead, typed and not retried, naming both contracts. And every activity the previous
release registers is still registered with inputs and results each build reads from the other.

``PREVIOUS_RELEASE`` is the commit operators may still run beside this code. Move it forward at
each release (to the commit of the release before); a change of the activity contract keeps it at
a commit of the contract before (docs/deployment.md, "Activity contracts across builds").
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import ActivityContract
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, build_worker
from tests._activity_schemas import activity_schemas, unreadable_changes
from tests._packages import REPO_ROOT
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script

# The release before this one: contract 2 (back to 1), whose builds this one (3, back to 3) refuses.
PREVIOUS_RELEASE = "f0455d318df76c418478fbe57990e6571733c63e"
STARTUP_SECONDS = 120  # a bound, not a wait: an old worker polls in a few seconds
WAIT = 90


@dataclass(frozen=True)
class Release:
    commit: str
    path: Path  # holds the tree as the package `agentrt` (put it on PYTHONPATH)
    contract: ActivityContract


def _contract_of(tree: Path) -> ActivityContract:
    """The activity contract a tree declares (schemas/_contract.py); a tree without one is from
    before contracts (contract 1)."""
    source = tree / "schemas" / "_contract.py"
    if not source.exists():
        return ActivityContract.before_contracts()
    text = source.read_text()
    version = re.search(r"^ACTIVITY_CONTRACT: Final = (\d+)$", text, re.M)
    oldest = re.search(r"^ACTIVITY_CONTRACT_OLDEST: Final = (\d+)$", text, re.M)
    assert version and oldest, f"{source} declares no ACTIVITY_CONTRACT and ACTIVITY_CONTRACT_OLDEST"
    return ActivityContract(version=int(version.group(1)), oldest=int(oldest.group(1)))


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """``PREVIOUS_RELEASE``'s tree laid out as the package ``agentrt``, as its pyproject.toml maps
    the root folders (``agentrt.schemas`` = ``schemas/``, ``agentrt`` = ``sdk/``)."""
    found = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"], capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.fail(
            f"the previous release {PREVIOUS_RELEASE} is not in this clone ({found.stderr.strip()}): the activity contract "
            "test needs the history (`git fetch --unshallow`)"
        )
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", PREVIOUS_RELEASE], capture_output=True, check=True)
    root = tmp_path_factory.mktemp("previous-release")
    tree = root / "tree"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    package_dirs = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    packages = root / "packages"
    shutil.copytree(tree / package_dirs.pop("agentrt"), packages / "agentrt")
    for name, folder in package_dirs.items():
        (packages / name.replace(".", "/")).symlink_to(tree / folder, target_is_directory=True)
    return Release(PREVIOUS_RELEASE, packages, _contract_of(tree))


def previous_env(release: Release, **env: str) -> dict[str, str]:
    """The environment of a process that runs ``release``'s agentrt (with this venv's libraries)."""
    return {**os.environ, "PYTHONPATH": str(release.path), **env}


@contextmanager
def previous_worker(release: Release, directory: Path, *args: str, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """``agentrt worker ARGS`` of ``release``, polling (its log says so) when the block starts; stopped after."""
    log = directory / "previous-worker.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "agentrt.cli", "worker", *args],
        cwd=directory, env=previous_env(release, AGENTRT_HOME=str(directory / "home"), **env),
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while "worker polling" not in log.read_text(errors="replace"):
            assert process.poll() is None, f"the previous release's worker exited:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, f"the previous release's worker did not poll:\n{log.read_text(errors='replace')}"
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=60)


def script_with_tools(tmp_path: Path) -> str:
    """Three tool calls of three kinds (a write, a read, a command), then an answer."""
    return write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "across builds\n"}}]},
        {"tool_calls": [
            {"name": "fs.read", "arguments": {"path": "notes.md"}},
            {"name": "shell.run", "arguments": {"command": "wc -l < notes.md > lines.txt"}},
        ]},
        {"text": "done"},
    ])


def tool_calls(history: WorkflowHistory) -> list[tuple[int, str]]:
    """``(attempt, worker identity)`` of every tool.execute attempt in ``history``."""
    events = history.events
    return [
        (e.activity_task_started_event_attributes.attempt, e.activity_task_started_event_attributes.identity)
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and events[e.activity_task_started_event_attributes.scheduled_event_id - 1]
        .activity_task_scheduled_event_attributes.activity_type.name == "tool.execute"
    ]


def refusals(history: WorkflowHistory) -> list[str]:
    """The messages of the activity failures in ``history`` that are contract refusals."""
    return [
        e.activity_task_failed_event_attributes.failure.message for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
        and e.activity_task_failed_event_attributes.failure.application_failure_info.type == "ActivityContractMismatch"
        and e.activity_task_failed_event_attributes.failure.application_failure_info.non_retryable
    ]


async def run_session(harness: Harness, queue: str, tools_queue: str, workspace: Path, tmp_path: Path) -> tuple[str, WorkflowHistory]:
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    sid = uuid.uuid4().hex[:12]
    config = session_config(client, sid, workspace, script_with_tools(tmp_path), approval=ALLOW_ALL, tool_task_queue=tools_queue)
    started = await client.start(config, "take notes")
    outcome = await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
    history = await harness.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
    return outcome.status, history


def assert_crossed(release: Release, status: str, history: WorkflowHistory, workspace: Path, tools_pid: int | None) -> None:
    """What a session whose tool calls ran on the other build shows: done, each call once, where it
    was sent (``tools_pid``: the process of the tools worker, when it is the previous release's);
    or, were the two builds outside each other's window, each call refused once, naming both."""
    this = ActivityContract.this_build()
    calls = tool_calls(history)
    if this.accepts(release.contract) and release.contract.accepts(this):
        assert status == "completed" and refusals(history) == []
        assert [attempt for attempt, _ in calls] == [1, 1, 1]
        if tools_pid is not None:
            assert all(identity.startswith(f"{tools_pid}@") for _, identity in calls), calls
        assert (workspace / "lines.txt").read_text().strip() == "1"
    else:
        messages = refusals(history)
        assert messages and all(this.describe() in m and release.contract.describe() in m for m in messages), messages
        assert [attempt for attempt, _ in calls] == [1] * len(calls) and not (workspace / "notes.md").exists()


def test_the_previous_release_is_a_real_tree_of_agentrt_that_runs_from_its_own_files(
    previous_release: Release, tmp_path: Path
) -> None:
    dumped = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tests" / "_activity_schemas.py"), str(tmp_path)],
        env=previous_env(previous_release), capture_output=True, text=True, timeout=300,
    )
    assert dumped.returncode == 0, dumped.stderr
    previous = json.loads(dumped.stdout)
    assert Path(previous["module"]).is_relative_to(previous_release.path), previous["module"]
    current = activity_schemas(tmp_path)
    assert Path(current["module"]).is_relative_to(REPO_ROOT)
    changes = unreadable_changes(previous["activities"], current["activities"])
    this = ActivityContract.this_build()
    if this.accepts(previous_release.contract) and previous_release.contract.accepts(this):
        assert changes == []  # builds that run each other's activities read each other's payloads
    else:
        assert changes, "the contract window was closed with no change a build of the other contract cannot read"


def crossing(harness: Harness, tmp_path: Path) -> tuple[str, str, str, AgentrtConfig, dict[str, str]]:
    """A session queue, its tools queue and a store of their own: this release's configuration of
    them and the environment that gives the previous release's worker the same."""
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    tools_queue = f"{queue}-tools"
    url = f"sqlite:///{tmp_path / 'store.db'}"
    config = AgentrtConfig(temporal_address=harness.server.address, task_queue=queue, tool_task_queue=tools_queue, database_url=url)
    env = {
        "AGENTRT_TEMPORAL_ADDRESS": harness.server.address, "AGENTRT_TASK_QUEUE": queue,
        "AGENTRT_TOOL_TASK_QUEUE": tools_queue, "AGENTRT_DATABASE_URL": url,
    }
    return queue, tools_queue, url, config, env


async def test_this_releases_sessions_run_their_tool_calls_on_the_previous_releases_tools_worker(
    previous_release: Release, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue, tools_queue, url, config, env = crossing(harness, tmp_path)
    with previous_worker(previous_release, tmp_path, "--tools-only", **env) as tools:
        store = Store.open(url)  # after the previous release opened it: this release migrates a store in use
        try:
            async with build_worker(harness.temporal, config, store, default_registry(), role="models"):
                status, history = await run_session(harness, queue, tools_queue, workspace, tmp_path)
        finally:
            store.close()
    assert_crossed(previous_release, status, history, workspace, tools.pid)


async def test_the_previous_releases_sessions_run_their_tool_calls_on_this_releases_tools_worker(
    previous_release: Release, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue, tools_queue, url, config, env = crossing(harness, tmp_path)
    with previous_worker(previous_release, tmp_path, "--models-only", **env) as models:
        store = Store.open(url)
        try:
            async with build_worker(harness.temporal, config, store, default_registry(), role="tools"):
                status, history = await run_session(harness, queue, tools_queue, workspace, tmp_path)
        finally:
            store.close()
    # The session ran on the previous release: its workflow tasks were that process's. The server
    # records some started events with no identity; those name no other process either.
    workflow_tasks = [
        e.workflow_task_started_event_attributes.identity for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    ]
    named = [identity for identity in workflow_tasks if identity]
    assert named and all(identity.startswith(f"{models.pid}@") for identity in named), workflow_tasks
    assert_crossed(previous_release, status, history, workspace, None)


def _schema(properties: list[str], required: list[str]) -> dict[str, object]:
    return {"type": "object", "properties": {name: {"type": "string"} for name in properties}, "required": required}


def test_the_schema_check_names_a_field_gone_a_field_required_on_one_side_and_an_activity_gone() -> None:
    before = {
        "tool.execute": {"input": [_schema(["a", "b"], ["a"])], "output": _schema(["ok"], ["ok"])},
        "tools.list": {"input": [_schema(["names"], [])], "output": None},
    }
    after = {"tool.execute": {"input": [_schema(["a", "c"], ["a", "c"])], "output": _schema(["ok", "new"], ["ok"])}}
    assert unreadable_changes(before, after) == [
        "tool.execute input (top): fields gone: b",
        "tool.execute input (top): required on one side only: c",
        "tools.list: no longer registered",
    ]
    # A new optional field passes here (running both builds shows whether it is left out at its default).
    one = {"input": [_schema(["a"], ["a"])], "output": None}
    assert unreadable_changes({"x": one}, {"x": {"input": [_schema(["a", "new"], ["a"])], "output": None}}) == []
