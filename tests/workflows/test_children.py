"""How a child session ended (workflows/_children.py ``child_end``), as tasks, graphs and
delegating sessions read it."""

from __future__ import annotations

import pytest
from temporalio import workflow

from agentrt.schemas import ChildSpendReport, SessionResult, Spend, TurnOutcome, Usage
from agentrt.workflows._children import CHILD_WORKFLOW_TASK_TIMEOUT, ChildSessions, child_end


def _result(outcome: TurnOutcome | None) -> SessionResult:
    return SessionResult(session_id="c", turns=1, usage=Usage(input_tokens=7), status="archived", outcome=outcome)


def test_a_child_whose_workflow_was_cancelled_ended_cancelled_and_says_so() -> None:
    end = child_end(None, "ChildWorkflowError: cancelled", True)
    assert (end.status, end.cancelled, end.spend) == ("cancelled", True, Spend())


def test_a_cancelled_child_s_spend_is_what_it_reported_as_it_ended() -> None:
    reported = Spend(usage=Usage(input_tokens=40, output_tokens=9), cost_usd=0.25, tool_calls=1)
    end = child_end(None, "ChildWorkflowError: cancelled", True, reported)
    assert (end.status, end.cancelled, end.spend) == ("cancelled", True, reported)


def test_a_turn_cancelled_inside_the_child_is_its_outcome_not_a_cancelled_child() -> None:
    end = child_end(_result(TurnOutcome(turn_id="turn-1", status="cancelled")), None, False)
    assert (end.status, end.cancelled, end.spend) == ("cancelled", False, Spend(usage=Usage(input_tokens=7)))


def test_a_child_that_returned_without_a_turn_failed_with_what_it_spent() -> None:
    end = child_end(_result(None), None, False)
    assert (end.status, end.error, end.spend.usage.input_tokens) == ("failed", "the session ended without a turn", 7)


def test_children_get_the_workflow_task_timeout_client_started_sessions_have() -> None:
    assert CHILD_WORKFLOW_TASK_TIMEOUT.total_seconds() == 4


@pytest.mark.parametrize("spend", [
    Spend(cost_usd=float("nan")), Spend(cost_usd=float("inf")), Spend(cost_usd=-1.0), Spend(tool_calls=-3),
    Spend(usage=Usage(input_tokens=-40)), Spend(wall_seconds=float("-inf")),
])
def test_a_forged_child_spend_report_with_a_negative_or_non_finite_number_is_ignored(spend: Spend) -> None:
    children = ChildSessions("alice", parent_close=workflow.ParentClosePolicy.REQUEST_CANCEL, console=False)
    children.running["c"] = object()  # type: ignore[assignment]
    children.record(ChildSpendReport(session_id="c", spend=spend))
    assert children._reported == {}
    good = Spend(usage=Usage(input_tokens=40), cost_usd=0.25, tool_calls=1)
    children.record(ChildSpendReport(session_id="c", spend=good))
    assert children._reported == {"c": good}
