"""Structured output over HTTP: an output spec on a session and on a message, the validated
object in the turn's outcome and in the stream's end event (native and AG-UI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from tests.conftest import Harness
from tests.e2e._support import write_script
from tests.e2e.test_gateway import auth, create_session, http, stream_until  # noqa: F401 - http is a fixture
from tests.gateway.test_gateway import assert_problem

TRIAGE = {"type": "object", "properties": {"priority": {"enum": ["low", "high"]}}, "required": ["priority"]}
ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


async def test_a_session_s_output_spec_gives_its_turn_and_stream_end_the_validated_object(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": '{"priority": "urgent"}'}, {"text": '{"priority": "high"}'}])
    created = await create_session(harness, http, script, output={"name": "Triage", "json_schema": TRIAGE})
    sid = created["session_id"]

    turn = (await http.get(f"/v1/sessions/{sid}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))).json()

    assert turn["status"] == "completed" and turn["output"] == {"priority": "high"} and turn["rounds"] == 2
    events = [e for e in await stream_until(http, f"/v1/sessions/{sid}/stream", "TurnEnded") if e.data]
    failed = next(json.loads(e.data) for e in events if e.event == "OutputValidationFailed")
    assert failed["attempt"] == 1 and any("'urgent' is not one of" in error for error in failed["errors"])
    assert json.loads(events[-1].data)["output"] == {"priority": "high"}
    finished: dict[str, Any] = {}
    async with aconnect_sse(http, "GET", f"/v1/sessions/{sid}/stream?encoding=ag-ui", headers=auth("alice")) as source:
        async for sse in source.aiter_sse():
            if sse.data and sse.json()["type"] == "RUN_FINISHED":
                finished = sse.json()
                break
    assert finished["result"]["output"] == {"priority": "high"}


async def test_a_message_s_output_spec_holds_for_its_turn(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "plain"}, {"text": '{"answer": 42}'}]))
    sid = created["session_id"]
    await http.get(f"/v1/sessions/{sid}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))

    message = {"text": "six times seven?", "output": {"json_schema": ANSWER}}
    sent = await http.post(f"/v1/sessions/{sid}/messages", json=message, headers=auth("alice"))

    assert sent.status_code == 202, sent.text
    turn = (await http.get(f"/v1/sessions/{sid}/turns/{sent.json()['turn_id']}?wait=30", headers=auth("alice"))).json()
    assert (turn["status"], turn["output"]) == ("completed", {"answer": 42})


async def test_an_output_schema_that_is_no_object_schema_is_invalid(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    body = {"text": "x", "workspace": "ws", "script": write_script(tmp_path, [{"text": "x"}]), "output": {"json_schema": {"type": "string"}}}

    problem = assert_problem(await http.post("/v1/sessions", json=body, headers=auth("alice")), 422)

    assert 'root must be \\"type\\": \\"object\\"' in json.dumps(problem) or "root must be" in json.dumps(problem)


async def test_an_output_schema_no_answer_could_pass_is_invalid_on_create_and_on_a_message(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    lookahead = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?!X)[A-Z]+$"}}}
    body = {"text": "x", "workspace": "ws", "script": write_script(tmp_path, [{"text": "x"}]), "output": {"json_schema": lookahead}}

    created = assert_problem(await http.post("/v1/sessions", json=body, headers=auth("alice")), 422)
    sent = assert_problem(
        await http.post("/v1/sessions/nobody/messages", json={"text": "x", "output": {"json_schema": lookahead}}, headers=auth("alice")), 422
    )

    for problem in (created, sent):
        assert "the pattern '^(?!X)[A-Z]+$' is not RE2 syntax" in json.dumps(problem)
