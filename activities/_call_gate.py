"""What a model call must pass before it is sent: the session's budget and its tenant's quotas.

``provider.complete`` asks its ``CallGate`` after it has read the call's context and before it
writes the attempt's "started" receipt. A prompt whose estimate alone would pass a token or cost
limit of the session's budget (``Budget.passed_by``), or a tenant already at a daily quota or
that the prompt would take past one (``check_quota``), is refused with a non-retryable
``ApplicationError`` typed ``BudgetExceeded`` (details: the ``BudgetCrossing``) or
``QuotaExceeded`` (details: ``QuotaExceeded.details()``): the turn ends ``budget_exceeded`` and
the provider gets no request. It also prices an attempt for its receipt, which a tenant's day sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection
from temporalio.exceptions import ApplicationError

from agentrt.schemas import (
    Message,
    ModelCallInput,
    ModelProfile,
    ModelResponse,
    QuotaPolicy,
    QuotaUsage,
    ToolSpec,
    Usage,
    check_quota,
    quota_day,
)
from agentrt.workflows.context import estimate_tokens

if TYPE_CHECKING:
    from agentrt.store import Store


class CallGate:
    """Checks a model call against its session's budget and its tenant's quotas: ``config``'s
    ``quotas`` (a ``QuotaPolicy``, read at each call; none, or unbounded: none checked)."""

    def __init__(self, store: "Store", config: object) -> None:
        self._store = store
        self._config = config

    def _policy(self) -> QuotaPolicy | None:
        quotas = getattr(self._config, "quotas", None)
        return quotas if isinstance(quotas, QuotaPolicy) and not quotas.is_unbounded() else None

    @staticmethod
    def prompt_tokens(input: ModelCallInput, system: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        """The call's input tokens, estimated: its context plan's (calibrated by the provider's
        reports) when it has one, else the request's size at ``BYTES_PER_TOKEN``."""
        if input.plan is not None and input.plan.estimated_tokens > 0:
            return input.plan.estimated_tokens
        size = len((system or "").encode())
        size += sum(len(t.model_dump_json().encode()) for t in tools)
        for message in messages:
            size += len(message.text.encode()) + sum(len(c.name) + len(c.arguments_raw or str(c.arguments or "")) for c in message.tool_calls)
        return estimate_tokens(size)

    def refusal(self, input: ModelCallInput, profile: ModelProfile, prompt_tokens: int, conn: Connection) -> ApplicationError | None:
        """Why the call may not be sent (a non-retryable ``ApplicationError``), or None."""
        cost = profile.price.cost(Usage(input_tokens=prompt_tokens)) if profile.price is not None else 0.0
        if input.budget is not None and input.spend is not None:
            crossing = input.budget.passed_by(input.spend, prompt_tokens, cost)
            if crossing is not None:
                return ApplicationError(crossing.text(), crossing.model_dump(mode="json"), type="BudgetExceeded", non_retryable=True)
        quotas = self._policy()
        if quotas is None:
            return None
        owner = self._store.session_owner(input.session_id, conn=conn)
        if owner is None:
            return None
        tenant = quotas.tenant_of(owner)
        limits = quotas.limits(tenant, self._store.raised_quota(tenant, conn=conn))
        if limits.tokens_per_day is None and limits.cost_usd_per_day is None and limits.tool_calls_per_day is None:
            return None
        day, _ = quota_day(datetime.now(UTC))
        tokens, spent, calls = self._store.tenant_usage(quotas.owners_of(tenant), day, conn=conn)
        usage = QuotaUsage(day=day, tokens=tokens, cost_usd=spent, tool_calls=calls)
        exceeded = check_quota(tenant, limits, usage, prompt_tokens=prompt_tokens, prompt_cost_usd=cost)
        if exceeded is None:
            return None
        return ApplicationError(str(exceeded), exceeded.details(), type="QuotaExceeded", non_retryable=True)

    @staticmethod
    def priced(profile: ModelProfile, usage: Usage, response: ModelResponse | None) -> tuple[float, int]:
        """(cost in US dollars, tool calls asked for) of an attempt, for its receipt."""
        cost = profile.price.cost(usage) if profile.price is not None else 0.0
        return cost, len(response.tool_calls) if response is not None else 0
