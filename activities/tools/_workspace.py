"""Workspace confinement: every path a tool touches is checked to stay inside the session's workspace.

A session's workspace is recorded as its real path (``os.path.realpath`` when the session, task or
graph starts), so it must still resolve to itself when a tool uses it: a workspace one of whose
parts was since swapped for a symlink (another session may write the directory above it) would
otherwise lead every tool out of the directory the session was confined to. ``checked_workspace``
is that check, shared by every tool and activity that works in a workspace; the opens that
follow start from ``/`` one component at a time, following no symlink, so a swap after the check
is refused at the open instead of being followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agentrt.schemas import InvalidPathError, NotARegularFileError, WorkspaceEscapeError

__all__ = [
    "checked_workspace",
    "file_kind",
    "is_inside",
    "make_directories",
    "open_directory",
    "open_regular",
    "open_workspace",
    "relative_display",
    "resolve_in_workspace",
]

# Linux's NAME_MAX and PATH_MAX (limits.h), in bytes: longer names fail every file system call.
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4096


def is_inside(root: Path, path: Path) -> bool:
    """True when ``path`` (already resolved) is ``root`` (already resolved) or below it."""
    return path == root or path.is_relative_to(root)


def checked_workspace(workspace: Path | str) -> Path:
    """``workspace`` as a ``Path``, once it is certain to still be the directory the session was
    given: an absolute path that resolves to itself (no symlink in any of its parts, no ``..``)
    and is a directory.

    Raises ``WorkspaceEscapeError`` naming the workspace and what it resolves to now when it does
    not resolve to itself (a part swapped for a symlink after the session started, or a path that
    was never real), when it no longer exists, or when it is no longer a directory. Workspaces are
    stored real (``AgentClient.new_config``, ``start_task``, ``start_graph``), so only a change on
    disk since the start makes this fail.
    """
    path = Path(workspace)
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError as err:
        raise workspace_refused(path, "is not a directory: it no longer exists") from err
    except RuntimeError as err:  # Python 3.11's Path.resolve on a symlink loop
        raise workspace_refused(path, f"no longer resolves ({err})") from err
    except OSError as err:
        raise workspace_refused(path, f"no longer resolves ({err.strerror or err})") from err
    if not path.is_absolute():
        raise workspace_refused(path, f"is not an absolute path (it resolves to {str(real)!r} from here)")
    if real != path:
        raise workspace_refused(path, f"now resolves to {str(real)!r}: a part of its path is a symbolic link")
    if not real.is_dir():
        raise workspace_refused(path, "is no longer a directory")
    return path


def workspace_refused(workspace: Path, problem: str) -> WorkspaceEscapeError:
    """The ``WorkspaceEscapeError`` of a workspace that is no longer itself (``problem`` says how)."""
    err = WorkspaceEscapeError(str(workspace), str(workspace))
    message = f"the workspace {str(workspace)!r} {problem}; tools work only in the directory the session started with"
    err.args = (message + ", so nothing was done",)
    return err


def open_workspace(workspace: Path) -> int:
    """An ``O_PATH`` fd of ``workspace`` (a real, absolute path, as ``checked_workspace`` returns),
    opened one component at a time from ``/`` without following any symlink: the directory this
    fd holds is the one at that path now, whatever is swapped in later. The caller closes it.

    Raises ``WorkspaceEscapeError`` when a part of the path is a symlink or not a directory (the
    workspace was swapped after the check) and ``OSError`` for other failures (missing, permission).
    """
    directory = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in workspace.relative_to("/").parts:
            directory = _step_into(directory, part, str(workspace), "a symbolic link or no directory")
    except InvalidPathError as err:
        os.close(directory)
        raise workspace_refused(workspace, "has a part that is now a symbolic link or no directory") from err
    except BaseException:
        os.close(directory)
        raise
    return directory


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve ``path`` against ``workspace`` and return the real, absolute path.

    Relative paths are taken from the workspace; absolute paths are allowed only when
    they fall inside it. Symlinks are followed (``Path.resolve``), so a link whose target
    leaves the workspace is rejected just like ``..``. The path need not exist (e.g. a
    file about to be written); its existing prefix is resolved.

    Raises ``WorkspaceEscapeError`` when the workspace is no longer itself (``checked_workspace``)
    or the real path is outside it, and ``InvalidPathError`` for a NUL byte, a name too long for
    the OS or a symlink loop. The check happens here; a symlink swapped in between this call and
    the open is caught by ``open_regular``, ``open_directory`` and ``make_directories``, which
    follow none, from ``/`` on.
    """
    if "\0" in path:
        raise InvalidPathError(path, "it holds a NUL byte")
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError as err:
        raise InvalidPathError(path, f"it cannot be encoded as a file name ({err.reason})") from err
    if len(encoded) > PATH_MAX_BYTES or any(len(part) > NAME_MAX_BYTES for part in encoded.split(b"/")):
        raise InvalidPathError(path, f"a name longer than {NAME_MAX_BYTES} bytes or a path longer than {PATH_MAX_BYTES} (ENAMETOOLONG)")
    root = checked_workspace(workspace)
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

    The path is opened one component at a time from ``/`` (``open_workspace``, then on below
    ``root``), none of them followed if it is a symlink (``O_NOFOLLOW``): ``root`` and ``path``
    are already resolved, so a symlink met now was put there after the workspace check (a swap
    race) and the open fails instead of leaving the workspace (``WorkspaceEscapeError`` for a
    part of ``root``). A FIFO, device or socket raises ``NotARegularFileError`` (opening a FIFO for
    reading would block a worker thread until a writer comes, forever if none does); a symlink
    met on the way, a name too long or a loop raises ``InvalidPathError``; other errors
    (missing file, permission) are ``OSError`` for the caller to word.
    """
    parts = path.relative_to(root).parts
    if not parts:
        raise NotARegularFileError(display, "directory")
    directory = open_workspace(root)
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


def open_directory(directory: Path, display: str, *, root: Path) -> int:
    """A read fd (for ``os.scandir``) of ``directory`` (resolved, inside the resolved workspace
    ``root``), opened one component at a time from ``/`` following no symlink, as ``open_regular``
    opens a file; the caller closes it. Raises ``WorkspaceEscapeError`` for a part of ``root``
    swapped for a symlink, ``InvalidPathError`` for one below it, ``OSError`` otherwise."""
    current = open_workspace(root)
    try:
        for part in directory.relative_to(root).parts:
            current = _step_into(current, part, display, "no longer a directory (replaced while it was opened)")
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=current)
    finally:
        os.close(current)


def make_directories(directory: Path, display: str, *, root: Path) -> None:
    """Create ``directory`` (resolved, inside the resolved workspace ``root``) and its missing
    parents one component at a time from ``/``, never following a symlink (one swapped in after
    the workspace check raises ``WorkspaceEscapeError`` or ``InvalidPathError`` instead of leading
    the new directories out)."""
    current = open_workspace(root)
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
