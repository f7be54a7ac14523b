"""An approval edit whose arguments nest too deep is refused as the caller's mistake on every
surface (HTTP 4xx, ``RequestRejected`` from the client, exit 2 from the CLI), and the call still
waits for a decision: nothing reaches the data converter's or a JSON parser's recursion limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agentrt.schemas import MAX_ARGUMENT_DEPTH, PermissionRequested, RequestRejected, nested_deeper_than
from tests.cli.test_cli import agentrt, plain
from tests.conftest import Harness
from tests.e2e._support import wait_for_event, write_script
from tests.e2e.test_gateway import WRITE_THEN_ANSWER, auth, create_session, http, pending_request  # noqa: F401 (fixture)


def nested(depth: int) -> Any:
    """A JSON value ``depth`` lists deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def deep_body(depth: int) -> str:
    """An edit whose ``content`` nests ``depth`` lists deep, as raw JSON (``json.dumps`` itself stops at about 1,000)."""
    return '{"decision": "edit", "arguments": {"path": "notes.md", "content": ' + "[" * depth + "]" * depth + "}}"


def test_depth_is_measured_without_recursion() -> None:
    assert not nested_deeper_than({"a": nested(63)}, MAX_ARGUMENT_DEPTH)
    assert nested_deeper_than({"a": nested(64)}, MAX_ARGUMENT_DEPTH)
    assert nested_deeper_than(nested(100_000), MAX_ARGUMENT_DEPTH)
    assert not nested_deeper_than("[[[[", 1)


@pytest.mark.parametrize("depth", [100, 250, 900, 10_000])
async def test_an_approval_edit_nested_too_deep_is_a_4xx_and_the_call_still_waits(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path, depth: int  # noqa: F811
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    sid = created["session_id"]
    request = await pending_request(http, sid)

    response = await http.post(
        f"/v1/sessions/{sid}/approvals/{request['request_id']}", content=deep_body(depth),
        headers={**auth("alice"), "content-type": "application/json"},
    )

    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Traceback" not in response.text and "[[[" not in response.text
    if depth < 1000:  # parsed, then refused by its depth (deeper does not parse: 400)
        assert response.status_code == 422 and f"deeper than {MAX_ARGUMENT_DEPTH} levels" in response.json()["detail"]
    assert (await pending_request(http, sid))["request_id"] == request["request_id"]


async def test_the_client_refuses_an_edit_nested_too_deep_with_request_rejected_before_sending(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, WRITE_THEN_ANSWER)
    sid = harness.new_session_id()
    await harness.client.start(harness.client.new_config(str(workspace), session_id=sid, profile="scripted", script=script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))

    with pytest.raises(RequestRejected, match=f"deeper than {MAX_ARGUMENT_DEPTH} levels"):
        await harness.client.approve(sid, requested.request.request_id, arguments={"path": "x", "content": nested(900)})

    state = await harness.client.state(sid)
    assert [r.request_id for r in state.pending_approvals] == [requested.request.request_id]


@pytest.mark.parametrize("depth", [200, 10_000])
async def test_the_cli_refuses_an_edit_nested_too_deep_with_exit_2(harness: Harness, workspace: Path, tmp_path: Path, depth: int) -> None:
    script = write_script(tmp_path, WRITE_THEN_ANSWER)
    sid = harness.new_session_id()
    await harness.client.start(harness.client.new_config(str(workspace), session_id=sid, profile="scripted", script=script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))

    arguments = '{"path": "x", "content": ' + "[" * depth + "]" * depth + "}"
    result = await agentrt(harness, "session", "approve", sid, requested.request.request_id, "--arguments", arguments, cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert ("nested too deep" if depth > 1000 else f"deeper than {MAX_ARGUMENT_DEPTH} levels") in plain(result.stderr)
