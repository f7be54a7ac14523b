"""Tenant quotas: what one tenant may use across all its sessions, tasks and graphs.

A tenant is a name above owners: ``QuotaPolicy.owners`` maps an owner (a principal) to its
tenant, and an owner not in the map is a tenant of its own. Each tenant has ``Quota`` limits
(the configured default, or its own, or an operator's recorded raise): concurrent sessions,
and per UTC day tokens, US dollars and tool calls. A start or a model call over one is refused
with ``QuotaExceeded`` (``check_quota``), which names the quota, its limit, the amount used
and when it resets.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import Field, field_validator

from agentrt.schemas._base import Model
from agentrt.schemas._run_errors import QuotaExceeded

__all__ = [
    "QUOTA_NAMES",
    "Quota",
    "QuotaPolicy",
    "QuotaRaiseRecord",
    "QuotaUsage",
    "QuotaView",
    "check_quota",
    "quota_day",
]

# The quotas a tenant has, by name: the fields of ``Quota`` (and ``agentrt quota raise`` flags).
QUOTA_NAMES = ("concurrent_sessions", "tokens_per_day", "cost_usd_per_day", "tool_calls_per_day")


class Quota(Model):
    """A tenant's limits; None leaves one unbounded.

    - ``concurrent_sessions``: sessions open at once (running workflows, children included).
    - ``tokens_per_day``: input plus output tokens of its model calls in one UTC day.
    - ``cost_usd_per_day``: US dollars of its model calls in one UTC day (priced by the profile's
      ``ModelPrice``; a call without a price costs 0).
    - ``tool_calls_per_day``: tool calls its models asked for in one UTC day.
    """

    concurrent_sessions: int | None = Field(default=None, ge=0)
    tokens_per_day: int | None = Field(default=None, ge=0)
    cost_usd_per_day: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    tool_calls_per_day: int | None = Field(default=None, ge=0)

    def is_unbounded(self) -> bool:
        return all(v is None for v in self.model_dump().values())

    def over(self, other: Quota) -> Quota:
        """This quota with every limit ``other`` sets replaced by ``other``'s."""
        return Quota(**{**self.model_dump(), **{k: v for k, v in other.model_dump().items() if v is not None}})


class QuotaPolicy(Model):
    """The deployment's quotas (agentrt.toml ``[quotas]`` and ``[tenants]``): ``default`` for every
    tenant, ``tenants`` per tenant (its fields replace the default's), ``owners`` owner → tenant."""

    default: Quota = Field(default_factory=Quota)
    tenants: dict[str, Quota] = Field(default_factory=dict)
    owners: dict[str, str] = Field(default_factory=dict)

    @field_validator("owners")
    @classmethod
    def _named(cls, owners: dict[str, str]) -> dict[str, str]:
        for owner, tenant in owners.items():
            if not owner.strip() or not tenant.strip():
                raise ValueError(f"[tenants]: an owner and its tenant are non-empty names, not {owner!r} = {tenant!r}")
        return owners

    def is_unbounded(self) -> bool:
        """No tenant has a limit: nothing to count or check."""
        return self.default.is_unbounded() and all(q.is_unbounded() for q in self.tenants.values())

    def tenant_of(self, owner: str) -> str:
        """The tenant ``owner`` belongs to: its ``[tenants]`` entry, else the owner itself."""
        return self.owners.get(owner, owner)

    def owners_of(self, tenant: str) -> list[str]:
        """The owners whose use counts for ``tenant`` (sorted): those mapped to it, and the tenant's
        own name unless that name is mapped to another tenant."""
        found = {owner for owner, t in self.owners.items() if t == tenant}
        if tenant not in self.owners:
            found.add(tenant)
        return sorted(found)

    def limits(self, tenant: str, raised: Quota | None = None) -> Quota:
        """``tenant``'s limits: the default, its own configured ones over it, then ``raised`` (the
        operators' recorded raises) over those."""
        limits = self.default.over(self.tenants.get(tenant, Quota()))
        return limits.over(raised) if raised is not None else limits


class QuotaUsage(Model):
    """What a tenant has used: ``sessions`` open now (None: not counted), and since ``day`` (the
    start of the UTC day) ``tokens`` (input plus output), ``cost_usd`` (US dollars) and
    ``tool_calls``."""

    day: datetime
    sessions: int | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    tool_calls: int = 0


class QuotaRaiseRecord(Model):
    """An operator's raise of one quota: ``tenant``, ``quota`` (one of ``QUOTA_NAMES``), the new
    ``limit``, who (``principal``), why (``reason``) and when (``at``, UTC)."""

    tenant: str
    quota: str
    limit: float
    principal: str
    reason: str
    at: datetime


class QuotaView(Model):
    """A tenant's quotas as ``agentrt quota show`` prints them: its ``owners``, ``limits`` (after
    raises), ``usage`` today, the day's ``resets_at`` (UTC midnight) and the recorded ``raises``."""

    tenant: str
    owners: list[str]
    limits: Quota
    usage: QuotaUsage
    resets_at: datetime
    raises: list[QuotaRaiseRecord] = Field(default_factory=list)


def quota_day(now: datetime) -> tuple[datetime, datetime]:
    """The UTC day ``now`` falls in: (its start, the next day's start, when the daily quotas reset)."""
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1)


def check_quota(
    tenant: str, limits: Quota, usage: QuotaUsage, *, prompt_tokens: int = 0, prompt_cost_usd: float = 0.0
) -> QuotaExceeded | None:
    """The first quota ``usage`` is at (used >= limit), or that a model call's prompt would pass
    (``prompt_tokens``, ``prompt_cost_usd``: its estimate); None when all hold. Concurrent
    sessions are checked only when ``usage.sessions`` is counted (a start); they reset when one
    of the tenant's sessions ends (``resets_at`` None), the daily quotas at the next UTC midnight."""
    _, resets = quota_day(usage.day)
    checks: list[tuple[str, float | None, float, float]] = [
        ("tokens_per_day", limits.tokens_per_day, usage.tokens, prompt_tokens),
        ("cost_usd_per_day", limits.cost_usd_per_day, usage.cost_usd, prompt_cost_usd),
        ("tool_calls_per_day", limits.tool_calls_per_day, usage.tool_calls, 0),
    ]
    if usage.sessions is not None and limits.concurrent_sessions is not None and usage.sessions >= limits.concurrent_sessions:
        return QuotaExceeded(tenant, "concurrent_sessions", limits.concurrent_sessions, usage.sessions, None)
    for name, limit, used, added in checks:
        if limit is not None and (used >= limit or (added > 0 and used + added > limit)):
            return QuotaExceeded(tenant, name, limit, used, resets, estimated=added or None)
    return None
