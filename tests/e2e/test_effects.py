"""No replay of effects: the effect ledger's branches, reconcile both ways, approvals bound to calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrt.schemas import RequestRejected, EffectReconciled, PermissionDecisionIgnored, PermissionRequested, ToolInvocationFailed, arguments_sha256
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, event_types, session_config, wait_for_event, write_script

APPEND = {"name": "fs.write", "arguments": {"path": "log.txt", "content": "line\n", "append": True}}


def first_call_key(session_id: str) -> str:
    """The idempotency key the session gives its first tool call: <workflow id>/<turn>/<result
    position>/<call id> (the user message is at 0, the model's reply at 1, the result at 2)."""
    return f"session-{session_id}/turn-1/2/call_0_0"


async def test_a_retry_that_finds_the_effect_applied_returns_the_recorded_result_without_running_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    # An earlier attempt claimed, applied and recorded the effect, then its worker died.
    harness.store.claim_effect(first_call_key(sid), sid, "fs.write")
    harness.store.record_effect(first_call_key(sid), "applied", "appended 5 bytes to log.txt (recorded)")
    script = write_script(tmp_path, [{"tool_calls": [APPEND]}, {"text": "done"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "go")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    assert not (workspace / "log.txt").exists()
    result = [m for _, m in harness.store.messages(sid) if m.role == "tool"][0]
    assert result.text == "appended 5 bytes to log.txt (recorded)"


async def test_an_effect_claimed_but_never_recorded_asks_to_reconcile_and_not_applied_runs_it_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    harness.store.claim_effect(first_call_key(sid), sid, "fs.write")  # claimed, then the worker died
    script = write_script(tmp_path, [{"tool_calls": [APPEND]}, {"text": "done"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "go")

    requested = await wait_for_event(
        harness.client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile"
    )
    failed = [e for e in (await harness.client.events(sid)).events if isinstance(e, ToolInvocationFailed)]
    assert [f.reason for f in failed] == ["outcome_unknown"]
    assert not (workspace / "log.txt").exists()
    await harness.client.reconcile(sid, requested.request.request_id, "not_applied", note="file has no line")

    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert (workspace / "log.txt").read_text() == "line\n"
    assert harness.store.effect(first_call_key(sid)).state == "applied"


async def test_reconciling_as_applied_records_the_call_as_done_without_running_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    harness.store.claim_effect(first_call_key(sid), sid, "fs.write")
    script = write_script(tmp_path, [{"tool_calls": [APPEND]}, {"text": "done"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "go")
    requested = await wait_for_event(
        harness.client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile"
    )
    # A permission decision is the wrong answer for a reconcile request: ignored as a signal, rejected as an update.
    await harness.handle(sid).signal(
        "permission_decision", {"request_id": requested.request.request_id, "decision": "grant", "principal": "alice"}
    )
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionDecisionIgnored) and e.why == "wrong_kind")
    with pytest.raises(RequestRejected, match="another kind"):
        await harness.client.approve(sid, requested.request.request_id)
    await harness.client.reconcile(sid, requested.request.request_id, "applied", note="saw it in the file")

    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert not (workspace / "log.txt").exists()
    result = [m for _, m in harness.store.messages(sid) if m.role == "tool"][0]
    assert "was applied" in result.text and "result is unknown" in result.text
    record = harness.store.effect(first_call_key(sid))
    assert record.state == "applied" and "saw it in the file" in (record.note or "")
    reconciled = [e for e in (await harness.client.events(sid)).events if isinstance(e, EffectReconciled)]
    assert [(e.outcome, e.principal) for e in reconciled] == [("applied", "alice")]


async def test_a_duplicate_approval_signal_does_not_run_the_tool_twice(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [APPEND]}, {"text": "done"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    body = {"request_id": requested.request.request_id, "decision": "grant", "principal": "alice"}
    for _ in range(3):
        await harness.handle(sid).signal("permission_decision", body)

    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"
    assert (workspace / "log.txt").read_text() == "line\n"
    events = (await harness.client.events(sid)).events
    assert event_types(events).count("PermissionGranted") == 1
    assert event_types(events).count("ToolInvocationStarted") == 1
    assert sorted(e.why for e in events if isinstance(e, PermissionDecisionIgnored)) == ["already_decided"] * 2


async def test_a_decision_bound_to_other_arguments_is_ignored(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [APPEND]}, {"text": "done"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    request = requested.request
    assert request.arguments_sha256 == arguments_sha256(APPEND["arguments"])
    wrong = {"request_id": request.request_id, "decision": "grant", "principal": "alice",
             "arguments_sha256": arguments_sha256({"path": "/etc/passwd", "content": "x"})}
    await harness.handle(sid).signal("permission_decision", wrong)
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionDecisionIgnored) and e.why == "mismatch")
    assert (await harness.client.state(sid)).pending_approvals[0].request_id == request.request_id

    right = {**wrong, "arguments_sha256": request.arguments_sha256, "call_id": request.call_id}
    await harness.handle(sid).signal("permission_decision", right)
    assert (await harness.client.wait(sid, started.turn_id)).status == "completed"
    assert (workspace / "log.txt").read_text() == "line\n"


async def test_every_model_attempt_leaves_a_usage_receipt(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "fs.list", "arguments": {}}]}, {"text": "done"}])
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    outcome = await harness.client.wait(sid, started.turn_id)
    receipts = harness.store.usage_receipts(sid)
    assert [(r.round, r.status) for r in receipts] == [(1, "completed"), (2, "completed")]
    assert sum(r.output_tokens for r in receipts) == outcome.usage.output_tokens
    assert json.loads(outcome.model_dump_json())["usage"]["input_tokens"] == sum(r.input_tokens for r in receipts)
