"""The git commit a workspace is at, read from its ``.git`` files: no ``git`` process runs, so
nothing in the repository (hooks, ``core.fsmonitor``, a config's ``!`` aliases) can execute.

``head_commit`` answers the commit id HEAD names (40 or 64 hex digits) or None: no repository,
an unborn branch, a ref store it does not read (reftable), or files that are not what git writes.
The repository is untrusted (a session may have written it): every file read is a regular file of
bounded size (a FIFO, a device or a symlink to one is refused without blocking), ref names are
checked before they name a path, symbolic refs are followed a bounded number of times, and only
a checked commit id ever leaves here, so no text of the repository reaches a prompt.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

__all__ = ["MAX_GIT_FILE_BYTES", "MAX_PACKED_REFS_BYTES", "head_commit"]

# Bytes read of HEAD, a loose ref, ``commondir`` or a ``.git`` file, and of ``packed-refs``.
MAX_GIT_FILE_BYTES = 4_096
MAX_PACKED_REFS_BYTES = 4 * 1024 * 1024
# Symbolic refs followed from HEAD (git's own limit is 5), and parent directories searched for ``.git``.
MAX_SYMREF_DEPTH = 5
MAX_PARENT_DEPTH = 64

_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REF_NAME = re.compile(r"refs/[A-Za-z0-9._/+-]{1,240}")


def head_commit(workspace: Path) -> str | None:
    """The commit id HEAD of the repository holding ``workspace`` (it, or the nearest parent with a
    ``.git``) names, lower-case hex; None when there is none to read (see the module)."""
    git_dir = _git_dir(workspace)
    if git_dir is None:
        return None
    common = _common_dir(git_dir)
    text = _read(git_dir / "HEAD", MAX_GIT_FILE_BYTES)
    for _ in range(MAX_SYMREF_DEPTH + 1):
        if text is None:
            return None
        text = text.strip()
        if _COMMIT.fullmatch(text):
            return text
        if not text.startswith("ref:"):
            return None
        ref = text[len("ref:"):].strip()
        if not _REF_NAME.fullmatch(ref) or ".." in ref or "//" in ref or ref.endswith(("/", ".lock")):
            return None
        text = _read(git_dir / ref, MAX_GIT_FILE_BYTES) if git_dir != common else None
        if text is None:
            text = _read(common / ref, MAX_GIT_FILE_BYTES)
        if text is None:
            return _packed(common, ref)
    return None


def _git_dir(workspace: Path) -> Path | None:
    """The git directory of the workspace's repository: a ``.git`` directory, or where a ``.git``
    file (``gitdir: <path>``, a worktree or submodule) points."""
    here = Path(os.path.abspath(workspace))
    for _ in range(MAX_PARENT_DEPTH):
        dot = here / ".git"
        try:
            mode = os.stat(dot).st_mode
        except (OSError, ValueError):
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            return dot
        if mode is not None:
            text = _read(dot, MAX_GIT_FILE_BYTES)
            if text is None or not text.startswith("gitdir:"):
                return None
            target = Path(text[len("gitdir:"):].strip())
            target = target if target.is_absolute() else here / target
            return target if _is_dir(target) else None
        if here.parent == here:
            return None
        here = here.parent
    return None


def _common_dir(git_dir: Path) -> Path:
    """Where the shared refs live: ``commondir`` of a worktree's git directory, else the directory itself."""
    text = _read(git_dir / "commondir", MAX_GIT_FILE_BYTES)
    if text is None or not text.strip():
        return git_dir
    target = Path(text.strip())
    target = target if target.is_absolute() else git_dir / target
    return target if _is_dir(target) else git_dir


def _packed(common: Path, ref: str) -> str | None:
    """``ref``'s commit id in ``packed-refs`` (lines ``<id> <ref>``), or None."""
    text = _read(common / "packed-refs", MAX_PACKED_REFS_BYTES)
    if text is None:
        return None
    for line in text.splitlines():
        commit, _, name = line.partition(" ")
        if name.strip() == ref and _COMMIT.fullmatch(commit):
            return commit
    return None


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _read(path: Path, limit: int) -> str | None:
    """At most ``limit`` bytes of ``path`` as text, when it is a regular file; None otherwise. Opened
    non-blocking and checked after opening, so a FIFO or device put in its place is never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")
