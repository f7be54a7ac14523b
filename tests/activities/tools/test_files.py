"""``read_regular_file``, the one way the worker reads a file a session named, against the files a
hostile session would name: a symlink to ``/etc/passwd`` or out of the root (as the last part and
as a part above it), a FIFO nobody writes to, ``/dev/zero`` through a symlink, a file over the
bound. Each is refused with a typed error and nothing waits; the same holds for the walk used where
the kernel has no ``openat2``. The fs tools meet the same attacks and refuse them too."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrt.activities.tools import ToolContext, read_regular_file, read_regular_file_async
from agentrt.activities.tools import _files
from agentrt.schemas import FileTooLargeError, InvalidPathError, NotARegularFileError, ToolCall, ToolError, WorkspaceEscapeError

LIMIT = 1024 * 1024


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs with ``openat2`` and with the component walk that stands in for it."""
    if request.param == "walk":
        monkeypatch.setattr(_files, "_openat2_works", False)
    yield request.param


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("fine")
    (tmp_path / "outside.txt").write_text("secret outside the root")
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "out").symlink_to(tmp_path / "outside.txt")
    (root / "link-dir").symlink_to(root / "sub")  # a parent part that is a symlink (inside, even)
    (root / "out-dir").symlink_to(tmp_path)  # a parent part that leads out
    (root / "zero").symlink_to("/dev/zero")
    os.mkfifo(root / "fifo")
    with open(root / "huge.bin", "wb") as f:
        f.truncate(LIMIT + 1)  # sparse: over the bound without filling the disk
    return root


def test_a_regular_file_inside_the_root_is_read(root: Path, resolution: str) -> None:
    assert read_regular_file("sub/ok.txt", limit=LIMIT, root=root).data == b"fine"
    assert read_regular_file(root / "sub" / "ok.txt", limit=LIMIT).data == b"fine"


@pytest.mark.parametrize("name", ["passwd", "out", "zero"])
def test_a_symlink_as_the_last_part_is_refused_wherever_it_leads(root: Path, resolution: str, name: str) -> None:
    with pytest.raises(InvalidPathError, match="symbolic link"):
        read_regular_file(name, limit=LIMIT, root=root)
    with pytest.raises(InvalidPathError, match="symbolic link"):
        read_regular_file(root / name, limit=LIMIT)


@pytest.mark.parametrize("path", ["link-dir/ok.txt", "out-dir/outside.txt"])
def test_a_symlink_as_a_parent_part_is_refused(root: Path, resolution: str, path: str) -> None:
    with pytest.raises(InvalidPathError, match="symbolic link"):
        read_regular_file(path, limit=LIMIT, root=root)
    with pytest.raises(InvalidPathError, match="symbolic link"):
        read_regular_file(root / path, limit=LIMIT)


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd"])
def test_a_path_out_of_the_root_is_refused(root: Path, resolution: str, path: str) -> None:
    with pytest.raises(WorkspaceEscapeError):
        read_regular_file(path, limit=LIMIT, root=root)


def test_a_fifo_without_a_writer_is_refused_at_once(root: Path, resolution: str) -> None:
    with pytest.raises(NotARegularFileError, match="fifo"):
        read_regular_file("fifo", limit=LIMIT, root=root)


def test_a_device_is_refused_unread(resolution: str) -> None:
    with pytest.raises(NotARegularFileError, match="character device"):
        read_regular_file("/dev/zero", limit=LIMIT)


def test_a_directory_is_refused(root: Path, resolution: str) -> None:
    with pytest.raises(NotARegularFileError, match="directory"):
        read_regular_file("sub", limit=LIMIT, root=root)


def test_a_file_over_the_bound_is_refused_unread(root: Path, resolution: str) -> None:
    with pytest.raises(FileTooLargeError) as caught:
        read_regular_file("huge.bin", limit=LIMIT, root=root)
    assert (caught.value.size, caught.value.limit) == (LIMIT + 1, LIMIT)


def test_a_missing_file_is_an_os_error(root: Path, resolution: str) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file("sub/none.txt", limit=LIMIT, root=root)


async def test_the_async_read_leaves_the_event_loop_free(root: Path) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.ensure_future(tick())
    try:
        file = await read_regular_file_async("sub/ok.txt", limit=LIMIT, root=root)
    finally:
        ticker.cancel()
    assert file.data == b"fine" and ticks > 0


# ---------------------------------------------------------------- the fs tools meet the same attacks


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("passwd", WorkspaceEscapeError),
        ("out", WorkspaceEscapeError),
        ("out-dir/outside.txt", WorkspaceEscapeError),
        ("zero", WorkspaceEscapeError),
        ("fifo", NotARegularFileError),
    ],
)
def test_fs_read_refuses_what_leads_out_of_the_workspace_or_would_block(
    registry, root: Path, name: str, error: type[ToolError]
) -> None:
    with pytest.raises(error):
        registry.execute(ToolCall(id="c1", name="fs.read", arguments={"path": name}), ToolContext(workspace=root))


def test_fs_read_of_a_huge_file_returns_its_bounded_first_part(registry, root: Path) -> None:
    text = registry.execute(ToolCall(id="c1", name="fs.read", arguments={"path": "huge.bin"}), ToolContext(workspace=root)).text
    assert "[truncated: showing bytes 0-65536 of 1048577]" in text
