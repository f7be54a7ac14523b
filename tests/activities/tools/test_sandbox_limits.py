"""One tool call cannot take the host's disk, process table or memory, nor reach its kernel keyrings:
the seccomp filter and the per-sandbox limits, each tried as a hostile command would, and the
worker still serving afterwards."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from agentrt.activities.tools import ToolContext
from agentrt.activities.tools._sandbox import DEFAULT_LIMITS
from agentrt.activities.tools._seccomp import DENIED_SYSCALLS, seccomp_program
from agentrt.schemas import ToolCall

SYSCALL = "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall({args}); print(\"{name}\", r, ctypes.get_errno())'"
# x86-64 numbers; the filter's table holds aarch64's too.
KEYRING_CALLS = {"add_key": '248, b"user", b"k", b"v", 1, -3', "keyctl": "250, 0, -3, 0, 0", "request_key": '249, b"user", b"k", None, 0'}
UNPRIVILEGED = 65534  # nobody


def shell(registry, ctx: ToolContext, command: str, **extra: object) -> str:
    return registry.execute(ToolCall(id="c1", name="shell.run", arguments={"command": command, **extra}), ctx).text


def test_the_filter_checks_the_abi_first_and_allows_what_it_does_not_name() -> None:
    program = seccomp_program("x86_64")
    assert program is not None
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]

    assert insns[0] == (0x20, 0, 0, 4)  # load the ABI (seccomp_data.arch)
    assert insns[1][3] == 0xC000003E and insns[2] == (0x06, 0, 0, 0x00050000 | 1)  # another ABI: EPERM
    assert insns[-1] == (0x06, 0, 0, 0x7FFF0000)  # everything else runs
    assert len(insns) == 4 + 2 + 2 * len(DENIED_SYSCALLS) + 1
    assert seccomp_program("riscv64") is None


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the system call numbers below are x86-64's")
def test_kernel_keyrings_are_refused(registry, ctx: ToolContext) -> None:
    # Keyrings are not namespaced: a sandboxed command would share the worker user's keys and quota.
    out = shell(registry, ctx, "; ".join(SYSCALL.format(name=n, args=a) for n, a in KEYRING_CALLS.items()))

    for name in KEYRING_CALLS:
        assert f"{name} -1 1\n" in out  # EPERM


def test_fallocate_keep_size_cannot_reserve_disk_past_the_file_size_limit(registry, ctx: ToolContext, workspace: Path) -> None:
    out = shell(registry, ctx, "touch big; fallocate --keep-size -l 8G big; echo rc=$?; fallocate -l 2G big2; echo rc=$?")

    assert out.count("rc=1") == 2 and ("not supported" in out or "unsupported" in out)
    assert os.stat(workspace / "big").st_blocks == 0
    assert not (workspace / "big2").exists() or os.stat(workspace / "big2").st_blocks == 0


def test_a_file_cannot_grow_past_the_file_size_limit_by_truncate_either(registry, ctx: ToolContext, workspace: Path) -> None:
    out = shell(registry, ctx, "truncate -s 2G sparse; echo rc=$?")

    assert "rc=153" in out and "File size limit exceeded" in out  # SIGXFSZ
    assert not (workspace / "sparse").exists() or os.stat(workspace / "sparse").st_size <= DEFAULT_LIMITS.file_bytes


def test_a_memory_hog_is_stopped_at_the_address_space_limit_and_the_worker_goes_on(registry, ctx: ToolContext) -> None:
    hog = shell(registry, ctx, "python3 -c 'x = bytearray(5 * 1024**3)'")
    after = shell(registry, ctx, "echo still-serving")

    assert hog.startswith("exit code 1\n") and "MemoryError" in hog
    assert "still-serving" in after


def test_the_limits_hold_inside_the_sandbox_and_cannot_be_raised(registry, ctx: ToolContext) -> None:
    out = shell(registry, ctx, "ulimit -v; ulimit -f; ulimit -c; ulimit -v unlimited; echo raised=$?")

    lines = out.split("--- stdout ---\n")[1].split("\n")
    assert lines[:3] == [str(DEFAULT_LIMITS.memory_bytes // 1024), str(DEFAULT_LIMITS.file_bytes // 512), "0"]
    assert "raised=2" in out or "raised=1" in out


# -- processes: RLIMIT_NPROC, counted in the sandbox's own user namespace --------------------------
# The kernel exempts root from RLIMIT_NPROC, so the worker runs these as an unprivileged user, as a
# deployment does (docs/tools-and-policy.md: "Run the worker as an unprivileged user").

FORKS = """
import os, signal, time
pids = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
except OSError as e:
    print("forks", len(pids), e.errno)
for pid in pids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""

WORKER = """
import dataclasses, json, site, sys
from pathlib import Path
site.addsitedir(sys.argv[1])
from agentrt.activities.tools import ToolContext, run_command
done = run_command(sys.argv[3], ToolContext(workspace=Path(sys.argv[2])), float(sys.argv[4]))
print(json.dumps(dataclasses.asdict(done)))
"""


def _run_as_worker(command: str, timeout: float) -> dict:
    """``run_command`` in a worker process of its own, unprivileged (as nobody when the test runs as root)."""
    workspace = Path(tempfile.mkdtemp(prefix="agentrt-limits-", dir="/var/tmp"))
    (workspace / "forks.py").write_text(FORKS)
    as_user: dict = {}
    python = sys.executable
    if os.geteuid() == 0:
        os.chown(workspace, UNPRIVILEGED, UNPRIVILEGED)
        as_user = {"user": UNPRIVILEGED, "group": UNPRIVILEGED, "extra_groups": []}
        python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"  # this one may be under /root
        if not os.access(python, os.X_OK):
            pytest.skip(f"no {python} for an unprivileged worker")
    try:
        done = subprocess.run(
            [python, "-c", WORKER, sysconfig.get_paths()["purelib"], str(workspace), command, str(timeout)],
            capture_output=True, text=True, timeout=120, check=True, env={"PATH": "/usr/bin:/bin"}, cwd="/", **as_user,
        )
    finally:
        subprocess.run(["rm", "-rf", str(workspace)], check=False)
    return json.loads(done.stdout)


def test_a_call_holds_at_most_its_process_limit() -> None:
    done = _run_as_worker("python3 forks.py", 60)

    forks, count, errno = done["stdout"].split()
    assert forks == "forks" and errno == "11"  # EAGAIN
    assert DEFAULT_LIMITS.processes - 16 <= int(count) < DEFAULT_LIMITS.processes


def test_a_fork_bomb_is_bounded_and_the_call_returns() -> None:
    # The bomb gets its time in a builtin loop (/bin/sh's): `sleep` would need a fork the bomb may
    # hold, and the shell would end there with "Cannot fork" instead of going on.
    done = _run_as_worker("bomb() { bomb | bomb & }; bomb; i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done; echo survived", 20)

    assert done["exit_code"] == 0 and "survived" in done["stdout"]
    assert "Cannot fork" in done["stderr"] and len(done["stderr"]) <= 64 * 1024 + 200  # cut to its ends


def test_a_fork_bomb_past_the_time_bound_is_stopped_with_every_process_it_made() -> None:
    # The shell outlives the bound by a builtin loop: `sleep` would need a fork the bomb may have
    # used up, and the shell would end by itself ("Cannot fork") before the bound.
    done = _run_as_worker("bomb() { bomb | bomb & }; bomb; while :; do :; done", 2)

    assert done["timed_out"] and done["exit_code"] is None
    if os.geteuid() == 0:
        assert _none_left_of(UNPRIVILEGED)


def _none_left_of(uid: int) -> bool:
    for _ in range(100):  # the kernel reaps a killed namespace's processes in a moment, not at once
        if not [p for p in os.listdir("/proc") if p.isdigit() and _owner(p) == uid]:
            return True
        time.sleep(0.05)
    return False


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
