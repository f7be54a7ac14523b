"""``shell.run``: run a command in the workspace, in the OS sandbox, with a scrubbed environment, a time bound and group kill."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from agentrt.activities.tools._registry import Tool, ToolArgs, ToolContext, ToolOutput
from agentrt.activities.tools._cgroup import CallCgroup
from agentrt.activities.tools._egress import EgressProxy, parse_egress_allow
from agentrt.activities.tools._sandbox import (
    DEFAULT_LIMITS,
    SandboxUnavailable,
    sandbox_status,
    sandboxed_argv,
    seccomp_pipe,
)
from agentrt.activities.tools._secrets import REDACTION_MARGIN, redacted_window
from agentrt.activities.tools._workspace import checked_workspace, open_workspace
from agentrt.schemas import ToolError

__all__ = ["CommandRun", "ShellRun", "command_line", "run_command", "scrubbed_environment"]

OUTPUT_CAP_BYTES = 64 * 1024
TERM_GRACE_SECONDS = 2.0
_POLL_SECONDS = 0.1
_HEARTBEAT_SECONDS = 0.5
_DRAIN_SECONDS = 1.0

ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER", "SHELL", "TMPDIR")
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def scrubbed_environment(source: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command sees: allowlisted variables only, none that looks like a secret.

    Starts from ``ENV_ALLOWLIST`` taken from ``source`` (default ``os.environ``) and drops
    any name containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL or AUTH. PATH falls back
    to ``/usr/local/bin:/usr/bin:/bin`` when absent.
    """
    source = dict(os.environ) if source is None else source
    env = {
        name: source[name]
        for name in ENV_ALLOWLIST
        if name in source and not any(marker in name.upper() for marker in SECRET_MARKERS)
    }
    env.setdefault("PATH", _DEFAULT_PATH)
    return env


class _CappedReader(threading.Thread):
    """Drains one pipe, keeping the first and the last ``OUTPUT_CAP_BYTES / 2`` and counting the rest.

    The end of a command's output is where its error usually is, so a cut keeps both ends. Each end
    is read ``REDACTION_MARGIN`` bytes further than it is shown, so that a secret's value that
    crosses a cut is redacted whole (``redacted_window``), not shown in part.
    """

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self._fd = fd
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self) -> None:
        keep = OUTPUT_CAP_BYTES // 2 + REDACTION_MARGIN
        try:
            while chunk := os.read(self._fd, 65536):
                self.total += len(chunk)
                room = keep - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > keep:
                        del self.tail[: len(self.tail) - keep]
        except OSError:
            pass
        finally:
            os.close(self._fd)

    def text(self) -> str:
        half = OUTPUT_CAP_BYTES // 2
        if self.total <= OUTPUT_CAP_BYTES:  # all of it was kept (in head and tail)
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        whole = bytes(self.head + self.tail) if self.total <= len(self.head) + len(self.tail) else None
        head_bytes = whole[: half + REDACTION_MARGIN] if whole is not None else bytes(self.head)
        tail_bytes = whole[-(half + REDACTION_MARGIN):] if whole is not None else bytes(self.tail)
        head = head_bytes.decode("utf-8", errors="replace")
        tail = tail_bytes.decode("utf-8", errors="replace")
        shown_head = redacted_window(head, 0, len(head_bytes[:half].decode("utf-8", errors="replace")))
        shown_tail = redacted_window(tail, len(tail) - len(tail_bytes[-half:].decode("utf-8", errors="replace")), len(tail))
        left_out = self.total - 2 * half
        return f"{shown_head}\n[truncated: {left_out} of {self.total} bytes left out here; the first and the last {half} are shown]\n{shown_tail}"


def _group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` still runs; zombies awaiting their reaper do not count (Linux)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True  # no procfs: trust killpg
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state, _ppid, pgrp = f.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == pgid and state not in ("Z", "X"):
            return True
    return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, then SIGKILL whatever is left after the grace period."""
    pgid = proc.pid  # start_new_session: the shell leads its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + TERM_GRACE_SECONDS
    while time.monotonic() < deadline:
        proc.poll()
        if not _group_alive(pgid):
            return
        time.sleep(_POLL_SECONDS)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


# The largest file a command may write, in the 512-byte blocks of `ulimit -f` (1 GiB): a command
# that writes without end fails at this size instead of filling the disk or the memory /dev lives in.
MAX_FILE_BLOCKS = 2 * 1024 * 1024
# HOME inside the sandbox: its private /tmp (the worker's home is not there).
SANDBOX_HOME = "/tmp"


def command_line(
    argv: list[str],
    workspace: Path,
    ctx: ToolContext,
    *,
    workspace_fd: int | None = None,
    seccomp_fd: int | None = None,
    egress_dir: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """What to start for ``argv`` in ``workspace`` under ``ctx.sandbox``, and the environment to start it with.

    ``read_only`` and ``workspace_write``: ``bwrap`` around ``argv`` (see ``_sandbox``), started
    with an empty environment; the command gets the scrubbed one with ``HOME=/tmp`` and may read
    ``ctx.skill_paths`` (read-only). ``workspace_fd``: an open fd of ``workspace`` that ``bwrap``
    mounts instead of looking the path up again (pass it to the process: ``pass_fds``), as is
    ``seccomp_fd`` (``seccomp_pipe()``). With ``ctx.network``, ``egress_dir`` is the directory of
    the call's running ``EgressProxy``. ``danger_full_access``: ``argv`` itself with the scrubbed
    environment. Raises ``SandboxUnavailable`` when the sandbox is needed and ``bwrap`` cannot run here.
    """
    env = scrubbed_environment()
    if ctx.sandbox == "danger_full_access":
        return argv, env
    status = sandbox_status()
    if not status.available or status.path is None:
        raise SandboxUnavailable(status.reason or "bwrap not found")
    env["HOME"] = SANDBOX_HOME
    env["TMPDIR"] = "/tmp"
    skills = _skill_paths(ctx)
    argv = sandboxed_argv(
        status.path, argv, workspace, ctx.sandbox, network=ctx.network, env=env, read_paths=skills,
        workspace_fd=workspace_fd, seccomp_fd=seccomp_fd, egress_dir=egress_dir,
    )
    return argv, {}


def _skill_paths(ctx: ToolContext) -> list[Path]:
    """``ctx.skill_paths`` resolved (skill.activate shows a skill's files by their real paths), for the
    sandbox to mount read-only: a skill's scripts run from there. One that does not resolve is left out."""
    paths = []
    for path in ctx.skill_paths:
        try:
            paths.append(Path(path).resolve())
        except (OSError, RuntimeError):  # RuntimeError: Python 3.11's symlink loop
            continue
    return paths


class ShellRun(Tool):
    name = "shell.run"
    description = (
        "Run a shell command (/bin/sh -c) in the workspace directory, inside a sandbox: the system is "
        "read-only, /tmp is private and empty, nothing outside the workspace is visible but skill "
        "directories (read-only), and there is no network unless the session allows it. Returns the "
        "exit code, stdout and stderr (each cut to its first and last 32 KiB). stdin is empty. A non-zero "
        "exit code is reported, not an error; the command and every process it started are killed after "
        "timeout_seconds or when it exits."
    )
    risk = "effectful"

    class Args(ToolArgs):
        command: str = Field(min_length=1, description="Command line for /bin/sh -c.")
        timeout_seconds: float = Field(60.0, gt=0, description="Kill the command after this many seconds.")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        """Run ``args.command``; raises ``ToolError`` on timeout (clamped to ``ctx.timeout_seconds``) or cancellation."""
        timeout = min(args.timeout_seconds, ctx.timeout_seconds)
        done = run_command(args.command, ctx, timeout)
        if done.cancelled:
            raise ToolError(f"command cancelled after {done.elapsed:.1f} s: {args.command}")
        if done.timed_out:
            raise ToolError(f"command timed out after {timeout:g} s: {args.command}")
        text = (
            f"exit code {done.exit_code}\n"
            f"--- stdout ---\n{done.stdout}\n"
            f"--- stderr ---\n{done.stderr}"
        )
        if done.incomplete:
            text += "\n[output may be incomplete: background processes still hold stdout/stderr]"
        return ToolOutput(text=text)


@dataclass(frozen=True)
class CommandRun:
    """How a command run by ``run_command`` ended: its ``exit_code`` (None when it was killed at
    its time bound, ``timed_out``, or on cancellation, ``cancelled``), its ``stdout`` and
    ``stderr`` (each cut to its first and last ``OUTPUT_CAP_BYTES / 2``), whether background
    processes still held the pipes when it was read (``incomplete``), and its run time (seconds)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    cancelled: bool = False
    incomplete: bool = False
    elapsed: float = 0.0


def run_command(command: str, ctx: ToolContext, timeout: float) -> CommandRun:
    """Run ``command`` with ``/bin/sh -c`` in ``ctx.workspace`` under ``ctx.sandbox`` and
    ``ctx.network`` (the runner of ``shell.run``): stdin empty, files bounded to 1 GiB, the
    command and every process it started killed at ``timeout`` seconds or when
    ``ctx.is_cancelled()`` says so (polled every 0.1 s; ``ctx.heartbeat`` is called every 0.5 s
    meanwhile). A non-zero exit, a timeout and a cancel are results, not errors. Raises
    ``WorkspaceEscapeError`` when the workspace is no longer itself (``checked_workspace``: a
    part swapped for a symlink, gone, no longer a directory) and ``ToolError`` when the command
    cannot start: the sandbox unavailable (``SandboxUnavailable``), or ``bwrap`` / the shell
    failing to execute. The sandbox mounts the workspace from an fd opened following no symlink
    (``open_workspace``), so a swap after the check does not change what the command sees."""
    workspace = checked_workspace(ctx.workspace)
    sandboxed = ctx.sandbox != "danger_full_access"
    if sandboxed:
        shell = ["/bin/sh", "-c", command]  # the sandbox sets its limits (SandboxLimits) itself
    else:
        # The largest file the command may write (RLIMIT_FSIZE, in 512-byte blocks: 1 GiB), then the command.
        shell = ["/bin/sh", "-c", f'ulimit -f {MAX_FILE_BLOCKS} 2>/dev/null; exec /bin/sh -c "$1"', "sh", command]
    pinned = open_workspace(workspace) if sandboxed else None
    held = [] if pinned is None else [pinned]
    proxy = EgressProxy(parse_egress_allow(ctx.egress_allow)) if sandboxed and ctx.network else None
    group: CallCgroup | None = None
    try:
        group = _call_cgroup(ctx) if sandboxed else None
        filter_fd = seccomp_pipe() if sandboxed else None
        if filter_fd is not None:
            held.append(filter_fd)
        try:
            egress_dir = proxy.start() if proxy is not None else None
        except OSError as e:
            raise ToolError(f"cannot start the egress proxy for the sandbox's network: {e}") from e
        argv, env = command_line(shell, workspace, ctx, workspace_fd=pinned, seccomp_fd=filter_fd, egress_dir=egress_dir)
        if group is not None:
            argv = group.enter_argv(argv)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=workspace if pinned is None else "/",  # the sandbox changes into the mounted workspace itself
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(held),  # bwrap closes the workspace's once mounted, reads the filter's
            )
        except OSError as e:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise ToolError(f"cannot start {argv[0]}: {e}") from e
    except BaseException:
        _release(proxy, group)
        raise
    finally:
        for fd in held:
            os.close(fd)
    os.close(out_w)
    os.close(err_w)
    try:
        return _wait(proc, out_r, err_r, ctx, timeout)
    finally:
        _release(proxy, group)


def _call_cgroup(ctx: ToolContext) -> CallCgroup | None:
    """The call's cgroup under ``ctx.cgroup``, made (None without one); ``ToolError`` when it cannot be
    made: an operator who configured one gets no command run outside it."""
    if ctx.cgroup is None:
        return None
    limits = DEFAULT_LIMITS
    group = CallCgroup(ctx.cgroup, memory_bytes=limits.call_memory_bytes, processes=limits.processes)
    try:
        group.create()
    except OSError as e:
        raise ToolError(f"cannot make the call's cgroup under {ctx.cgroup}, so nothing was run: {e}") from e
    return group


def _release(proxy: EgressProxy | None, group: CallCgroup | None) -> None:
    if proxy is not None:
        proxy.close()
    if group is not None:
        group.close()


def _wait(proc: subprocess.Popen[bytes], out_r: int, err_r: int, ctx: ToolContext, timeout: float) -> CommandRun:
    """Drain the command's output while it runs; stop it at ``timeout`` or on cancellation."""
    stdout, stderr = _CappedReader(out_r), _CappedReader(err_r)
    stdout.start()
    stderr.start()

    started = time.monotonic()
    last_beat = started
    timed_out = cancelled = False
    try:
        while True:
            try:
                proc.wait(timeout=_POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now - last_beat >= _HEARTBEAT_SECONDS:
                ctx.heartbeat()
                last_beat = now
            if ctx.is_cancelled():
                cancelled = True
                break
            if now - started >= timeout:
                timed_out = True
                break
    except BaseException:
        # Temporal cancels a thread-pool activity by raising CancelledError inside its thread
        # (in wait() or heartbeat()); the command must not outlive the call.
        _kill_group(proc)
        raise
    elapsed = time.monotonic() - started
    if cancelled or timed_out or ctx.sandbox == "danger_full_access":
        # Without a sandbox to take them down, background jobs left in the command's process group
        # die with it (one that left the group with setsid does not; the sandbox kills those).
        _kill_group(proc)
    # Background children may still hold the pipes open; do not wait for them for long.
    stdout.join(_DRAIN_SECONDS)
    stderr.join(_DRAIN_SECONDS)
    return CommandRun(
        exit_code=None if cancelled or timed_out else proc.returncode,
        stdout=stdout.text(),
        stderr=stderr.text(),
        timed_out=timed_out,
        cancelled=cancelled,
        incomplete=stdout.is_alive() or stderr.is_alive(),
        elapsed=elapsed,
    )
