"""One way the worker reads a file a session named (a scripted model's script, a skill, a workspace
file): never through a symbolic link, never a FIFO, device or socket, never more than a bound,
and never on the event loop.

A file a session names is chosen by whoever started the session (a script path) or by what the
model wrote (a workspace file): it may be a symlink to ``/etc/passwd``, a FIFO nobody writes to
(an ``open`` for reading blocks until a writer comes, and on the event loop every other session of
the worker waits with it), ``/dev/zero`` (a read never ends) or a file of gigabytes.
``read_regular_file`` resolves the path with Linux's ``openat2`` (``RESOLVE_NO_SYMLINKS``, and
``RESOLVE_BENEATH`` below a ``root``: no part of the path may be a symlink, none may climb out of
the root), falling back to a walk from ``/`` one component at a time with ``O_NOFOLLOW`` where
``openat2`` is missing (kernels before 5.6, seccomp filters that refuse it). The file is first
opened ``O_PATH`` (which opens nothing: no FIFO waits, no device acts) and checked to be a regular
file of at most ``limit`` bytes; only then is it opened for reading (``O_NONBLOCK``), checked to be
the same file, and read up to ``limit`` bytes, a file that grew past it in between refused too.
Async code calls ``read_regular_file_async``, which does all of it on a thread.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agentrt.activities.tools._workspace import file_kind, open_workspace
from agentrt.schemas import FileTooLargeError, InvalidPathError, NotARegularFileError, WorkspaceEscapeError

__all__ = ["RegularFile", "read_regular_file", "read_regular_file_async"]

# openat2(2): its syscall number (the same in every Linux architecture's table since 5.6) and its
# ``resolve`` flags (linux/openat2.h).
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_READ_CHUNK = 1024 * 1024


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
    _syscall = _libc.syscall
    _syscall.restype = ctypes.c_long
except (OSError, AttributeError):  # no C library to call through: the walk is used
    _libc = None
_openat2_works = _libc is not None


@dataclass(frozen=True)
class RegularFile:
    """A file read whole: ``data`` (at most the ``limit`` asked for), and the ``device``, ``inode``,
    ``mtime_ns`` and ``size`` (bytes) of the file read, to tell a later version of it apart."""

    data: bytes
    device: int
    inode: int
    mtime_ns: int
    size: int


def read_regular_file(path: str | os.PathLike[str], *, limit: int, root: Path | None = None, display: str | None = None) -> RegularFile:
    """The bytes of the regular file at ``path``, opened without following any symbolic link.

    ``path`` is taken from the current directory when relative; with ``root`` (an absolute path
    with no symlink in it, such as a checked workspace) it must lie below ``root`` and is taken
    from it when relative. ``display`` names the file in errors (``path`` by default). Blocking:
    call it on a thread (``read_regular_file_async``).

    Raises ``InvalidPathError`` when a part of the path is a symbolic link (or the path holds a
    NUL byte), ``WorkspaceEscapeError`` when it leaves ``root`` (``..``, an absolute path
    elsewhere), ``NotARegularFileError`` for a directory, FIFO, socket or device (nothing is read
    from it and nothing waits on it), ``FileTooLargeError`` for more than ``limit`` bytes (by its
    size, or grown past it while read), and ``OSError`` (``FileNotFoundError``,
    ``PermissionError`` ...) for the rest.
    """
    shown = display if display is not None else os.fspath(path)
    raw = os.fspath(path)
    if "\0" in raw:
        raise InvalidPathError(shown, "it holds a NUL byte")
    start, relative = _start(raw, root, shown)
    try:
        probe = _open(start, relative, os.O_PATH, shown, beneath=root is not None, root=root)
        try:
            info = os.fstat(probe)
        finally:
            os.close(probe)
        _check(info, shown, limit)
        fd = _open(start, relative, os.O_RDONLY | os.O_NONBLOCK, shown, beneath=root is not None, root=root)
    finally:
        os.close(start)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise InvalidPathError(shown, "it was replaced while it was opened")
        _check(opened, shown, limit)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total > limit:
        raise FileTooLargeError(shown, total, limit)
    return RegularFile(b"".join(chunks), opened.st_dev, opened.st_ino, opened.st_mtime_ns, total)


async def read_regular_file_async(
    path: str | os.PathLike[str], *, limit: int, root: Path | None = None, display: str | None = None
) -> RegularFile:
    """``read_regular_file`` on a thread: the event loop (every other session of the worker) never
    waits on the file system for it. Same arguments, result and errors."""
    return await asyncio.to_thread(read_regular_file, path, limit=limit, root=root, display=display)


def _start(raw: str, root: Path | None, shown: str) -> tuple[int, str]:
    """``(an O_PATH fd of the directory the walk starts from, the path relative to it)``: ``root``
    (opened from ``/`` following no symlink), or ``/``."""
    if root is None:
        absolute = os.path.abspath(raw)
        return os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), absolute.lstrip("/") or "."
    candidate = Path(raw) if os.path.isabs(raw) else root / raw
    lexical = Path(os.path.normpath(candidate))
    if not (lexical == root or lexical.is_relative_to(root)):
        raise WorkspaceEscapeError(shown, str(root))
    return open_workspace(root), lexical.relative_to(root).as_posix()


def _open(start: int, relative: str, flags: int, shown: str, *, beneath: bool, root: Path | None) -> int:
    """``relative`` opened from the directory ``start`` with ``flags``, no symlink followed."""
    global _openat2_works
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if _openat2_works:
        resolve = _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS | (_RESOLVE_BENEATH if beneath else 0)
        how = _OpenHow(flags, 0, resolve)
        fd = _syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(start), ctypes.c_char_p(os.fsencode(relative)),
                      ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EPERM, errno.E2BIG):
            raise _error(code, shown, root)
        _openat2_works = False  # no openat2 here: the walk below from now on
    return _walk(start, relative, flags, shown, root)


def _walk(start: int, relative: str, flags: int, shown: str, root: Path | None) -> int:
    """The walk ``openat2`` stands for: each directory opened ``O_PATH | O_NOFOLLOW`` from the one
    before it, ``..`` refused (the path was normalized, so one left means leaving the start)."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _error(errno.EXDEV, shown, root)
    directory = os.dup(start)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            except OSError as err:
                raise _error(err.errno or 0, shown, root) from err
            os.close(directory)
            directory = inner
        try:
            return os.open(parts[-1] if parts else ".", flags, dir_fd=directory)
        except OSError as err:
            raise _error(err.errno or 0, shown, root) from err
    finally:
        os.close(directory)


_SYMLINK = "a part of it is a symbolic link (or not a directory); files are opened by their real path only"


def _error(code: int, shown: str, root: Path | None) -> Exception:
    if code in (errno.ELOOP, errno.ENOTDIR):
        return InvalidPathError(shown, _SYMLINK)
    if code == errno.EXDEV:
        return WorkspaceEscapeError(shown, str(root) if root is not None else "/")
    if code == errno.ENAMETOOLONG:
        return InvalidPathError(shown, os.strerror(code))
    return OSError(code, os.strerror(code), shown)


def _check(info: os.stat_result, shown: str, limit: int) -> None:
    if stat.S_ISLNK(info.st_mode):  # the last part, opened O_PATH | O_NOFOLLOW: the link itself
        raise InvalidPathError(shown, _SYMLINK)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFileError(shown, file_kind(info.st_mode))
    if info.st_size > limit:
        raise FileTooLargeError(shown, info.st_size, limit)
