"""`agentrt worker --agents` and `agentrt run --agents --agent` refuse, in process (typer's
CliRunner) and before any server or worker starts, a module that does not import and an agent
the modules do not define. (Both commands running for real: tests/e2e/test_user_tools.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrt.cli._app import app

runner = CliRunner()


def said(output: str) -> str:
    """The output's words, without the error box's borders and line breaks."""
    return " ".join(output.replace("│", " ").split())


@pytest.fixture(autouse=True)
def no_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTRT_CONFIG", raising=False)
    monkeypatch.setenv("AGENTRT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def test_worker_with_a_module_that_does_not_import_exits_2_naming_it() -> None:
    result = runner.invoke(app, ["worker", "--agents", "tests.e2e.no_such_module"])

    assert result.exit_code == 2
    assert "cannot import agents module 'tests.e2e.no_such_module'" in said(result.output)


def test_run_with_an_agent_the_modules_do_not_define_exits_2_listing_theirs(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["run", "hi", "--workspace", str(tmp_path), "--agents", "tests.e2e.agent_tools", "--agent", "billing"]
    )

    assert result.exit_code == 2
    assert "no agent 'billing' in tests.e2e.agent_tools (agents there: support, order-desk)" in said(result.output)


def test_worker_imports_a_module_of_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "shop_agents.py").write_text("raise RuntimeError('imported from the working directory')\n")

    result = runner.invoke(app, ["worker", "--agents", "shop_agents"])

    assert result.exit_code == 2
    assert "RuntimeError: imported from the working directory" in said(result.output)


@pytest.mark.parametrize("given", ["./shop_desk.py", "shop_desk.py", "../shop_desk", "/srv/app/shop_desk.py"])
def test_worker_given_a_file_path_says_to_give_a_module_name(tmp_path: Path, given: str) -> None:
    (tmp_path / "shop_desk.py").write_text("from agentrt import tool\n\n@tool\ndef ping() -> str:\n    return 'pong'\n")

    result = runner.invoke(app, ["worker", "--agents", given])

    assert result.exit_code == 2
    assert f"agents module '{given}' is not a module name" in said(result.output)
    assert "'shop_desk' run from the file's directory" in said(result.output)


def test_worker_with_a_module_that_parses_arguments_at_import_names_it_instead_of_printing_its_usage(tmp_path: Path) -> None:
    (tmp_path / "script_agents.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--db')\nargs = parser.parse_args(['--port', '1'])\n"
    )

    result = runner.invoke(app, ["worker", "--agents", "script_agents"])

    assert result.exit_code == 2
    assert "agents module 'script_agents' exited while it was imported (sys.exit(2))" in said(result.output)


def test_a_module_on_no_path_says_where_it_was_looked_for(tmp_path: Path) -> None:
    result = runner.invoke(app, ["worker", "--agents", "shop_agents_elsewhere"])

    assert result.exit_code == 2
    assert "No module named 'shop_agents_elsewhere' (not on sys.path; the agentrt commands add the current directory" in said(
        result.output
    )


def test_a_missing_import_inside_the_module_is_shown_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "shop_agents.py").write_text("import shop_payments_client\n")

    result = runner.invoke(app, ["worker", "--agents", "shop_agents"])

    assert result.exit_code == 2
    assert "No module named 'shop_payments_client'" in said(result.output) and "not on sys.path" not in said(result.output)


def test_worker_agents_of_agentrt_toml_import_from_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "agentrt.toml").write_text('[worker]\nagents = ["shop_agents"]\n')
    (tmp_path / "shop_agents.py").write_text("raise RuntimeError('imported from the working directory')\n")

    for command in (["worker"], ["dev", "--port", "1"]):
        result = runner.invoke(app, command)

        assert result.exit_code == 2, result.output
        assert "[worker] agents (agentrt.toml)" in said(result.output)
        assert "RuntimeError: imported from the working directory" in said(result.output)


def test_dev_with_a_module_that_does_not_import_exits_2_before_starting_a_server() -> None:
    result = runner.invoke(app, ["dev", "--port", "1", "--agents", "tests.e2e.no_such_module"])

    assert result.exit_code == 2
    assert "cannot import agents module 'tests.e2e.no_such_module'" in said(result.output)
