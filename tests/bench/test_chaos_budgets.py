"""bench._chaos_budgets: what counts as a budget overspent under chaos (more than one call past it)."""

from __future__ import annotations

import random
from datetime import datetime, timezone

from agentrt.schemas import Budget, Spend, Usage
from agentrt.store import UsageReceipt
from bench.chaos_kinds import largest_call, overspend, small_budget


def spend(tokens: int, tool_calls: int) -> Spend:
    return Spend(usage=Usage(input_tokens=tokens - 10, output_tokens=10), tool_calls=tool_calls)


def test_spend_past_the_budget_by_at_most_its_largest_call_and_one_reply_is_within_the_rule() -> None:
    found = overspend(spend(2_600, 3), Budget(max_tokens=2_000, max_tool_calls=2), largest=600)
    assert found.problems == []


def test_tokens_past_the_budget_by_more_than_the_largest_call_are_overspent() -> None:
    found = overspend(spend(2_601, 1), Budget(max_tokens=2_000, max_tool_calls=2), largest=600)
    assert found.problems == ["tokens 2601 passed the budget of 2000 by more than its largest call (600)"]


def test_tool_calls_past_the_budget_by_more_than_one_reply_are_overspent() -> None:
    found = overspend(spend(100, 4), Budget(max_tool_calls=2), largest=600)
    assert found.problems == ["tool calls 4 passed the budget of 2 by more than one reply's (1)"]


def test_the_largest_call_is_the_largest_of_every_attempt_and_of_the_other_calls() -> None:
    now = datetime.now(timezone.utc)
    receipts = [
        UsageReceipt(session_id="s", turn_id="t", round=1, attempt=a, status="completed", input_tokens=n, output_tokens=5,
                     created_at=now, updated_at=now)
        for a, n in ((1, 300), (2, 700))
    ]
    assert largest_call(receipts, [650]) == 705
    assert largest_call([], [650]) == 650
    assert largest_call([], []) == 0


def test_a_small_budget_stops_a_run_before_its_last_tool_call() -> None:
    budget = small_budget(random.Random(1), calls=3)
    assert budget.max_tool_calls == 2 and budget.max_tokens is not None and 1_500 <= budget.max_tokens <= 4_000
