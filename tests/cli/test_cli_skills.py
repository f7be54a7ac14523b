"""`agentrt skills list`, in process (typer's CliRunner): the skills of a workspace and of agentrt.toml's
``[skills] paths``, their problems on stderr, and the ``--json`` shape; no Temporal server needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrt.cli._app import app

runner = CliRunner()


def write_skill(root: Path, name: str, description: str = "Does a thing.") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nInstructions.\n")
    return folder / "SKILL.md"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / ".agentrt" / "skills").mkdir(parents=True)
    return path


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A skills directory named in the agentrt.toml the CLI reads."""
    path = tmp_path / "shared"
    path.mkdir()
    config = tmp_path / "agentrt.toml"
    config.write_text(f"[skills]\npaths = [{json.dumps(str(path))}]\n")
    monkeypatch.setenv("AGENTRT_CONFIG", str(config))
    return path


def test_list_shows_workspace_skills_then_configured_ones(workspace: Path, shared: Path) -> None:
    write_skill(workspace / ".agentrt" / "skills", "local-one", "Local.")
    write_skill(shared, "shared-one", "Shared.")

    result = runner.invoke(app, ["skills", "list", "--workspace", str(workspace)])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION", "SOURCE"]
    assert [line.split()[0] for line in lines[1:]] == ["local-one", "shared-one"]
    assert str((shared / "shared-one" / "SKILL.md").resolve()) in lines[2]


def test_the_workspace_defaults_to_the_current_directory(workspace: Path, shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_skill(workspace / ".agentrt" / "skills", "here")
    monkeypatch.chdir(workspace)

    result = runner.invoke(app, ["skills", "list"])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("here ")


def test_json_prints_skills_and_problems(workspace: Path, shared: Path) -> None:
    source = write_skill(shared, "shared-one", "Shared.")
    (shared / "broken").mkdir()
    (shared / "broken" / "SKILL.md").write_text("---\n- not a mapping\n---\n")

    result = runner.invoke(app, ["skills", "list", "-w", str(workspace), "--json"])

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["skills"] == [{"name": "shared-one", "description": "Shared.", "source": str(source.resolve())}]
    assert len(body["problems"]) == 1 and "front matter must be a mapping" in body["problems"][0]


def test_a_skipped_skill_is_reported_on_stderr(workspace: Path, shared: Path) -> None:
    write_skill(workspace / ".agentrt" / "skills", "twice")
    write_skill(shared, "twice")

    result = runner.invoke(app, ["skills", "list", "-w", str(workspace)])

    assert result.exit_code == 0, result.output
    assert "skipped:" in result.stderr and "already defined by" in result.stderr
    assert "already defined" not in result.stdout


def test_a_description_is_one_escaped_line(workspace: Path, shared: Path) -> None:
    folder = workspace / ".agentrt" / "skills" / "ansi"
    folder.mkdir()
    (folder / "SKILL.md").write_text('---\nname: ansi\ndescription: "red \\e[31m text\\nsecond line"\n---\n')

    result = runner.invoke(app, ["skills", "list", "-w", str(workspace)])

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\\u001b[31m" in result.stdout
    assert len(result.stdout.splitlines()) == 2  # the header and one row


def test_no_skills_says_so(workspace: Path, shared: Path) -> None:
    result = runner.invoke(app, ["skills", "list", "-w", str(workspace)])

    assert result.exit_code == 0 and result.stdout == "no skills\n"


def test_a_workspace_that_is_not_a_directory_exits_2(tmp_path: Path, shared: Path) -> None:
    result = runner.invoke(app, ["skills", "list", "-w", str(tmp_path / "missing")])

    assert result.exit_code == 2 and "is not a directory" in result.stderr
