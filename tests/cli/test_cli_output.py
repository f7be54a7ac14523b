"""`agentrt run --output-schema FILE` and `agentrt session send --output-schema FILE`: a structured
answer from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import agentrt, plain
from tests.conftest import Harness
from tests.e2e._support import write_script

TRIAGE = {
    "title": "Triage",
    "type": "object",
    "properties": {"priority": {"enum": ["low", "high"]}},
    "required": ["priority"],
}


async def test_run_with_an_output_schema_prints_the_validated_object_as_output(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "triage.json"
    schema.write_text(json.dumps(TRIAGE))
    script = write_script(tmp_path, [{"text": '{"priority": "urgent"}'}, {"text": '{"priority": "high"}'}])

    result = await agentrt(
        harness, "run", "triage it", "-w", str(workspace), "--script", script, "--output-schema", str(schema), "--json",
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    harness.session_ids.append(body["session_id"])
    assert body["outcome"] == "completed" and body["output"] == {"priority": "high"} and body["rounds"] == 2
    assert "OutputValidationFailed" in result.stderr and "answer 1/3 off the output schema" in result.stderr


async def test_run_whose_answers_stay_invalid_exits_1_with_output_invalid_and_the_answer(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "triage.json"
    schema.write_text(json.dumps(TRIAGE))
    script = write_script(tmp_path, [{"text": '{"priority": "urgent"}'}])

    result = await agentrt(
        harness, "run", "triage it", "-w", str(workspace), "--script", script, "--output-schema", str(schema),
        "--output-attempts", "1", "--json", cwd=tmp_path,
    )

    assert result.returncode == 1, result.stderr
    body = json.loads(result.stdout)
    harness.session_ids.append(body["session_id"])
    assert (body["outcome"], body["error_type"], body["output"]) == ("output_invalid", "OutputInvalid", None)
    assert body["answer"] == '{"priority": "urgent"}'


async def test_an_output_schema_that_is_no_object_schema_is_refused_before_a_session_starts(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "bad.json"
    schema.write_text(json.dumps({"type": "string"}))

    result = await agentrt(harness, "run", "x", "-w", str(workspace), "--output-schema", str(schema), cwd=tmp_path)

    assert result.returncode == 2
    assert 'the schema\'s root must be "type": "object"' in plain(result.stderr)


async def test_session_send_with_an_output_schema_gets_that_turn_s_validated_object(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "triage.json"
    schema.write_text(json.dumps(TRIAGE))
    script = write_script(tmp_path, [{"text": "hello"}, {"text": '{"priority": "low"}'}])
    first = await agentrt(harness, "run", "hi", "-w", str(workspace), "--script", script, "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    harness.session_ids.append(sid)

    result = await agentrt(harness, "session", "send", sid, "triage it", "--output-schema", str(schema), "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert (body["turn_id"], body["outcome"], body["output"]) == ("turn-2", "completed", {"priority": "low"})
    assert json.loads(first.stdout)["output"] is None  # the first turn had no schema: plain text
