"""`--idempotency-key` on `agentrt run`, `session send`, `task start` and `graph run` in process (typer's
CliRunner), no Temporal server: shown in --help, a malformed key refused before anything connects.
What a key does against real workflows is in tests/e2e/test_idempotency.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrt.cli._app import app

runner = CliRunner()
COMMANDS = [["run"], ["session", "send"], ["task", "start"], ["graph", "run"]]


def _arguments(command: list[str], workspace: Path) -> list[str]:
    """The command with every argument it needs but the key."""
    return {
        "run": ["run", "a prompt", "-w", str(workspace)],
        "session send": ["session", "send", "s1", "a message"],
        "task start": ["task", "start", "a goal", "-w", str(workspace)],
        "graph run": ["graph", "run", "--goal", "a goal", "-w", str(workspace)],
    }[" ".join(command)]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_the_idempotency_key_option_is_shown_in_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--idempotency-key" in result.output


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize(("key", "reason"), [("has space", "this one has ' '"), ("k" * 201, "at most 200 characters")])
def test_a_malformed_key_is_a_usage_error_before_anything_connects(
    command: list[str], key: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTRT_TEMPORAL_ADDRESS", "127.0.0.1:1")  # nothing listens: a connection would fail otherwise
    result = runner.invoke(app, [*_arguments(command, tmp_path), "--idempotency-key", key, "--json"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "--idempotency-key" in result.output and reason in " ".join(result.output.split())
