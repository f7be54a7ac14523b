"""shell.run: output shape, working directory, scrubbed environment, timeouts, cancellation, heartbeats."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentrt.activities.tools import ShellRun, ToolContext, scrubbed_environment
from agentrt.schemas import ToolArgumentsError, ToolCall, ToolError


def shell(registry, ctx: ToolContext, command: str, **extra) -> str:
    return registry.execute(ToolCall(id="c1", name="shell.run", arguments={"command": command, **extra}), ctx).text


def _is_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def _wait_until_gone(pid: int, attempts: int = 100) -> bool:
    for _ in range(attempts):
        if _is_gone(pid):
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


def test_each_stream_is_capped_with_a_truncation_note(registry, ctx: ToolContext) -> None:
    out = shell(registry, ctx, "head -c 70000 /dev/zero | tr '\\0' a")
    assert "[truncated: showing the first 65536 of 70000 bytes]" in out


def test_timeout_kills_the_whole_process_group(registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace)
    with pytest.raises(ToolError, match="timed out after 1 s"):
        shell(registry, ctx, "sleep 30 & echo $! > bg.pid; sleep 30", timeout_seconds=1)
    background = int((workspace / "bg.pid").read_text())
    assert _wait_until_gone(background)


def test_timeout_is_clamped_to_the_context_bound(registry, workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, timeout_seconds=0.5)
    with pytest.raises(ToolError, match="timed out after 0.5 s"):
        shell(registry, ctx, "sleep 30", timeout_seconds=60)


def test_cancellation_kills_the_command_and_raises_tool_error(registry, workspace: Path) -> None:
    def cancelled() -> bool:
        return (workspace / "started").exists()

    ctx = ToolContext(workspace=workspace, is_cancelled=cancelled)
    with pytest.raises(ToolError, match="cancelled"):
        shell(registry, ctx, "sleep 30 & echo $! > bg.pid; touch started; wait")
    assert _wait_until_gone(int((workspace / "bg.pid").read_text()))


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
