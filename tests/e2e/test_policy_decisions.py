"""Every policy decision recorded, and the results of a batch in call order (``policy-decisions-v1``):
a call the policy allows leaves ``PermissionGranted`` with the rule that allowed it; the model reads
the results of a batch of refused, denied and executed calls in the order it asked for them (seen
on the wire by a loopback OpenAI-compatible server); a file write outside the workspace is refused
before anyone is asked; read-only calls are never asked about; ``danger_full_access`` with approval
mode ``never`` runs a destructive command."""

from __future__ import annotations

import json
from pathlib import Path

from agentrt.schemas import (
    ApprovalPolicy,
    Event,
    ModelProfile,
    PermissionGranted,
    PermissionRequested,
    ToolInvocationFailed,
    ToolInvocationStarted,
)
from tests.activities.providers._loopback import LoopbackServer, Reply, sse_data
from tests.activities.providers.test_openai import chunk, text_stream, tool_piece
from tests.conftest import Harness
from tests.e2e._support import session_config, wait_for_event, write_script
from tests.e2e.conftest import KEY_ENV


async def _events(harness: Harness, session_id: str) -> list[Event]:
    return (await harness.client.events(session_id)).events


def _tool_calls_reply(*calls: tuple[str, str, dict]) -> Reply:
    """One streamed reply asking for ``calls`` (id, wire name, arguments), in this order."""
    pieces = [tool_piece(i, id=call_id, name=name, arguments=json.dumps(arguments)) for i, (call_id, name, arguments) in enumerate(calls)]
    usage = {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
    return Reply(chunks=sse_data(*pieces, chunk({}, finish_reason="tool_calls"), chunk(None, usage=usage), "[DONE]"))


async def test_the_model_reads_a_batch_s_results_in_call_order_whichever_calls_were_refused_denied_or_run(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = ModelProfile(
        name="loopback-order", provider="openai", model="gpt-4o-mini", base_url=f"{provider_server.url}/v1", api_key_env=KEY_ENV
    )
    harness.config.profiles[profile.name] = profile
    provider_server.reply(
        _tool_calls_reply(
            ("c1", "fs__read", {"path": "README.md"}),                      # runs: the policy allows it
            ("c2", "fs__write", {"path": "../escape.txt", "content": "x"}),  # refused before anyone is asked
            ("c3", "fs__write", {"path": "notes.md", "content": "n"}),       # asked about, denied by the owner
            ("c4", "no__such_tool", {}),                                     # refused: not a tool of the session
            ("c5", "fs__list", {}),                                          # runs
        ),
        text_stream("done"),
    )
    sid = harness.new_session_id()
    config = harness.client.new_config(str(workspace), session_id=sid, profile=profile.name, heartbeat_timeout_seconds=5.0)
    started = await harness.client.start(config, "look around")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    await harness.client.deny(sid, requested.request.request_id, "not now")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed", outcome.error
    messages = provider_server.requests[1].json["messages"]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert [call_id for call_id, _ in results] == ["c1", "c2", "c3", "c4", "c5"]
    assert "Demo project" in results[0][1]
    assert "fs.write writes only inside the workspace" in results[1][1]
    assert "denied by alice: not now" in results[2][1]
    assert "unknown tool 'no__such_tool'" in results[3][1]  # the name as the model sent it
    assert "README.md" in results[4][1]
    assert requested.request.call_id == "c3"  # the only call anyone was asked about
    assert not (workspace.parent / "escape.txt").exists()


async def test_every_call_that_ran_has_a_permission_granted_with_the_rule_that_allowed_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.list", "arguments": {}},
            {"name": "fs.write", "arguments": {"path": "notes.md", "content": "n"}},
            {"name": "fs.read", "arguments": {"path": "README.md"}},
        ]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    approval = ApprovalPolicy(tools={"fs.write": "allow"})
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=approval), "notes")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed", outcome.error
    events = await _events(harness, sid)
    granted = {e.call_id: e for e in events if isinstance(e, PermissionGranted)}
    ran = [e.call_id for e in events if isinstance(e, ToolInvocationStarted)]
    assert ran == ["call_0_0", "call_0_1", "call_0_2"]
    assert [(granted[c].scope, granted[c].rule) for c in ran] == [
        ("policy", "approval.read_only = allow"),
        ("policy", 'approval.tools["fs.write"] = allow'),
        ("policy", "approval.read_only = allow"),
    ]
    assert all(granted[c].principal is None and granted[c].request_id is None for c in ran)
    assert all(granted[c].seq < next(e.seq for e in events if isinstance(e, ToolInvocationStarted) and e.call_id == c) for c in ran)
    assert granted["call_0_1"].reason == "policy rule for tool fs.write: allow"
    assert harness.store.audit(target=sid) == []  # no one acted: the policy's grants are no audit rows


async def test_a_file_write_outside_the_workspace_is_denied_by_policy_before_any_approval_is_asked(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": str(outside), "content": "x"}}]},
        {"text": "could not"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "write")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed", outcome.error
    events = await _events(harness, sid)
    [failed] = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert failed.reason == "denied"
    assert failed.error == f"tool call denied by policy (fs.write writes only inside the workspace, and {str(outside)!r} is outside it)"
    assert not [e for e in events if isinstance(e, PermissionRequested)]
    assert not outside.exists()


async def test_read_only_calls_run_without_approval_when_the_mode_asks_about_every_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}, {"name": "fs.list", "arguments": {}}]},
        {"text": "read"},
    ])
    sid = harness.new_session_id()
    approval = ApprovalPolicy(mode="always", read_only="ask")
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=approval), "read")
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "completed", outcome.error
    events = await _events(harness, sid)
    assert not [e for e in events if isinstance(e, PermissionRequested)]
    assert [(e.call_id, e.rule) for e in events if isinstance(e, PermissionGranted)] == [
        ("call_0_0", "read-only call"), ("call_0_1", "read-only call"),
    ]


async def test_danger_full_access_with_approval_never_runs_a_destructive_command_without_asking(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_text("object")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf build"}}]},
        {"text": "cleaned"},
    ])
    sid = harness.new_session_id()
    config = session_config(
        harness.client, sid, workspace, script, sandbox="danger_full_access", approval=ApprovalPolicy(mode="never")
    )
    started = await harness.client.start(config, "clean up")
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "completed", outcome.error
    assert not (workspace / "build").exists()
    [granted] = [e for e in await _events(harness, sid) if isinstance(e, PermissionGranted)]
    assert (granted.scope, granted.rule) == ("policy", "approval.mode = never")
    assert "shell.run (destructive: rm -r)" in (granted.reason or "")


async def test_a_read_only_round_run_inside_the_model_call_records_the_policy_s_grant_too(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": "read"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, fused_rounds=True)
    started = await harness.client.start(config, "read")
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "completed", outcome.error
    events = await _events(harness, sid)
    history = await harness.handle(sid).fetch_history()
    assert not [e for e in history.events if e.activity_task_scheduled_event_attributes.activity_type.name == "tool.execute"]
    assert [(e.call_id, e.scope, e.rule) for e in events if isinstance(e, PermissionGranted)] == [
        ("call_0_0", "policy", "approval.read_only = allow"),
    ]
