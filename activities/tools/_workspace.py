"""Workspace confinement: every path a tool touches is checked to stay inside the session's workspace."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agentrt.schemas import InvalidPathError, NotARegularFileError, WorkspaceEscapeError

__all__ = ["file_kind", "is_inside", "make_directories", "open_regular", "relative_display", "resolve_in_workspace"]

# Linux's NAME_MAX and PATH_MAX (limits.h), in bytes: longer names fail every file system call.
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4096


def is_inside(root: Path, path: Path) -> bool:
    """True when ``path`` (already resolved) is ``root`` (already resolved) or below it."""
    return path == root or path.is_relative_to(root)


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve ``path`` against ``workspace`` and return the real, absolute path.

    Relative paths are taken from the workspace; absolute paths are allowed only when
    they fall inside it. Symlinks are followed (``Path.resolve``), so a link whose target
    leaves the workspace is rejected just like ``..``. The path need not exist (e.g. a
    file about to be written); its existing prefix is resolved.

    Raises ``WorkspaceEscapeError`` when the real path is outside the resolved workspace and
    ``InvalidPathError`` for a NUL byte, a name too long for the OS or a symlink loop.
    The check happens here; a symlink swapped in between this call and the open is caught by
    ``open_regular`` and ``make_directories``, which follow none.
    """
    if "\0" in path:
        raise InvalidPathError(path, "it holds a NUL byte")
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError as err:
        raise InvalidPathError(path, f"it cannot be encoded as a file name ({err.reason})") from err
    if len(encoded) > PATH_MAX_BYTES or any(len(part) > NAME_MAX_BYTES for part in encoded.split(b"/")):
        raise InvalidPathError(path, f"a name longer than {NAME_MAX_BYTES} bytes or a path longer than {PATH_MAX_BYTES} (ENAMETOOLONG)")
    root = workspace.resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        real = candidate.resolve()
    except RuntimeError as err:  # Python 3.11's Path.resolve on a symlink loop
        raise InvalidPathError(path, f"symlink loop ({err})") from err
    except OSError as err:
        raise InvalidPathError(path, os.strerror(err.errno) if err.errno else str(err)) from err
    if not is_inside(root, real):
        raise WorkspaceEscapeError(path, str(root))
    return real


def open_regular(path: Path, display: str, flags: int, mode: int = 0o644, *, root: Path) -> int:
    """Open ``path`` (resolved, inside the resolved workspace ``root``) without blocking and make
    sure it is a regular file; returns the fd.

    The path is opened one component at a time from ``root``, none of them followed if it is a
    symlink (``O_NOFOLLOW``): ``path`` is already resolved, so a symlink met now was put there
    after the workspace check (a swap race) and the open fails instead of leaving the
    workspace. A FIFO, device or socket raises ``NotARegularFileError`` (opening a FIFO for
    reading would block a worker thread until a writer comes, forever if none does); a symlink
    met on the way, a name too long or a loop raises ``InvalidPathError``; other errors
    (missing file, permission) are ``OSError`` for the caller to word.
    """
    parts = path.relative_to(root).parts
    if not parts:
        raise NotARegularFileError(display, "directory")
    directory = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            directory = _step_into(directory, part, display, "no longer a directory (replaced while it was opened)")
        try:
            fd = os.open(parts[-1], flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=directory)
        except OSError as err:
            if err.errno == errno.ENXIO:  # a FIFO opened for writing with no reader, or a socket
                raise NotARegularFileError(display, _kind_at(parts[-1], directory)) from err
            if err.errno in (errno.ELOOP, errno.ENAMETOOLONG):
                raise InvalidPathError(display, os.strerror(err.errno)) from err
            raise
    finally:
        os.close(directory)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotARegularFileError(display, file_kind(info.st_mode))
    os.set_blocking(fd, True)
    return fd


def make_directories(directory: Path, display: str, *, root: Path) -> None:
    """Create ``directory`` (resolved, inside the resolved workspace ``root``) and its missing
    parents one component at a time, never following a symlink (one swapped in after the
    workspace check raises ``InvalidPathError`` instead of leading the new directories out)."""
    current = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in directory.relative_to(root).parts:
            try:
                os.mkdir(part, 0o755, dir_fd=current)
            except FileExistsError:
                pass
            current = _step_into(current, part, display, "not a directory (or was replaced while it was made)")
    finally:
        os.close(current)


def _step_into(directory: int, part: str, display: str, problem: str) -> int:
    """The fd of directory ``part`` in ``directory`` (which it closes), not followed if a symlink."""
    try:
        inner = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidPathError(display, f"a part of it is {problem}") from err
        raise
    os.close(directory)
    return inner


def _kind_at(name: str, directory: int) -> str:
    try:
        return file_kind(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return "special file"


def file_kind(mode: int) -> str:
    """What ``mode`` (``st_mode``) is, in words: ``fifo``, ``socket``, ``character device`` ..."""
    for test, kind in (
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
    ):
        if test(mode):
            return kind
    return "special file"


def relative_display(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` in POSIX form, ``.`` for the root itself."""
    rel = path.relative_to(root).as_posix()
    return rel or "."
