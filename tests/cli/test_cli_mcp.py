"""`agentrt mcp ...` on a store of its own (no Temporal server): servers operators add at run time
are listed, started by `mcp tools` like agentrt.toml's, and each act reads in the past tense it has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrt.cli._app import app
from tests.mcp_servers import time_stdio

runner = CliRunner()
OPS = "ops"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory whose agentrt.toml makes ``ops`` an operator, with a store of its own."""
    (tmp_path / "agentrt.toml").write_text(f'[principals]\noperators = ["{OPS}"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTRT_CONFIG", raising=False)
    monkeypatch.setenv("AGENTRT_DATABASE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("AGENTRT_PRINCIPAL", OPS)
    monkeypatch.setenv("AGENTRT_HOME", str(tmp_path / "home"))
    return tmp_path


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def add_time(here: Path, verb: str = "add", reason: str = "clocks") -> tuple[int, str, str]:
    server = time_stdio(here)
    (here / "time").mkdir(exist_ok=True)
    args = ["mcp", verb, "time", "--command", server.command or "", "--cwd", server.cwd or ""]
    for arg in server.args:
        args += ["--arg", arg]
    for path in server.read_paths:
        args += ["--read-path", path]
    return cli(*args, "--reason", reason)


def test_mcp_list_with_no_server_says_how_to_add_one_in_agentrt_toml_or_at_run_time(here: Path) -> None:
    code, out, _ = cli("mcp", "list")
    assert code == 0
    assert "add [mcp.servers.NAME] to agentrt.toml" in out and "agentrt mcp add NAME" in out


def test_a_changed_server_reads_changed_not_changeed(here: Path) -> None:
    code, out, err = add_time(here)
    assert code == 0, err
    assert "MCP server time added (stdio)" in out
    code, out, err = add_time(here, "change", "moved")
    assert code == 0, err
    assert "MCP server time changed (stdio)" in out and "changeed" not in out

    code, listed, _ = cli("mcp", "list")
    assert code == 0 and f"changed by {OPS} at " in listed and "changeed" not in listed
    code, listed, _ = cli("mcp", "list", "--json")
    [row] = json.loads(listed)["servers"]
    assert row["change"]["action"] == "change"  # stored as the verb


def test_mcp_tools_starts_a_server_an_operator_added_at_run_time(here: Path) -> None:
    code, _, err = add_time(here)
    assert code == 0, err

    code, out, err = cli("mcp", "tools", "time", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["server"] == "time"
    assert "time.get_current_time" in {t["qualified_name"] for t in body["tools"]}


def test_mcp_tools_refuses_a_revoked_server_and_names_the_known_ones_for_an_unknown_one(here: Path) -> None:
    assert add_time(here)[0] == 0
    code, _, err = cli("mcp", "revoke", "time", "--reason", "leaked")
    assert code == 0, err

    code, _, err = cli("mcp", "tools", "time")
    assert code == 2 and "MCP server 'time' is revoked (by ops: leaked)" in err
    code, _, err = cli("mcp", "tools", "nope")
    assert code == 2 and "no MCP server 'nope'" in err and "configured: (none); added by operators: time" in err
