"""How the CLI shows advisor reviews and memory proposals while a turn runs, and pending requests in `session state`."""

from __future__ import annotations

from agentrt.cli._graph_render import graph_event_text
from agentrt.cli._render import QUIET_LIVE_EVENTS, describe
from agentrt.schemas import (
    AdvisorReviewCompleted,
    AdvisorReviewStarted,
    EffectReconciled,
    MemoryAccepted,
    MemoryProposed,
    MemoryRejected,
    PermissionGranted,
    PermissionRequested,
    SessionPaused,
    SessionResumed,
    TaskGraphPaused,
    TaskGraphResumed,
    TrajectoryStepRecorded,
)


def test_an_advisor_review_says_how_many_calls_and_why() -> None:
    event = AdvisorReviewStarted(round=1, call_ids=["c1", "c2"], mode="lightweight", reason="rm -r", profile="gpt")
    assert describe(event) == "advisor: reviewing 2 calls (lightweight: rm -r)"
    prefixed = event.model_copy(update={"mode": "full", "reason": "full: every batch is reviewed", "call_ids": ["c1"]})
    assert describe(prefixed) == "advisor: reviewing 1 call (full: every batch is reviewed)"


def test_an_advisor_verdict_shows_its_summary_and_concerns() -> None:
    event = AdvisorReviewCompleted(
        round=1, verdict="reject", concern_count=2, summary="deletes the repo", concerns=["rm -rf /", "no backup"]
    )
    assert describe(event) == "advisor: reject: deletes the repo · concerns: 1) rm -rf /; 2) no backup"


def test_a_failed_advisor_review_says_the_calls_were_approved_anyway() -> None:
    event = AdvisorReviewCompleted(round=1, verdict="approve", error="provider returned HTTP 500")
    assert describe(event) == "advisor: review failed, calls approved (fail-open): provider returned HTTP 500"


def test_a_memory_proposal_says_how_to_accept_it() -> None:
    event = MemoryProposed(memory_id="m-7", scope="user", key="style", preview="prefers tabs", call_id="c1")
    assert "agentrt memory accept m-7" in describe(event) and "prefers tabs" in describe(event)


def test_memory_decisions_name_who_decided() -> None:
    assert describe(MemoryAccepted(memory_id="m-7", scope="user", key="style", principal="alice")) == (
        "memory m-7 accepted by alice (user style)"
    )
    assert describe(MemoryRejected(memory_id="m-7", scope="user", key="style", principal="alice", reason="no")) == (
        "memory m-7 rejected by alice (user style): no"
    )


def test_trajectory_steps_are_not_shown_live() -> None:
    step = TrajectoryStepRecorded(index=0, round=1, action="fs.read", outcome="ok", duration_ms=4)
    assert isinstance(step, QUIET_LIVE_EVENTS)
    assert describe(step) == "step 0 (round 1): fs.read ok in 4 ms"


def test_text_a_model_chose_cannot_drive_the_terminal() -> None:
    from agentrt.cli._render import printable

    shown = printable("ok\x1b[8m hidden \x1b[0m\u202eevil" + chr(0xE0041))

    assert "\x1b" not in shown and "\u202e" not in shown and chr(0xE0041) not in shown
    assert shown == "ok\\u001b[8m hidden \\u001b[0m\\u202eevil\\U000e0041"


def test_a_call_the_policy_allowed_shows_the_rule_and_the_reason() -> None:
    event = PermissionGranted(
        call_id="call_0_0", scope="policy", rule="approval.read_only = allow", reason="policy rule for read_only calls: allow"
    )

    assert describe(event) == "call_0_0 allowed by policy (approval.read_only = allow): policy rule for read_only calls: allow"


def test_a_policy_grant_shows_a_model_chosen_call_id_and_command_inert() -> None:
    event = PermissionGranted(
        call_id="c\x1b[2J", scope="policy", rule="approval.mode = never",
        reason="approval policy never: shell.run (destructive: tee writes /x\x1b]0;pwned\x07 outside the workspace) runs",
    )

    shown = describe(event)

    assert "\x1b" not in shown and "\x07" not in shown
    assert shown.startswith("c\\u001b[2J allowed by policy (approval.mode = never): approval policy never: shell.run")


def test_a_reconcile_answer_says_who_answered_what_about_which_call() -> None:
    event = EffectReconciled(request_id="req-2", call_id="call_1_0", outcome="not_applied", principal="alice", note="the service dedups")

    assert describe(event) == "req-2: alice says call_1_0's effect was not applied: the service dedups"


def test_a_pause_and_a_resume_say_who_why_and_how_long() -> None:
    assert describe(SessionPaused(principal="ops", reason="incident 42")) == (
        "session paused by ops: incident 42; no model or tool call starts"
    )
    assert describe(SessionResumed(principal="alice", paused_seconds=61.25)) == "session resumed by alice after 61.2 s paused"
    assert graph_event_text(TaskGraphPaused(principal="alice", reason="hold")) == (
        "graph paused by alice: hold; no node starts, its sessions pause"
    )
    assert graph_event_text(TaskGraphResumed(principal="alice", paused_seconds=2)) == "graph resumed by alice after 2.0 s paused"
