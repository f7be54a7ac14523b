"""Budgets, spend and prices: what crossing a limit means, what remains, what a raise changes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrt.schemas import Budget, ModelPrice, RaiseBudgetInput, Spend, Usage


def spend(input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0, calls: int = 0, wall: float = 0.0) -> Spend:
    return Spend(usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens), cost_usd=cost, tool_calls=calls, wall_seconds=wall)


def test_an_unbounded_budget_is_never_crossed() -> None:
    assert Budget().is_unbounded()
    assert Budget().crossed(spend(10**9, 10**9, 10**6, 10**6, 10**9)) is None
    assert Budget().describe() == "unbounded"


def test_reaching_a_limit_crosses_it_and_names_the_dimension() -> None:
    budget = Budget(max_tokens=1000, max_tool_calls=3)
    assert budget.crossed(spend(600, 399)) is None
    crossing = budget.crossed(spend(600, 400))
    assert crossing is not None
    assert (crossing.dimension, crossing.limit, crossing.used) == ("tokens", 1000, 1000)
    assert crossing.text() == "tokens budget of 1,000 tokens reached (used 1,000 tokens)"
    assert budget.crossed(spend(calls=3)).dimension == "tool_calls"


def test_remaining_budget_never_goes_below_zero_and_keeps_unbounded_dimensions_unbounded() -> None:
    left = Budget(max_tokens=1000, max_cost_usd=0.5, max_wall_seconds=60).remaining(spend(900, 300, cost=0.2, wall=30))
    assert left.max_tokens == 0
    assert left.max_cost_usd == pytest.approx(0.3)
    assert left.max_wall_seconds == pytest.approx(30)
    assert left.max_tool_calls is None and left.max_input_tokens is None


def test_a_raise_replaces_only_the_limits_it_sets() -> None:
    raised = Budget(max_tokens=1000, max_tool_calls=3).raised(Budget(max_tokens=5000))
    assert raised == Budget(max_tokens=5000, max_tool_calls=3)


def test_a_raise_with_nothing_to_raise_is_refused() -> None:
    with pytest.raises(ValidationError, match="at least one limit"):
        RaiseBudgetInput(principal="alice")
    assert RaiseBudgetInput(principal="alice", max_sessions=4).max_sessions == 4


def test_spend_adds_tokens_cost_and_calls_and_keeps_the_longer_wall_time() -> None:
    total = spend(1, 2, 0.1, 1, 50) + spend(10, 20, 0.2, 2, 30)
    assert (total.usage, total.tool_calls, total.wall_seconds) == (Usage(input_tokens=11, output_tokens=22), 3, 50)
    assert total.cost_usd == pytest.approx(0.3)


def test_price_counts_cached_input_at_the_cache_price_when_given() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=400_000)
    assert ModelPrice(input_usd_per_mtok=3, output_usd_per_mtok=15).cost(usage) == pytest.approx(3 + 7.5)
    priced = ModelPrice(input_usd_per_mtok=3, output_usd_per_mtok=15, cache_read_usd_per_mtok=0.3)
    assert priced.cost(usage) == pytest.approx(0.6 * 3 + 0.4 * 0.3 + 7.5)


def test_a_negative_or_infinite_price_or_limit_is_refused() -> None:
    with pytest.raises(ValidationError):
        ModelPrice(input_usd_per_mtok=-1, output_usd_per_mtok=1)
    with pytest.raises(ValidationError):
        Budget(max_cost_usd=float("inf"))
    with pytest.raises(ValidationError):
        Budget(max_tokens=-5)


def test_describe_reads_as_a_sentence() -> None:
    assert Budget(max_tokens=12000, max_cost_usd=0.4, max_tool_calls=20, max_wall_seconds=7200).describe() == (
        "12,000 tokens, $0.4, 20 tool calls, 2h 0m wall time"
    )


def test_lowered_by_names_each_limit_a_raise_would_lower() -> None:
    current = Budget(max_tokens=5000, max_tool_calls=3)
    assert current.lowered_by(Budget(max_tokens=1000, max_tool_calls=4, max_cost_usd=1)) == ["max_tokens 5,000 -> 1,000"]
    assert current.lowered_by(Budget(max_tokens=6000)) == []
