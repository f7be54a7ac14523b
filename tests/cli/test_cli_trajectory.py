"""`agentrt trajectory diff` on exported files, and usage errors of the memory, trajectory and run
options, in process (typer's CliRunner): none of these needs a Temporal server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrt.client import AgentClient, trajectory_jsonl
from agentrt.cli._app import app
from agentrt.schemas import AdvisorPolicy, Trajectory, TrajectoryStep, TurnTrajectory

runner = CliRunner()


def plain(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def export(tmp_path: Path, name: str, *actions: str, outcome: str = "success") -> Path:
    steps = [TrajectoryStep(index=i, round=i + 1, action=a, input_sha256=f"sha-{a}", outcome="ok", duration_ms=5) for i, a in enumerate(actions)]
    trajectory = Trajectory(session_id=name, turns=[TurnTrajectory(turn_id="turn-1", outcome=outcome, steps=steps)])  # type: ignore[arg-type]
    path = tmp_path / f"{name}.json"
    path.write_text(trajectory.model_dump_json(indent=2))
    return path


def test_equivalent_exports_exit_0(tmp_path: Path) -> None:
    a = export(tmp_path, "a", "fs.list", "fs.read")
    b = export(tmp_path, "b", "fs.list", "fs.read")

    result = runner.invoke(app, ["trajectory", "diff", str(a), str(b)])

    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("equivalent (durations aside)")


def test_differing_exports_exit_1_and_the_json_says_why(tmp_path: Path) -> None:
    a = export(tmp_path, "a", "fs.list", "fs.read")
    b = export(tmp_path, "b", "fs.list", "shell.run")

    result = runner.invoke(app, ["trajectory", "diff", str(a), str(b), "--json"])

    assert result.exit_code == 1, result.output
    body = json.loads(result.stdout)
    assert body["summary"]["equivalent"] is False
    assert [s["status"] for s in body["turns"][0]["steps"]] == ["same", "only_a", "only_b"]


def test_a_jsonl_export_compares_with_a_json_export_of_the_same_run(tmp_path: Path) -> None:
    a = export(tmp_path, "a", "fs.list", "fs.read")
    b = tmp_path / "b.jsonl"
    b.write_text("\n".join(trajectory_jsonl(Trajectory.model_validate_json(a.read_text()))) + "\n")

    result = runner.invoke(app, ["trajectory", "diff", str(a), str(b)])

    assert result.exit_code == 0, result.output


def test_one_turn_of_a_file_is_chosen_with_a_colon(tmp_path: Path) -> None:
    a = export(tmp_path, "a", "fs.read")
    result = runner.invoke(app, ["trajectory", "diff", f"{a}:turn-1", str(a)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["trajectory", "diff", "nowhere/a.json", "b"], "no such file: nowhere/a.json"),
        (["trajectory", "diff", "{a}:turn-9", "{a}"], "session a has no turn 'turn-9'"),
        (["trajectory", "diff", "{bad}", "{a}"], "is invalid: line 1 is not JSON"),
        (["trajectory", "diff", ":turn-1", "{a}"], "is neither a file nor SESSION_ID[:TURN]"),
        (["trajectory", "diff", "{a}"], "Missing argument 'B'"),
        (["session", "trajectory", "s1", "--format", "xml"], "'xml' is not one of"),
        (["memory", "list", "--status", "pending"], "'pending' is not one of"),
        (["memory", "list", "--scope", "global"], "'global' is not one of"),
        (["memory", "list", "--limit", "0"], "greater than or equal to 1"),
        (["memory", "accept"], "Missing argument"),
        (["run", "x", "--workspace", ".", "--advisor", "sometimes"], "'sometimes' is not one of"),
    ],
)
def test_usage_errors_exit_2_with_the_reason(tmp_path: Path, args: list[str], message: str) -> None:
    a = export(tmp_path, "a", "fs.read")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    args = [arg.format(a=a, bad=bad) for arg in args]

    result = runner.invoke(app, args)

    assert result.exit_code == 2, result.output
    assert message in plain(result.output)


def test_every_new_command_has_help() -> None:
    for args in (["memory", "--help"], ["memory", "list", "--help"], ["memory", "accept", "--help"],
                 ["session", "trajectory", "--help"], ["trajectory", "diff", "--help"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "Usage" in result.stdout


def test_new_config_takes_the_client_s_advisor_unless_given_one() -> None:
    client = AgentClient(None, principal="alice", advisor=AdvisorPolicy(mode="full", profile="judge"))  # type: ignore[arg-type]

    assert client.new_config(".").advisor == AdvisorPolicy(mode="full", profile="judge")
    assert client.new_config(".", advisor=AdvisorPolicy()).advisor == AdvisorPolicy()
    assert AgentClient(None, principal="alice").new_config(".").advisor.mode == "off"  # type: ignore[arg-type]
