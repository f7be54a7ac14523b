"""A workspace is used only while it resolves to itself: checked_workspace, the opens that follow no symlink
from ``/``, and every tool that works in a workspace refusing one swapped for a symlink."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentrt.activities.tools import ToolContext, checked_workspace, discover_skills, run_command, sandbox_status
from agentrt.activities.tools._sandbox import sandboxed_argv
from agentrt.activities.tools._workspace import open_directory, open_regular, open_workspace
from agentrt.schemas import ToolCall, WorkspaceEscapeError


@pytest.fixture
def swapped(workspace: Path, outside: Path) -> Path:
    """The workspace after another session replaced it with a symlink to ``outside``."""
    os.rename(workspace, workspace.with_name("ws-before"))
    workspace.symlink_to(outside)
    return workspace


def test_a_real_workspace_is_returned_as_it_is(workspace: Path) -> None:
    assert checked_workspace(str(workspace)) == workspace


def test_a_workspace_reached_through_a_symlinked_component_is_refused_naming_what_it_resolves_to(
    workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "alias").symlink_to(tmp_path)

    with pytest.raises(WorkspaceEscapeError) as raised:
        checked_workspace(tmp_path / "alias" / "ws")

    assert str(raised.value) == (
        f"the workspace {str(tmp_path / 'alias' / 'ws')!r} now resolves to {str(workspace)!r}: a part of its path is "
        "a symbolic link; tools work only in the directory the session started with, so nothing was done"
    )


def test_a_workspace_replaced_by_a_symlink_is_refused(swapped: Path, outside: Path) -> None:
    with pytest.raises(WorkspaceEscapeError, match=f"now resolves to {str(outside)!r}"):
        checked_workspace(swapped)


def test_a_workspace_replaced_by_a_file_is_refused(workspace: Path) -> None:
    workspace.rmdir()
    workspace.write_text("not a directory")

    with pytest.raises(WorkspaceEscapeError, match="is no longer a directory"):
        checked_workspace(workspace)


def test_a_missing_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceEscapeError, match="it no longer exists"):
        checked_workspace(tmp_path / "gone")


def test_a_relative_workspace_is_refused(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workspace.parent)

    with pytest.raises(WorkspaceEscapeError, match="is not an absolute path"):
        checked_workspace("ws")


def test_a_swap_after_the_check_is_refused_at_the_open_and_nothing_is_created_outside(
    workspace: Path, outside: Path
) -> None:
    root = checked_workspace(workspace)
    os.rename(workspace, workspace.with_name("ws-before"))
    workspace.symlink_to(outside)

    with pytest.raises(WorkspaceEscapeError, match="has a part that is now a symbolic link"):
        open_regular(root / "planted.txt", "planted.txt", os.O_WRONLY | os.O_CREAT, root=root)

    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_directory_open_after_a_swap_is_refused(workspace: Path, outside: Path) -> None:
    root = checked_workspace(workspace)
    os.rename(workspace, workspace.with_name("ws-before"))
    workspace.symlink_to(outside)

    with pytest.raises(WorkspaceEscapeError):
        open_directory(root, ".", root=root)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("fs.read", {"path": "secret.txt"}),
        ("fs.list", {"path": "."}),
        ("fs.search", {"pattern": "secret"}),
        ("fs.write", {"path": "planted.txt", "content": "x"}),
        ("shell.run", {"command": "cat secret.txt; echo x > planted.txt"}),
        ("skill.activate", {"name": "evil"}),
        ("skill.deactivate", {"name": "evil"}),
    ],
)
def test_every_tool_that_works_in_the_workspace_refuses_one_swapped_for_a_symlink(
    registry, swapped: Path, outside: Path, tool: str, arguments: dict[str, object]
) -> None:
    with pytest.raises(WorkspaceEscapeError, match=f"now resolves to {str(outside)!r}"):
        registry.execute(ToolCall(id="c1", name=tool, arguments=arguments), ToolContext(workspace=swapped))

    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_task_command_in_a_swapped_workspace_does_not_start(swapped: Path, outside: Path) -> None:
    with pytest.raises(WorkspaceEscapeError):
        run_command("echo x > planted.txt", ToolContext(workspace=swapped), timeout=10)

    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_skills_of_a_swapped_workspace_are_not_read_and_the_reason_is_reported(swapped: Path, outside: Path) -> None:
    skill = outside / ".agentrt" / "skills" / "evil"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: evil\ndescription: Planted outside.\n---\nDo harm.\n")

    found = discover_skills(swapped, [])

    assert found.skills == []
    assert found.problems == [
        f"{swapped / '.agentrt' / 'skills'}: skipped: the workspace {str(swapped)!r} now resolves to {str(outside)!r}: "
        "a part of its path is a symbolic link; tools work only in the directory the session started with, so nothing was done"
    ]


def test_an_open_workspace_fd_still_holds_the_directory_after_the_path_is_swapped(workspace: Path, outside: Path) -> None:
    fd = open_workspace(workspace)
    try:
        os.rename(workspace, workspace.with_name("ws-before"))
        workspace.symlink_to(outside)

        assert os.stat(".", dir_fd=fd).st_ino == os.stat(workspace.with_name("ws-before")).st_ino
    finally:
        os.close(fd)


def test_the_sandbox_mounts_the_directory_its_fd_holds_not_what_the_path_leads_to_later(
    workspace: Path, outside: Path
) -> None:
    status = sandbox_status()
    assert status.available and status.path is not None, status.reason
    fd = open_workspace(workspace)
    try:
        os.rename(workspace, workspace.with_name("ws-before"))
        workspace.symlink_to(outside)
        argv = sandboxed_argv(
            status.path, ["/bin/sh", "-c", "echo x > planted.txt"], workspace, "workspace_write", network=False, env={},
            workspace_fd=fd,
        )
        done = subprocess.run(argv, pass_fds=(fd,), capture_output=True, check=False, env={})
    finally:
        os.close(fd)

    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (workspace.with_name("ws-before") / "planted.txt").read_text() == "x\n"


def test_a_sandboxed_command_holds_no_descriptor_of_its_workspace(ctx: ToolContext) -> None:
    done = run_command("ls /proc/self/fd", ctx, timeout=10)

    assert done.exit_code == 0, done.stderr
    # stdin, stdout, stderr and the directory ls lists; a workspace fd would let ".." lead out of the mount.
    assert done.stdout.split() == ["0", "1", "2", "3"]
