"""Budgets under chaos: tasks and graphs with small budgets, and whether their spend stays within
the documented bound (docs/autonomous-tasks.md#budgets).

The rule: a limit holds *before* each model call (a prompt that alone would pass ``max_tokens``
is not sent) and a reply's output is only known after it, so a call may take the spend past a
limit; then the next call does not start. The tool calls of one reply count before they run
(``max_tool_calls``). So a budget is never overspent by more than one call: at most the tokens
of the largest single model call and the tool calls of one reply (one here: every scripted
reply asks for one call). Graph nodes running side by side may each start with what was left,
so a budgeted graph here runs its nodes one at a time (``max_parallel`` 1), where the same bound holds.

``small_budget`` picks a budget the run reaches before it is done: fewer tool calls than it
makes and a few model calls' worth of tokens. ``overspend`` measures a run once it ended (its
spend, the largest call it made) and says by how much the rule was broken, if at all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from agentrt.schemas import Budget, Spend
from agentrt.store import UsageReceipt

TOKENS_PER_RUN = (1_500, 4_000)  # a budgeted run's max_tokens: two to six scripted model calls
REPLY_TOOL_CALLS = 1  # tool calls every scripted reply asks for


def small_budget(rng: random.Random, calls: int) -> Budget:
    """A budget a run of ``calls`` tool calls (one per session or node) reaches before its end:
    ``calls - 1`` tool calls, and tokens drawn from ``TOKENS_PER_RUN``."""
    return Budget(max_tool_calls=max(1, calls - 1), max_tokens=rng.randint(*TOKENS_PER_RUN))


@dataclass
class Overspend:
    """A budgeted run at its end: its ``spend`` against its ``budget``; ``largest_call``: the tokens
    (input + output) of the largest single model call it made (any attempt; a task's review, a
    graph's plan); ``problems``: each limit passed by more than one call, as a sentence."""

    spend: Spend
    budget: Budget
    largest_call: int
    problems: list[str]

    @property
    def tokens(self) -> int:
        return self.spend.usage.input_tokens + self.spend.usage.output_tokens


def largest_call(receipts: list[UsageReceipt], others: list[int]) -> int:
    """Tokens of the largest single model call among session ``receipts`` (the store's, one per
    attempt) and ``others`` (a task's reviews, a graph's plan)."""
    return max([r.input_tokens + r.output_tokens for r in receipts] + others + [0])


def overspend(spend: Spend, budget: Budget, largest: int) -> Overspend:
    """Compare ``spend`` with ``budget``: tokens may pass ``max_tokens`` by at most ``largest`` (one
    call), tool calls ``max_tool_calls`` by at most one reply's (``REPLY_TOOL_CALLS``)."""
    found = Overspend(spend, budget, largest, [])
    if budget.max_tokens is not None and found.tokens - budget.max_tokens > largest:
        found.problems.append(
            f"tokens {found.tokens} passed the budget of {budget.max_tokens} by more than its largest call ({largest})"
        )
    if budget.max_tool_calls is not None and spend.tool_calls - budget.max_tool_calls > REPLY_TOOL_CALLS:
        found.problems.append(
            f"tool calls {spend.tool_calls} passed the budget of {budget.max_tool_calls} by more than one reply's ({REPLY_TOOL_CALLS})"
        )
    return found


def describe(found: Overspend) -> str:
    """One line: what was spent against what, for the log."""
    budget = found.budget
    return (
        f"spent {found.tokens} tokens of {budget.max_tokens}, {found.spend.tool_calls} tool calls of "
        f"{budget.max_tool_calls}; largest call {found.largest_call} tokens"
    )


def review_tokens(receipts: list[Any]) -> list[int]:
    """Tokens of each acceptance review of a task (``TaskStatusView.receipts`` of kind ``review``:
    one model call each)."""
    return [r.spend.usage.input_tokens + r.spend.usage.output_tokens for r in receipts if r.kind == "review"]
