"""The approvals book (workflows/_approvals.py): requests, why a decision is ignored, and what a decision records."""

from __future__ import annotations

import pytest

from agentrt.schemas import (
    EffectReconciled,
    PermissionDecision,
    PermissionDecisionIgnored,
    PermissionDenied,
    PermissionGranted,
    ReconcileDecision,
    SessionState,
    ToolCall,
    arguments_sha256,
)
from agentrt.workflows._approvals import IGNORED_REASONS, ApprovalBook, ignored_text

OWNER = "alice"


def _book(state: SessionState | None = None) -> ApprovalBook:
    return ApprovalBook(state if state is not None else SessionState(), OWNER)


def _call(call_id: str = "call-1", path: str = "notes.md") -> ToolCall:
    return ToolCall(id=call_id, name="fs.write", arguments={"path": path, "text": "hi"})


def _grant(request_id: str = "req-1", principal: str = OWNER, **bindings: str) -> PermissionDecision:
    return PermissionDecision(request_id=request_id, decision="grant", principal=principal, **bindings)


def _round_trip(state: SessionState) -> SessionState:
    return SessionState.model_validate_json(state.model_dump_json())


# ---------------------------------------------------------------- requests


def test_requests_are_numbered_req_n_for_the_whole_session() -> None:
    book = _book()
    first = book.request("turn-1", _call("call-1"), "effectful", "ask")
    second = book.request("turn-2", _call("call-2"), "effectful", "ask")
    assert [first.request_id, second.request_id] == ["req-1", "req-2"]


def test_a_request_freezes_the_call_arguments_by_their_sha256() -> None:
    call = _call()
    request = _book().request("turn-1", call, "effectful", "ask")
    assert request.arguments == call.arguments
    assert request.arguments_sha256 == arguments_sha256(call.arguments or {})


def test_a_request_for_a_call_without_parsed_arguments_freezes_an_empty_object() -> None:
    call = ToolCall(id="call-1", name="fs.write", arguments=None, arguments_raw="{oops", arguments_error="bad json")
    request = _book().request("turn-1", call, "effectful", "ask")
    assert request.arguments == {}
    assert request.arguments_sha256 == arguments_sha256({})


def test_a_new_request_is_undecided() -> None:
    book = _book()
    request = book.request("turn-1", _call(), "effectful", "ask")
    assert book.undecided() == [request]
    assert not book.all_decided([request.request_id])


def test_numbering_continues_from_a_carried_state() -> None:
    state = SessionState(request_counter=7)
    assert _book(state).request("turn-1", _call(), "effectful", "ask").request_id == "req-8"


# ---------------------------------------------------------------- why_ignored, in order


def test_a_decision_from_a_stranger_is_ignored_before_anything_else_is_checked() -> None:
    book = _book()
    # Unknown, and of another kind, and mismatching: a stranger still only hears not_owner.
    assert book.why_ignored("req-99", "mallory", "reconcile", call_id="x", digest="y") == "not_owner"


def test_a_stranger_hears_not_owner_even_for_a_decided_request() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    book.decide(_grant())
    assert book.why_ignored("req-1", "mallory", "tool_call") == "not_owner"


def test_a_second_decision_on_a_decided_request_is_already_decided() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    book.decide(_grant())
    assert book.why_ignored("req-1", OWNER, "tool_call") == "already_decided"


def test_a_closed_request_numbered_within_the_counter_is_already_decided() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    book.close("req-1")
    assert book.why_ignored("req-1", OWNER, "tool_call") == "already_decided"


def test_a_request_numbered_within_a_carried_counter_but_not_pending_is_already_decided() -> None:
    # After continue-as-new: req-1..req-5 were acted on in an earlier run.
    book = _book(SessionState(request_counter=5))
    assert book.why_ignored("req-3", OWNER, "tool_call") == "already_decided"


def test_a_request_numbered_beyond_the_counter_is_unknown() -> None:
    book = _book(SessionState(request_counter=5))
    assert book.why_ignored("req-6", OWNER, "tool_call") == "unknown_request"


@pytest.mark.parametrize("request_id", ["req-0", "req-x", "approval-1", "req-", "req--1", "req-²", "req-٣"])
def test_a_malformed_request_id_is_unknown(request_id: str) -> None:
    # "req-²" passes str.isdigit() but int() rejects it: it once raised ValueError inside the
    # permission_decision signal handler, failing every workflow task of the session.
    book = _book(SessionState(request_counter=5))
    assert book.why_ignored(request_id, OWNER, "tool_call") == "unknown_request"


def test_a_decision_on_a_malformed_request_id_is_ignored_not_raised() -> None:
    event = _book(SessionState(request_counter=5)).decide(_grant("req-²"))
    assert isinstance(event, PermissionDecisionIgnored) and event.why == "unknown_request"


def test_a_grant_for_a_reconcile_request_is_the_wrong_kind() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "reconcile?", kind="reconcile")
    assert book.why_ignored("req-1", OWNER, "tool_call") == "wrong_kind"


def test_a_reconcile_for_a_tool_call_request_is_the_wrong_kind() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    assert book.why_ignored("req-1", OWNER, "reconcile") == "wrong_kind"


def test_the_wrong_kind_is_reported_before_a_mismatch() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "reconcile?", kind="reconcile")
    assert book.why_ignored("req-1", OWNER, "tool_call", call_id="other-call") == "wrong_kind"


def test_a_decision_naming_another_call_is_a_mismatch() -> None:
    book = _book()
    book.request("turn-1", _call("call-1"), "effectful", "ask")
    assert book.why_ignored("req-1", OWNER, "tool_call", call_id="call-2") == "mismatch"


def test_a_decision_naming_other_arguments_is_a_mismatch() -> None:
    book = _book()
    book.request("turn-1", _call(path="notes.md"), "effectful", "ask")
    other = arguments_sha256({"path": "/etc/passwd", "text": "hi"})
    assert book.why_ignored("req-1", OWNER, "tool_call", digest=other) == "mismatch"


def test_a_decision_binding_the_right_call_and_arguments_counts() -> None:
    book = _book()
    request = book.request("turn-1", _call(), "effectful", "ask")
    assert book.why_ignored("req-1", OWNER, "tool_call", call_id="call-1", digest=request.arguments_sha256) is None


def test_why_ignored_changes_no_state() -> None:
    state = SessionState()
    book = _book(state)
    book.request("turn-1", _call(), "effectful", "ask")
    before = state.model_dump()
    for principal, kind in ((OWNER, "tool_call"), ("mallory", "tool_call"), (OWNER, "reconcile")):
        book.why_ignored("req-1", principal, kind, call_id="call-9")
    assert state.model_dump() == before


@pytest.mark.parametrize("why", sorted(IGNORED_REASONS))
def test_every_ignored_reason_reads_as_a_sentence_naming_the_request_or_the_principal(why: str) -> None:
    expected = "'mallory'" if why == "not_owner" else "req-4"
    assert expected in ignored_text(why, "req-4", "mallory")


# ---------------------------------------------------------------- decide


def test_a_grant_records_the_decision_and_returns_permission_granted() -> None:
    book = _book()
    book.request("turn-3", _call("call-7"), "effectful", "ask")
    event = book.decide(_grant(reason="looks fine"))
    assert isinstance(event, PermissionGranted)
    assert (event.turn_id, event.request_id, event.call_id, event.principal, event.reason) == (
        "turn-3",
        "req-1",
        "call-7",
        OWNER,
        "looks fine",
    )
    assert book.decision("req-1") == _grant(reason="looks fine")
    assert book.all_decided(["req-1"]) and book.undecided() == []


def test_a_deny_returns_permission_denied() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    event = book.decide(PermissionDecision(request_id="req-1", decision="deny", principal=OWNER, reason="no"))
    assert isinstance(event, PermissionDenied) and event.reason == "no"
    assert book.decision("req-1").decision == "deny"  # type: ignore[union-attr]


def test_a_reconcile_decision_returns_effect_reconciled() -> None:
    book = _book()
    book.request("turn-2", _call("call-5"), "effectful", "was it applied?", kind="reconcile")
    decision = ReconcileDecision(request_id="req-1", outcome="not_applied", principal=OWNER, note="checked the disk")
    event = book.decide(decision)
    assert isinstance(event, EffectReconciled)
    assert (event.turn_id, event.call_id, event.outcome, event.note) == ("turn-2", "call-5", "not_applied", "checked the disk")
    assert book.decision("req-1") == decision


def test_an_ignored_decision_returns_the_reason_and_records_nothing() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    event = book.decide(_grant(principal="mallory"))
    assert isinstance(event, PermissionDecisionIgnored)
    assert (event.why, event.decision, event.principal) == ("not_owner", "grant", "mallory")
    assert book.decision("req-1") is None


def test_a_second_decision_does_not_overwrite_the_first() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    book.decide(_grant())
    event = book.decide(PermissionDecision(request_id="req-1", decision="deny", principal=OWNER))
    assert isinstance(event, PermissionDecisionIgnored) and event.why == "already_decided"
    assert book.decision("req-1").decision == "grant"  # type: ignore[union-attr]


def test_an_ignored_reconcile_carries_its_outcome_as_the_decision() -> None:
    event = _book().decide(ReconcileDecision(request_id="req-9", outcome="applied", principal=OWNER))
    assert isinstance(event, PermissionDecisionIgnored)
    assert (event.why, event.decision) == ("unknown_request", "applied")


def test_all_decided_needs_every_listed_request() -> None:
    book = _book()
    book.request("turn-1", _call("call-1"), "effectful", "ask")
    book.request("turn-1", _call("call-2"), "effectful", "ask")
    book.decide(_grant("req-1"))
    assert not book.all_decided(["req-1", "req-2"])
    assert [r.request_id for r in book.undecided()] == ["req-2"]


# ---------------------------------------------------------------- time_out, close, close_turn


def test_time_out_denies_undecided_requests_as_system() -> None:
    book = _book()
    book.request("turn-1", _call("call-1"), "effectful", "ask")
    events = book.time_out(["req-1"], 30)
    assert len(events) == 1 and isinstance(events[0], PermissionDenied)
    assert (events[0].principal, events[0].reason, events[0].call_id) == ("system", "no decision within 30 s", "call-1")
    decision = book.decision("req-1")
    assert isinstance(decision, PermissionDecision)
    assert (decision.decision, decision.principal) == ("deny", "system")


def test_time_out_leaves_a_decided_request_as_it_was() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    book.decide(_grant())
    assert book.time_out(["req-1"], 30) == []
    assert book.decision("req-1").decision == "grant"  # type: ignore[union-attr]


def test_time_out_leaves_requests_it_was_not_given() -> None:
    book = _book()
    book.request("turn-1", _call("call-1"), "effectful", "ask")
    book.request("turn-1", _call("call-2"), "effectful", "ask")
    book.time_out(["req-2"], 1.5)
    assert book.decision("req-1") is None
    assert book.decision("req-2").reason == "no decision within 1.5 s"  # type: ignore[union-attr]


def test_close_removes_the_request_and_returns_its_decision() -> None:
    state = SessionState()
    book = _book(state)
    book.request("turn-1", _call(), "effectful", "ask")
    book.decide(_grant())
    assert book.close("req-1") == _grant()
    assert state.pending_approvals == [] and state.approval_decisions == {}


def test_close_of_an_undecided_request_returns_none() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    assert book.close("req-1") is None
    assert book.undecided() == []


def test_close_turn_removes_only_that_turns_requests() -> None:
    state = SessionState()
    book = _book(state)
    book.request("turn-1", _call("call-1"), "effectful", "ask")
    book.request("turn-2", _call("call-2"), "effectful", "ask")
    book.request("turn-1", _call("call-3"), "effectful", "ask")
    book.decide(_grant("req-3"))
    book.close_turn("turn-1")
    assert [r.request_id for r in state.pending_approvals] == ["req-2"]
    assert state.approval_decisions == {}


def test_close_turn_returns_the_reconcile_answers_it_removes() -> None:
    book = _book()
    book.request("turn-1", _call("call-1"), "effectful", "ask")
    book.request("turn-1", _call("call-2"), "effectful", "unknown outcome", kind="reconcile")
    book.request("turn-1", _call("call-3"), "effectful", "unknown outcome", kind="reconcile")
    book.decide(_grant("req-1"))
    book.decide(ReconcileDecision(request_id="req-2", outcome="applied", principal=OWNER))
    answered = book.close_turn("turn-1")
    assert [(r.call_id, d.outcome) for r, d in answered] == [("call-2", "applied")]


def test_a_decision_after_close_turn_is_already_decided() -> None:
    book = _book()
    book.request("turn-1", _call(), "effectful", "ask")
    book.close_turn("turn-1")
    event = book.decide(_grant())
    assert isinstance(event, PermissionDecisionIgnored) and event.why == "already_decided"


# ---------------------------------------------------------------- continue-as-new


def test_a_decision_made_before_continue_as_new_is_known_after() -> None:
    state = SessionState()
    book = _book(state)
    book.request("turn-1", _call(), "effectful", "ask")
    book.decide(_grant(call_id="call-1"))
    carried = _book(_round_trip(state))
    assert carried.decision("req-1") == _grant(call_id="call-1")
    assert carried.all_decided(["req-1"])
    assert carried.why_ignored("req-1", OWNER, "tool_call") == "already_decided"


def test_a_reconcile_decision_survives_continue_as_new_as_a_reconcile_decision() -> None:
    state = SessionState()
    book = _book(state)
    book.request("turn-1", _call(), "effectful", "applied?", kind="reconcile")
    book.decide(ReconcileDecision(request_id="req-1", outcome="applied", principal=OWNER))
    decision = _book(_round_trip(state)).decision("req-1")
    assert isinstance(decision, ReconcileDecision) and decision.outcome == "applied"


def test_a_pending_request_can_be_decided_after_continue_as_new() -> None:
    state = SessionState()
    request = _book(state).request("turn-1", _call(), "effectful", "ask")
    carried = _book(_round_trip(state))
    assert carried.undecided() == [request]
    assert isinstance(carried.decide(_grant(arguments_sha256=request.arguments_sha256)), PermissionGranted)


def test_numbering_continues_after_continue_as_new() -> None:
    state = SessionState()
    book = _book(state)
    book.request("turn-1", _call(), "effectful", "ask")
    book.close("req-1")
    carried = _book(_round_trip(state))
    assert carried.request("turn-2", _call(), "effectful", "ask").request_id == "req-2"
    assert carried.why_ignored("req-1", OWNER, "tool_call") == "already_decided"
