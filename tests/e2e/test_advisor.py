"""Advisor reviews in real sessions: the scripted provider plays the advisor, the tools run for real.

A rejected batch runs no call and ends the turn with a message that says why; an advisor that
fails, answers no JSON or an unknown verdict, or takes too long approves (fail-open), and the
event says so; ``lightweight`` reviews only high-risk batches, ``full`` every one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrt.schemas import (
    AdvisorPolicy,
    AdvisorReviewCompleted,
    AdvisorReviewStarted,
    ApprovalPolicy,
    AssistantMessageCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
    TrajectoryCompleted,
    TrajectoryStepRecorded,
)
from tests.conftest import Harness
from tests.e2e._support import session_config

# Every call runs without asking: only the advisor stands between the model and the workspace.
AUTO = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow", destructive="allow", network="allow")


def _script(directory: Path, turns: list[dict[str, Any]], advisor: list[dict[str, Any]]) -> str:
    path = directory / "script.json"
    path.write_text(json.dumps({"turns": turns, "advisor": advisor}))
    return str(path)


async def _run(harness: Harness, workspace: Path, script: str, mode: str, **advisor: Any) -> tuple[str, Any, list[Any]]:
    sid = harness.new_session_id()
    config = session_config(
        harness.client, sid, workspace, script, approval=AUTO, advisor=AdvisorPolicy(mode=mode, **advisor)  # type: ignore[arg-type]
    )
    started = await harness.client.start(config, "tidy up the workspace")
    outcome = await harness.client.wait(sid, started.turn_id)
    events = harness.store.events(sid, 0, 1000)
    return sid, outcome, events


def _rm_rf(workspace: Path) -> dict[str, Any]:
    (workspace / "data").mkdir()
    (workspace / "data" / "keep.txt").write_text("precious")
    return {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf data"}}]}


async def test_lightweight_advisor_rejects_rm_rf_and_no_command_runs(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        [_rm_rf(workspace), {"text": "never reached"}],
        [{"verdict": "reject", "concerns": ["deletes data/ recursively"], "summary": "rm -rf of user data"}],
    )

    sid, outcome, events = await _run(harness, workspace, script, "lightweight")

    assert outcome.status == "completed"
    assert "advisor review rejected" in (outcome.answer or "") and "rm -rf of user data" in (outcome.answer or "")
    assert (workspace / "data" / "keep.txt").read_text() == "precious"
    assert not [e for e in events if isinstance(e, ToolInvocationStarted)]
    started = next(e for e in events if isinstance(e, AdvisorReviewStarted))
    assert started.mode == "lightweight" and "rm -r" in started.reason
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert (completed.verdict, completed.concern_count, completed.error) == ("reject", 1, None)
    failed = next(e for e in events if isinstance(e, ToolInvocationFailed))
    assert failed.reason == "advisor_rejected"
    trajectory = next(e for e in events if isinstance(e, TrajectoryCompleted))
    assert trajectory.outcome == "failed" and "advisor rejected" in (trajectory.reason or "")
    # The turn's usage counts the advisor's tokens beside the model's.
    model_tokens = sum(e.usage.input_tokens for e in events if isinstance(e, AssistantMessageCompleted))
    assert outcome.usage.input_tokens > model_tokens
    # The model's next turn reads why: the block is in the transcript.
    assert any("advisor review rejected" in m.text for _, m in harness.store.messages(sid) if m.role == "assistant")


async def test_an_advisor_error_approves_the_batch_and_the_tools_run(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, [_rm_rf(workspace), {"text": "cleaned"}], [{"error": "advisor overloaded", "status": 400}])

    _sid, outcome, events = await _run(harness, workspace, script, "lightweight")

    assert (outcome.status, outcome.answer) == ("completed", "cleaned")
    assert not (workspace / "data").exists()
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert completed.verdict == "approve"
    assert completed.error is not None and "ProviderHTTPError" in completed.error and "400" in completed.error


async def test_an_advisor_answer_that_is_not_json_approves_with_the_reason_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = _script(tmp_path, [_rm_rf(workspace), {"text": "cleaned"}], [{"text": "Looks fine to me!"}])

    _sid, outcome, events = await _run(harness, workspace, script, "lightweight")

    assert outcome.answer == "cleaned"
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert completed.verdict == "approve" and "no JSON object with a verdict" in (completed.error or "")


async def test_an_unknown_verdict_approves_with_the_reason_recorded(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, [_rm_rf(workspace), {"text": "cleaned"}], [{"verdict": "maybe"}])

    _sid, outcome, events = await _run(harness, workspace, script, "lightweight")

    assert outcome.answer == "cleaned"
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert completed.verdict == "approve" and "unknown verdict 'maybe'" in (completed.error or "")


async def test_an_advisor_slower_than_its_timeout_approves(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = _script(tmp_path, [_rm_rf(workspace), {"text": "cleaned"}], [{"verdict": "reject", "delay_seconds": 30}] * 2)

    _sid, outcome, events = await _run(harness, workspace, script, "lightweight", timeout_seconds=1)

    assert outcome.answer == "cleaned"
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert (completed.verdict, completed.error) == ("approve", "timed out after 1 s")


async def test_lightweight_leaves_a_low_risk_batch_unreviewed_and_full_reviews_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    turns = [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "listed"}]
    light = _script(tmp_path, turns, [{"verdict": "reject"}])

    _sid, outcome, events = await _run(harness, workspace, light, "lightweight")

    assert outcome.answer == "listed"
    assert not [e for e in events if isinstance(e, (AdvisorReviewStarted, AdvisorReviewCompleted))]

    (tmp_path / "full").mkdir()
    full = _script(tmp_path / "full", turns, [{"verdict": "approve_with_warnings", "concerns": ["lists everything"], "summary": "ok"}])
    _sid, outcome, events = await _run(harness, workspace, full, "full")

    assert outcome.answer == "listed"
    started = next(e for e in events if isinstance(e, AdvisorReviewStarted))
    assert started.mode == "full"
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert (completed.verdict, completed.concerns) == ("approve_with_warnings", ["lists everything"])
    steps = [e for e in events if isinstance(e, TrajectoryStepRecorded)]
    assert [(s.action, s.outcome) for s in steps] == [("advisor.review", "approve_with_warnings"), ("fs.list", "ok")]


async def test_a_rejected_batch_ends_the_turn_before_any_approval_is_asked(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """The advisor comes before the policy: a rejected batch opens no approval request."""
    script = _script(tmp_path, [_rm_rf(workspace), {"text": "never"}], [{"verdict": "reject", "summary": "no"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, advisor=AdvisorPolicy(mode="full"))
    started = await harness.client.start(config, "clean")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    types = [e.type for e in harness.store.events(sid, 0, 1000)]
    assert "PermissionRequested" not in types
    assert types.index("AdvisorReviewCompleted") < types.index("ToolInvocationFailed")
    last = [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, AssistantMessageCompleted)][-1]
    assert last.tool_calls == 0 and "advisor review rejected" in last.text


async def test_a_reject_wrapped_in_prose_still_blocks_the_batch(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    """Regression: an answer with text around its JSON used to count as no verdict, and approve."""
    answer = 'I have reviewed the calls. {"verdict": "reject", "concerns": ["deletes data"], "summary": "no"} Hope that helps.'
    script = _script(tmp_path, [_rm_rf(workspace), {"text": "never"}], [{"text": answer}])

    _sid, outcome, events = await _run(harness, workspace, script, "lightweight")

    assert outcome.status == "completed" and (workspace / "data" / "keep.txt").exists()
    completed = next(e for e in events if isinstance(e, AdvisorReviewCompleted))
    assert (completed.verdict, completed.error) == ("reject", None)
