"""A cgroup of one call: what a sandboxed command and everything it starts may hold together.

Resource limits are per process (address space) or per user namespace (processes); a cgroup
bounds the call as a whole: ``memory.max`` (its memory, page cache and tmpfs pages included) and
``pids.max``. It needs a cgroup v2 directory delegated to the worker (``[sandbox] cgroup`` in
agentrt.toml): one the worker may create children in, with the ``memory`` and ``pids``
controllers in its ``cgroup.subtree_control`` (systemd: a unit with ``Delegate=yes``). Without
one, nothing is made and the per-process limits (``SandboxLimits``) are what holds; cgroup v1 and
hybrid hosts have no such directory. Each call's cgroup is ``<that directory>/call-<random>``;
the command enters it before ``bwrap`` starts (``enter_argv``), and ``close()`` kills what is
left in it (``cgroup.kill``) and removes it. Source: the kernel's cgroup-v2 documentation.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

__all__ = ["CallCgroup", "cgroup_problem"]

# What a call's cgroup needs of its parent.
CONTROLLERS = ("memory", "pids")
_KILL_WAIT_SECONDS = 2.0


def cgroup_problem(parent: str | Path) -> str | None:
    """Why calls cannot get cgroups under ``parent``, or None when they can: it must be a cgroup v2
    directory this process may create children in, with ``memory`` and ``pids`` delegated."""
    path = Path(parent)
    try:
        controllers = (path / "cgroup.subtree_control").read_text().split()
    except OSError as err:
        return f"{path} is not a cgroup v2 directory ({err.strerror or err})"
    missing = [c for c in CONTROLLERS if c not in controllers]
    if missing:
        return f"{path}/cgroup.subtree_control does not enable {', '.join(missing)}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"this worker may not create cgroups in {path}"
    return None


class CallCgroup:
    """The cgroup of one call under ``parent`` (``cgroup_problem(parent)`` is None), holding at most
    ``memory_bytes`` of memory (no swap) and ``processes`` processes and threads. ``create()``
    makes it; ``enter_argv(argv)`` is ``argv`` started inside it; ``close()`` ends it."""

    def __init__(self, parent: str | Path, *, memory_bytes: int, processes: int) -> None:
        self.path = Path(parent) / f"call-{uuid.uuid4().hex[:16]}"
        self._memory_bytes = memory_bytes
        self._processes = processes

    def create(self) -> Path:
        """Make the cgroup and set the limits of the controllers its parent enables (both, when
        ``cgroup_problem`` passed); raises ``OSError`` (the cgroup removed again) when it cannot."""
        enabled = (self.path.parent / "cgroup.subtree_control").read_text().split()
        self.path.mkdir()
        try:
            if "memory" in enabled:
                (self.path / "memory.max").write_text(str(self._memory_bytes))
                with contextlib.suppress(FileNotFoundError):  # no swap accounting on this kernel
                    (self.path / "memory.swap.max").write_text("0")
            if "pids" in enabled:
                (self.path / "pids.max").write_text(str(self._processes))
        except OSError:
            self.close()
            raise
        return self.path

    def enter_argv(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into this cgroup, so that nothing the
        command starts is ever outside it (exit 125 when it cannot)."""
        script = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", str(self.path / "cgroup.procs"), *argv]

    def close(self) -> None:
        """Kill every process left in the cgroup and remove it (best effort: a cgroup that will not
        go is left for the parent's owner)."""
        if not self.path.exists():
            return
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            for pid in self._pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + _KILL_WAIT_SECONDS
        while self._pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def _pids(self) -> list[int]:
        try:
            return [int(line) for line in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []
