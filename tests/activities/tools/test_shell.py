"""shell.run: output shape, working directory, scrubbed environment, timeouts, cancellation, heartbeats,
and the OS sandbox (bubblewrap) tried as a hostile model would."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from agentrt.activities.tools import (
    SandboxStatus,
    SandboxUnavailable,
    ShellRun,
    ToolContext,
    sandbox_status,
    scrubbed_environment,
)
from agentrt.schemas import ToolArgumentsError, ToolCall, ToolError


def shell(registry, ctx: ToolContext, command: str, **extra) -> str:
    return registry.execute(ToolCall(id="c1", name="shell.run", arguments={"command": command, **extra}), ctx).text


def _processes_with(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds ``marker`` (zombies do not count)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(name))
    return found


def _wait_until_none_with(marker: str, attempts: int = 100) -> bool:
    for _ in range(attempts):
        if not _processes_with(marker):
            return True
        time.sleep(0.05)
    return False


def test_output_has_exit_code_stdout_and_stderr(registry, ctx: ToolContext) -> None:
    assert shell(registry, ctx, "echo out; echo err >&2") == "exit code 0\n--- stdout ---\nout\n\n--- stderr ---\nerr\n"


def test_nonzero_exit_is_reported_not_raised(registry, ctx: ToolContext) -> None:
    assert shell(registry, ctx, "exit 7").startswith("exit code 7\n")


def test_command_runs_in_the_workspace(registry, ctx: ToolContext, workspace: Path) -> None:
    assert f"--- stdout ---\n{workspace.resolve()}\n" in shell(registry, ctx, "pwd -P")


def test_environment_lacks_secret_variables(registry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOO_API_KEY", "sk-do-not-leak")
    assert "sk-do-not-leak" not in shell(registry, ctx, "env")


def test_environment_keeps_allowlisted_variables_only(registry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("RANDOM_APP_SETTING", "1")
    out = shell(registry, ctx, "env")
    assert "TZ=UTC" in out and "RANDOM_APP_SETTING" not in out


def test_scrub_drops_allowlisted_names_that_look_like_secrets() -> None:
    assert scrubbed_environment({"PATH": "/bin", "HOME": "/h", "OTHER_TOKEN": "t"}) == {"PATH": "/bin", "HOME": "/h"}


def test_stdin_is_empty(registry, ctx: ToolContext) -> None:
    assert shell(registry, ctx, "wc -c").startswith("exit code 0\n--- stdout ---\n0")


def test_each_stream_keeps_its_head_and_tail_when_cut(registry, ctx: ToolContext) -> None:
    out = shell(registry, ctx, "seq 1 100000")

    assert out.startswith("exit code 0\n--- stdout ---\n1\n2\n3\n")
    assert "\n99999\n100000\n\n--- stderr ---" in out  # the end, where errors usually are
    assert "bytes left out here; the first and the last 32768 are shown]" in out
    assert len(out) < 70_000


def test_timeout_kills_every_process_of_the_call(registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace)
    with pytest.raises(ToolError, match="timed out after 1 s"):
        shell(registry, ctx, "sleep 31.25 & sleep 30", timeout_seconds=1)
    assert _wait_until_none_with("sleep 31.25")


def test_timeout_is_clamped_to_the_context_bound(registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, timeout_seconds=0.5)
    with pytest.raises(ToolError, match="timed out after 0.5 s"):
        shell(registry, ctx, "sleep 30", timeout_seconds=60)


def test_cancellation_kills_the_command_and_raises_tool_error(registry, workspace: Path) -> None:
    def cancelled() -> bool:
        return (workspace / "started").exists()

    ctx = ToolContext(workspace=workspace, is_cancelled=cancelled)
    with pytest.raises(ToolError, match="cancelled"):
        shell(registry, ctx, "sleep 32.25 & touch started; wait")
    assert _wait_until_none_with("sleep 32.25")


def test_heartbeat_is_called_while_the_command_runs(registry, workspace: Path) -> None:
    beats: list[int] = []
    ctx = ToolContext(workspace=workspace, heartbeat=lambda: beats.append(1))
    shell(registry, ctx, "sleep 1.5")
    assert beats


def test_empty_command_is_an_argument_error(registry, ctx: ToolContext) -> None:
    with pytest.raises(ToolArgumentsError, match="command: "):
        shell(registry, ctx, "")


def test_shell_is_effectful() -> None:
    assert ShellRun().risk == "effectful"


# ---------------------------------------------------------------- the OS sandbox, attacked


def test_the_workers_environment_is_not_readable_through_proc(
    registry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a sandbox `cat /proc/$PPID/environ` printed every secret of the worker.
    monkeypatch.setenv("PROVIDER_API_KEY", "sk-worker-secret")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:db-password@h/db")
    out = shell(registry, ctx, "cat /proc/$PPID/environ /proc/1/environ; ls /proc")

    assert "sk-worker-secret" not in out and "db-password" not in out
    listed = out.split("--- stdout ---\n")[1].split("\n--- stderr")[0].split()
    assert len([name for name in listed if name.isdigit()]) <= 4  # the sandbox's own processes only


def test_files_outside_the_workspace_are_not_there(registry, workspace: Path, outside: Path) -> None:
    (outside / "agentrt.toml").write_text("[store]\nurl = 'sqlite:///secret.db'\n")
    out = shell(registry, ToolContext(workspace=workspace), f"cat {outside}/agentrt.toml {outside}/secret.txt; ls /root /work")

    assert "secret.db" not in out and "top secret" not in out
    assert "No such file or directory" in out


def test_writes_outside_the_workspace_do_not_land(registry, workspace: Path, outside: Path) -> None:
    command = f"echo x > {outside}/planted; echo y > /tmp/t && echo tmp-ok; echo z > /usr/planted"
    out = shell(registry, ToolContext(workspace=workspace), command)

    assert not (outside / "planted").exists()
    assert not Path("/usr/planted").exists()
    assert "tmp-ok" in out  # a private, empty /tmp
    assert "Read-only file system" in out


def test_the_workspace_is_read_only_under_the_read_only_policy(registry, workspace: Path) -> None:
    (workspace / "kept.txt").write_text("kept")
    out = shell(registry, ToolContext(workspace=workspace, sandbox="read_only"), "cat kept.txt; echo x > kept.txt")

    assert "kept" in out and "Read-only file system" in out
    assert (workspace / "kept.txt").read_text() == "kept"


def test_the_workspace_is_writable_under_workspace_write(registry, ctx: ToolContext, workspace: Path) -> None:
    shell(registry, ctx, "echo made > made.txt")

    assert (workspace / "made.txt").read_text() == "made\n"


def test_no_network_unless_the_session_allows_it(registry, workspace: Path) -> None:
    # The server stands for the Temporal frontend, the store's database or any service on the host.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2); print(\"connected\")'"
        denied = shell(registry, ToolContext(workspace=workspace), probe)
        granted = shell(registry, ToolContext(workspace=workspace, network=True), probe)

    assert "connected" not in denied and "Connection refused" in denied
    # Granted network is the egress proxy, never the host's loopback (tests/activities/tools/test_egress.py).
    assert "connected" not in granted and "Connection refused" in granted


def test_background_processes_die_when_the_command_ends(registry, ctx: ToolContext) -> None:
    # `setsid ... &` and `nohup ... &` used to outlive the call and keep writing after it was recorded.
    out = shell(registry, ctx, "(setsid sleep 600.25 &); nohup sleep 600.5 >/dev/null 2>&1 & echo started")

    assert "started" in out
    assert _wait_until_none_with("sleep 600.25") and _wait_until_none_with("sleep 600.5")


def test_danger_full_access_runs_without_the_sandbox(registry, workspace: Path, outside: Path) -> None:
    out = shell(registry, ToolContext(workspace=workspace, sandbox="danger_full_access"), f"cat {outside}/secret.txt")

    assert "top secret" in out


def test_without_bubblewrap_a_sandboxed_command_is_refused_not_run_unsandboxed(
    registry, ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrt.activities.tools import _shell

    monkeypatch.setattr(_shell, "sandbox_status", lambda: SandboxStatus(None, "no bwrap binary"))
    with pytest.raises(SandboxUnavailable, match="nothing was run: no bwrap binary"):
        shell(registry, ctx, "touch ran")

    assert not (workspace / "ran").exists()


def test_bubblewrap_runs_on_this_machine() -> None:
    # CI runs where the product runs: the sandbox tests above must not pass for want of it.
    assert sandbox_status().available, sandbox_status().reason


def test_without_the_sandbox_background_jobs_of_the_command_still_die_when_it_ends(registry, workspace: Path) -> None:
    out = shell(registry, ToolContext(workspace=workspace, sandbox="danger_full_access"), "sleep 611.25 & echo started")

    assert "started" in out
    assert _wait_until_none_with("sleep 611.25")


def test_kernel_settings_are_read_only_in_the_sandbox(registry, ctx: ToolContext) -> None:
    # A root worker's sandbox maps to host root: /proc/sys/kernel/core_pattern would have run a
    # workspace file as host root on the next crash.
    out = shell(registry, ctx, "v=$(cat /proc/sys/vm/swappiness); printf '%s' \"$v\" > /proc/sys/vm/swappiness; echo rc=$?")

    assert "Read-only file system" in out and "rc=2" in out


def test_a_command_cannot_write_a_file_over_a_gibibyte(registry, ctx: ToolContext) -> None:
    out = shell(registry, ctx, "head -c 1100M /dev/zero > /tmp/big; echo rc=$?; stat -c %s /tmp/big", timeout_seconds=60)

    assert "rc=" in out and "rc=0" not in out


def test_a_command_cannot_make_a_user_namespace_of_its_own(registry, ctx: ToolContext) -> None:
    # In a nested user namespace it would hold every capability: cgroup mounts reached the host's
    # root cgroup (vm.swappiness through memory.swappiness) from a root worker's sandbox.
    out = shell(registry, ctx, "unshare -U true && echo NESTED || echo refused")

    assert "refused" in out and "NESTED" not in out


def test_only_the_sized_mounts_take_writes(registry, ctx: ToolContext) -> None:
    out = shell(registry, ctx, "echo x > /newfile; echo x > /dev/newfile; df -k /var/tmp /dev/shm | tail -2")

    assert out.count("Read-only file system") == 2
    assert " 65536 " in out  # /var/tmp and /dev/shm: 64 MiB each
