"""An output schema no answer could match, given over HTTP, is refused with 422 when it is given,
not taken into a session whose every answer then fails its check."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.gateway.test_gateway import assert_problem, auth, http, root  # noqa: F401 - the fixtures


@pytest.mark.parametrize(("schema", "words"), [
    ({"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}, "$ref loops back"),
    ({"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}}, "leaves the schema"),
    ({"type": "object", "properties": {"x": {"$ref": "#/$defs/gone"}}}, "points at nothing"),
    ({"type": "object", "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
     "nests deeper than 64 levels"),
])
async def test_a_session_asking_for_output_no_answer_could_match_is_invalid(
    http: httpx.AsyncClient, schema: dict[str, Any], words: str
) -> None:
    response = await http.post("/v1/sessions", json={"text": "hi", "workspace": "ws", "output": {"json_schema": schema}},
                               headers=auth("alice"))

    assert words in assert_problem(response, 422)["detail"]
