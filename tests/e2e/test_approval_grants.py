"""Approvals one can act on: a grant for the rest of the session, and a grant that edits the call's
arguments first (recorded, re-checked by the sandbox and the policy, told to the model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.schemas import (
    PermissionGranted,
    PermissionRequested,
    RequestRejected,
    SessionNotFound,
    ToolCallEdited,
    ToolInvocationFailed,
    arguments_sha256,
)
from tests.conftest import Harness
from tests.e2e._support import session_config, wait_for_event, write_script


def _tool_texts(harness: Harness, session_id: str) -> list[str]:
    return [m.text for _, m in harness.store.messages(session_id) if m.role == "tool"]


async def _events(harness: Harness, session_id: str, kind: type) -> list:
    return [e for e in (await harness.client.events(session_id)).events if isinstance(e, kind)]


async def test_a_grant_for_the_session_runs_later_calls_under_the_same_rule_without_asking(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        (workspace / name).mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf a"}}]},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -r b"}}]},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sudo rm -r c"}}]},
        {"text": "cleaned"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "clean up")

    first = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    assert first.request.grant_rule == "shell.run:destructive:rm -r"
    await harness.client.approve(sid, first.request.request_id, for_session=True)
    second = await wait_for_event(
        harness.client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.request_id != first.request.request_id
    )
    # `sudo` is another rule: the grant does not cover it.
    assert second.request.grant_rule == "shell.run:destructive:sudo"
    await harness.client.deny(sid, second.request.request_id, "no sudo")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    assert not (workspace / "a").exists() and not (workspace / "b").exists() and (workspace / "c").exists()
    granted = await _events(harness, sid, PermissionGranted)
    assert [(g.request_id, g.scope) for g in granted] == [(first.request.request_id, "session")] * 2
    assert len(await _events(harness, sid, PermissionRequested)) == 2


async def test_a_grant_with_edited_arguments_runs_what_the_approver_chose_and_tells_the_model(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "model's text"}}]},
        {"text": "written"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "write")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    request_id = requested.request.request_id

    with pytest.raises(RequestRejected, match=r"not valid for its tool.*\('mode' was unexpected\)"):
        await harness.client.approve(sid, request_id, arguments={"path": "notes.md", "content": "x", "mode": "0777"})
    assert [r.request_id for r in (await harness.client.state(sid)).pending_approvals] == [request_id]

    edited = {"path": "notes.md", "content": "approver's text\n"}
    await harness.client.approve(sid, request_id, arguments=edited)
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    assert (workspace / "notes.md").read_text() == "approver's text\n"
    (event,) = await _events(harness, sid, ToolCallEdited)
    assert (event.principal, event.arguments, event.arguments_sha256) == ("alice", edited, arguments_sha256(edited))
    (text,) = _tool_texts(harness, sid)
    assert text.startswith("[alice changed the arguments of this call before it ran; it ran with ")
    assert "wrote 16 bytes to notes.md" in text


async def test_an_edit_the_sandbox_refuses_is_not_run(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "ls"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "list")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))

    await harness.client.approve(sid, requested.request.request_id, arguments={"command": "curl -s https://example.com"})
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    (failed,) = await _events(harness, sid, ToolInvocationFailed)
    assert failed.reason == "denied_by_sandbox"
    assert failed.error.startswith("the call as alice edited it: tool call denied by the sandbox")


async def test_a_stranger_cannot_grant_for_the_session(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    await harness.client.start(session_config(harness.client, sid, workspace, script), "write")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))

    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").approve(sid, requested.request.request_id, for_session=True)

    assert [r.request_id for r in (await harness.client.state(sid)).pending_approvals] == [requested.request.request_id]
