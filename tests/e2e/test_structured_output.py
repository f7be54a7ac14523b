"""Structured output end to end on the dev server: a turn whose final answer must match a JSON
Schema, the validation errors fed back to the scripted model, and the turn's bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from agentrt.schemas import OutputInvalid, OutputSpec, OutputValidationFailed, TrajectoryCompleted, TurnEnded
from tests.conftest import Harness
from tests.e2e._support import session_config, write_script


class Triage(BaseModel):
    priority: Literal["low", "high"]
    tags: list[str]


VALID = {"priority": "high", "tags": ["billing"]}
INVALID = {"priority": "urgent"}


async def test_a_valid_first_answer_completes_the_turn_with_its_object(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": json.dumps(VALID)}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, output=OutputSpec.from_type(Triage))

    _, outcome = await harness.client.start_and_wait(config, "triage: my invoice is wrong")

    assert outcome.status == "completed" and outcome.rounds == 1
    assert outcome.output == VALID and outcome.output_as(Triage) == Triage(priority="high", tags=["billing"])
    events = harness.store.events(sid)
    assert [e.output for e in events if isinstance(e, TurnEnded)] == [VALID]
    assert [e.output for e in events if isinstance(e, TrajectoryCompleted)] == [VALID]
    assert not [e for e in events if isinstance(e, OutputValidationFailed)]
    trajectory = await harness.client.trajectories.get(sid)
    assert trajectory.turns[0].output == VALID


async def test_an_invalid_answer_gets_its_errors_back_and_the_next_valid_one_completes(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": json.dumps(INVALID)}, {"text": json.dumps(VALID)}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, output=OutputSpec.from_type(Triage))

    _, outcome = await harness.client.start_and_wait(config, "triage: my invoice is wrong")

    assert outcome.status == "completed" and outcome.rounds == 2 and outcome.output == VALID
    (failed,) = [e for e in harness.store.events(sid) if isinstance(e, OutputValidationFailed)]
    assert (failed.attempt, failed.max_attempts, failed.round) == (1, 3, 1)
    assert any("'urgent' is not one of ['low', 'high']" in error for error in failed.errors)
    assert any("'tags' is a required property" in error for error in failed.errors)
    # The errors went to the model as a user message, between its two answers.
    transcript = harness.store.messages(sid)
    roles = [(message.role, message.text) for _, message in transcript]
    assert roles[1] == ("assistant", json.dumps(INVALID))
    assert roles[2][0] == "user" and transcript[2][0] == failed.position
    assert "'urgent' is not one of ['low', 'high']" in roles[2][1] and "does not match the required output schema" in roles[2][1]
    assert roles[3] == ("assistant", json.dumps(VALID))


async def test_answers_invalid_to_the_bound_end_the_turn_output_invalid_with_the_last_answer_kept(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "not json at all"}, {"text": json.dumps(INVALID)}])
    sid = harness.new_session_id()
    spec = OutputSpec.from_type(Triage, max_attempts=2)
    config = session_config(harness.client, sid, workspace, script, output=spec)

    _, outcome = await harness.client.start_and_wait(config, "triage: my invoice is wrong")

    assert outcome.status == "output_invalid" and outcome.error_type == "OutputInvalid"
    assert outcome.answer == json.dumps(INVALID) and outcome.output is None and outcome.rounds == 2
    assert "after 2 attempts" in (outcome.error or "") and "'urgent' is not one of" in (outcome.error or "")
    failures = [e for e in harness.store.events(sid) if isinstance(e, OutputValidationFailed)]
    assert [(e.attempt, e.position is None) for e in failures] == [(1, False), (2, True)]
    assert "not JSON" in failures[0].errors[0]
    with pytest.raises(OutputInvalid, match="has no valid structured output") as caught:
        outcome.output_as(Triage)
    assert caught.value.answer == json.dumps(INVALID)
    # Rebuilt from the store (a turn of an earlier run): the same outcome, answer kept.
    assert await harness.client.wait(sid, outcome.turn_id) == outcome


async def test_a_messages_output_spec_overrides_the_sessions_for_its_turn_only(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    other = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    script = write_script(tmp_path, [{"text": '{"answer": 42}'}, {"text": json.dumps(VALID)}, {"text": "plain words"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, output=OutputSpec.from_type(Triage))

    _, first = await harness.client.start_and_wait(config, "what is six times seven?", output=OutputSpec.from_schema(other))
    second = await harness.client.send_and_wait(sid, "triage: my invoice is wrong")

    assert (first.status, first.output) == ("completed", {"answer": 42})
    assert (second.status, second.output) == ("completed", VALID)
    plain_sid = harness.new_session_id()
    plain = session_config(harness.client, plain_sid, workspace, write_script(tmp_path, [{"text": "plain words"}], "plain.json"))
    _, third = await harness.client.start_and_wait(plain, "hello")
    assert (third.status, third.answer, third.output) == ("completed", "plain words", None)


async def test_an_answer_given_by_the_output_tool_is_checked_like_text(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "final_result", "arguments": INVALID}]},
        {"tool_calls": [{"name": "final_result", "arguments": VALID}, {"name": "fs.read", "arguments": {"path": "x"}}]},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, output=OutputSpec.from_type(Triage))

    _, outcome = await harness.client.start_and_wait(config, "triage: my invoice is wrong")

    assert outcome.status == "completed" and outcome.output == VALID and outcome.tool_calls == 0
    assert json.loads(outcome.answer or "") == VALID
    assert len([e for e in harness.store.events(sid) if isinstance(e, OutputValidationFailed)]) == 1


async def test_a_hostile_answer_nested_beyond_any_parser_is_fed_back_and_the_turn_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    hostile = '{"priority": ' + "[" * 100_000 + "]" * 100_000 + "}"
    script = write_script(tmp_path, [{"text": hostile}, {"text": json.dumps(VALID)}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, output=OutputSpec.from_type(Triage))

    _, outcome = await harness.client.start_and_wait(config, "triage: my invoice is wrong")

    assert outcome.status == "completed" and outcome.output == VALID
    (failed,) = [e for e in harness.store.events(sid) if isinstance(e, OutputValidationFailed)]
    assert failed.errors == ["(answer): nested deeper than 64"]
