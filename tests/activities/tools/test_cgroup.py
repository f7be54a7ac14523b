"""A cgroup per call where the worker has a delegated cgroup v2 directory: a command runs inside its
call's cgroup, which is gone with everything in it when the call ends; a worker that was told to
use one and cannot runs nothing. (This host's cgroup v2 has no memory or pids controller, so the
limits themselves are not measured here: docs/tools-and-policy.md.)"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrt.activities.tools import ToolContext, cgroup_problem
from agentrt.schemas import ToolCall, ToolError

UNIFIED = Path("/sys/fs/cgroup/unified")  # hybrid hosts; on a pure cgroup v2 host the root is /sys/fs/cgroup


def shell(registry, ctx: ToolContext, command: str) -> str:
    return registry.execute(ToolCall(id="c1", name="shell.run", arguments={"command": command}), ctx).text


def _writable_cgroup2() -> Path | None:
    for root in (Path("/sys/fs/cgroup"), UNIFIED):
        if (root / "cgroup.procs").exists() and (root / "cgroup.subtree_control").exists() and os.access(root, os.W_OK):
            return root
    return None


@pytest.fixture
def delegated() -> Iterator[Path]:
    """A cgroup v2 directory of this test's own, standing for the one an operator delegates."""
    root = _writable_cgroup2()
    if root is None:
        pytest.skip("no writable cgroup v2 hierarchy on this host")
    parent = root / f"agentrt-test-{uuid.uuid4().hex[:8]}"
    parent.mkdir()
    yield parent
    for child in parent.glob("call-*"):
        child.rmdir()
    parent.rmdir()


def test_a_directory_that_is_no_cgroup_is_named_as_the_problem(tmp_path: Path) -> None:
    assert "is not a cgroup v2 directory" in (cgroup_problem(tmp_path) or "")


def test_a_cgroup_without_the_memory_and_pids_controllers_is_named_as_the_problem(delegated: Path) -> None:
    enabled = (delegated / "cgroup.subtree_control").read_text().split()
    if "memory" in enabled and "pids" in enabled:
        pytest.skip("this host delegates both controllers")
    assert "does not enable" in (cgroup_problem(delegated) or "")


def test_a_worker_that_cannot_make_the_call_s_cgroup_runs_nothing(registry, workspace: Path, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot make the call's cgroup"):
        shell(registry, ToolContext(workspace=workspace, cgroup=str(tmp_path)), "touch ran")

    assert not (workspace / "ran").exists()


def test_the_command_runs_in_its_call_s_cgroup_which_ends_with_the_call(registry, workspace: Path, delegated: Path) -> None:
    seen: list[list[str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for child in delegated.glob("call-*"):
                pids = (child / "cgroup.procs").read_text().split() if (child / "cgroup.procs").exists() else []
                if pids:
                    seen.append(pids)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = shell(registry, ToolContext(workspace=workspace, cgroup=str(delegated)), "(setsid sleep 60 &); sleep 1; echo ran")
    finally:
        done.set()
        watcher.join()

    assert "ran" in out
    assert seen and max(len(pids) for pids in seen) >= 3  # bwrap, its init and the command, all inside
    assert list(delegated.glob("call-*")) == []  # killed and removed with the call
