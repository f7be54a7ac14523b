"""Budgets and spend: what a session or an autonomous task may use, and what it has used.

A ``Budget`` bounds tokens (in, out, total), cost (US dollars, from a profile's ``ModelPrice``),
tool calls and wall time; ``Spend`` counts the same quantities. A session adds each model
call's usage and each tool call to its spend; an autonomous task adds each child session's
spend to its own (the roll-up), so a task's limit holds across all of its sessions.
"""

from __future__ import annotations

import math

from pydantic import AwareDatetime, Field, model_validator

from agentrt.schemas._base import Model
from agentrt.schemas._messages import Usage

__all__ = [
    "Budget",
    "BudgetCrossing",
    "ChildSpendReport",
    "ModelPrice",
    "RaiseBudgetInput",
    "Spend",
]

_MTOK = 1_000_000


class ModelPrice(Model):
    """A model's price in US dollars per million tokens (``[profiles.NAME.price]``), as the
    provider's price list states it. ``cache_read_usd_per_mtok`` prices the input tokens read
    from the prompt cache (``Usage.cache_read_tokens``); unset, they cost the input price.
    ``cost(usage)`` is in US dollars."""

    input_usd_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    output_usd_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    cache_read_usd_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def cost(self, usage: Usage) -> float:
        cached = usage.cache_read_tokens if self.cache_read_usd_per_mtok is not None else 0
        cache_price = self.cache_read_usd_per_mtok or 0.0
        return (
            (usage.input_tokens - cached) * self.input_usd_per_mtok
            + cached * cache_price
            + usage.output_tokens * self.output_usd_per_mtok
        ) / _MTOK


class Spend(Model):
    """What a session or task has used: ``usage`` (tokens), ``cost_usd`` (US dollars; 0 when its
    profiles have no price), ``tool_calls`` (calls that ran or were refused: each one a model
    asked for) and ``wall_seconds`` (since it started)."""

    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    tool_calls: int = 0
    wall_seconds: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        """Tokens, cost and tool calls add up; wall time is the larger (children run inside the parent's time)."""
        return Spend(
            usage=self.usage + other.usage,
            cost_usd=self.cost_usd + other.cost_usd,
            tool_calls=self.tool_calls + other.tool_calls,
            wall_seconds=max(self.wall_seconds, other.wall_seconds),
        )


class ChildSpendReport(Model):
    """Signal ``child_spend`` (``CHILD_SPEND_SIGNAL``): what child session ``session_id`` spent,
    sent to the workflow that started it as it ends cancelled (a cancelled workflow returns no
    result, so its parent learns its spend from this)."""

    session_id: str
    spend: Spend


BudgetDimension = str  # "input_tokens", "output_tokens", "tokens", "cost_usd", "tool_calls", "wall_seconds"


class Budget(Model):
    """Limits on a ``Spend``; None leaves a dimension unbounded.

    - ``max_input_tokens`` / ``max_output_tokens`` / ``max_tokens`` (input + output): tokens.
    - ``max_cost_usd``: US dollars, priced by the profile's ``ModelPrice`` (a profile without a
      price costs 0, so this limit never trips on it).
    - ``max_tool_calls``: tool calls the model asked for.
    - ``max_wall_seconds``: seconds since the session or task started.

    Work that crosses a limit ends with the outcome ``budget_exceeded``; ``raise_budget`` lets it go on.
    """

    max_input_tokens: int | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_wall_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    def is_unbounded(self) -> bool:
        return all(v is None for v in self.model_dump().values())

    def _pairs(self, spend: Spend) -> list[tuple[str, float | None, float]]:
        usage = spend.usage
        return [
            ("input_tokens", self.max_input_tokens, usage.input_tokens),
            ("output_tokens", self.max_output_tokens, usage.output_tokens),
            ("tokens", self.max_tokens, usage.input_tokens + usage.output_tokens),
            ("cost_usd", self.max_cost_usd, spend.cost_usd),
            ("tool_calls", self.max_tool_calls, spend.tool_calls),
            ("wall_seconds", self.max_wall_seconds, spend.wall_seconds),
        ]

    def crossed(self, spend: Spend) -> BudgetCrossing | None:
        """The first limit ``spend`` has reached (used >= limit), or None."""
        for dimension, limit, used in self._pairs(spend):
            if limit is not None and used >= limit:
                return BudgetCrossing(dimension=dimension, limit=limit, used=used)
        return None

    def passed_by(self, spend: Spend, prompt_tokens: int, prompt_cost_usd: float = 0.0) -> BudgetCrossing | None:
        """The first limit a model call would pass by its prompt alone, before it is sent: ``spend``
        plus the prompt's estimated ``prompt_tokens`` (input tokens) above ``max_input_tokens`` or
        ``max_tokens``, or plus ``prompt_cost_usd`` (US dollars, 0 without a price) above
        ``max_cost_usd``; None when the prompt fits. The crossing's ``used`` is the spend before
        the call, ``estimated`` the prompt's share."""
        usage = spend.usage
        for dimension, limit, used, added in (
            ("input_tokens", self.max_input_tokens, usage.input_tokens, prompt_tokens),
            ("tokens", self.max_tokens, usage.input_tokens + usage.output_tokens, prompt_tokens),
            ("cost_usd", self.max_cost_usd, spend.cost_usd, prompt_cost_usd),
        ):
            if limit is not None and added > 0 and used + added > limit:
                return BudgetCrossing(dimension=dimension, limit=limit, used=used, estimated=added)
        return None

    def remaining(self, spend: Spend) -> Budget:
        """The budget left after ``spend`` (never below 0); unbounded dimensions stay None."""
        left: dict[str, float | int | None] = {}
        for (dimension, limit, used), field in zip(self._pairs(spend), type(self).model_fields, strict=True):
            if limit is None:
                left[field] = None
            elif field == "max_wall_seconds":
                left[field] = max(limit - used, 0.001)
            else:
                value = max(limit - used, 0)
                left[field] = value if isinstance(limit, float) else int(value)
        return Budget.model_validate(left)

    def raised(self, other: Budget) -> Budget:
        """This budget with every limit ``other`` sets replaced by ``other``'s."""
        return Budget(**{**self.model_dump(), **{k: v for k, v in other.model_dump().items() if v is not None}})

    def lowered_by(self, other: Budget) -> list[str]:
        """The limits ``other`` would lower (``max_tokens 5,000 -> 1,000``): a raise may not lower one."""
        mine = self.model_dump()
        return [
            f"{name} {mine[name]:,} -> {value:,}"
            for name, value in other.model_dump().items()
            if value is not None and mine[name] is not None and value < mine[name]
        ]

    def describe(self) -> str:
        """One line for people and models: ``12,000 tokens, $0.40, 20 tool calls, 2h 0m wall time``."""
        parts = []
        for dimension, limit, _ in self._pairs(Spend()):
            if limit is not None:
                parts.append(_quantity(dimension, limit))
        return ", ".join(parts) if parts else "unbounded"


class BudgetCrossing(Model):
    """A limit that was reached: ``dimension`` (``tokens``, ``cost_usd``, ...), its ``limit`` and the amount ``used``.

    ``estimated`` is set for a model call refused before it was sent: its prompt's estimated
    share (tokens, or US dollars for ``cost_usd``) would have taken ``used`` past ``limit``."""

    dimension: str
    limit: float
    used: float
    estimated: float | None = Field(default=None, exclude_if=lambda v: v is None)

    def text(self) -> str:
        limit, used = _quantity(self.dimension, self.limit), _quantity(self.dimension, self.used)
        # A tenant's quota (``tokens_per_day``, ``concurrent_sessions``, ...) or a budget's limit.
        kind = "quota" if self.dimension.endswith("_per_day") or self.dimension == "concurrent_sessions" else "budget"
        if self.estimated is not None:
            prompt = _quantity(self.dimension, self.estimated)
            return f"{self.dimension} {kind} of {limit} would be passed by the next model call's prompt alone (~{prompt}; used {used}): not sent"
        return f"{self.dimension} {kind} of {limit} reached (used {used})"


def _quantity(dimension: str, value: float) -> str:
    if dimension.startswith("cost_usd"):
        return f"${value:,.4f}".rstrip("0").rstrip(".") if value else "$0"
    if dimension == "wall_seconds":
        minutes = math.ceil(value / 60) if value > 0 else 0
        return f"{minutes // 60}h {minutes % 60}m wall time"
    name = {"input_tokens": "input tokens", "output_tokens": "output tokens", "tokens": "tokens"}.get(dimension, dimension.replace("_", " "))
    return f"{int(value):,} {name}"


class RaiseBudgetInput(Model):
    """Update ``raise_budget`` (sessions and autonomous tasks): every limit ``budget`` sets replaces the
    current one (unset ones stay); a task also takes ``max_sessions``. Work stopped at
    ``budget_exceeded`` goes on. Owner only (or an operator with a reason). ``expires_at``: as
    ``TaskControlInput``'s (a task's; a session's ``raise_budget`` is not refused by it)."""

    principal: str
    budget: Budget = Field(default_factory=Budget)
    max_sessions: int | None = Field(default=None, ge=1, le=10_000)  # MAX_TASK_SESSIONS
    reason: str | None = None
    expires_at: AwareDatetime | None = Field(default=None, exclude_if=lambda v: v is None)  # as TaskControlInput's

    @model_validator(mode="after")
    def _something_raised(self) -> RaiseBudgetInput:
        if self.budget.is_unbounded() and self.max_sessions is None:
            raise ValueError("raise_budget needs at least one limit (a budget field or max_sessions)")
        return self
