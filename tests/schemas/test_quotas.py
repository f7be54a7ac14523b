"""Quotas as pure values: tenants over owners, limits over defaults and raises, what a check refuses
(a quota reached, or a prompt that would pass one) and what a refusal says; a prompt that would pass
a session's budget."""

from __future__ import annotations

from datetime import UTC, datetime

from agentrt.schemas import Budget, Quota, QuotaPolicy, QuotaUsage, Spend, Usage, check_quota, quota_day

NOW = datetime(2026, 12, 6, 16, 30, tzinfo=UTC)
DAY, MIDNIGHT = quota_day(NOW)
POLICY = QuotaPolicy(
    default=Quota(tokens_per_day=1_000, concurrent_sessions=5),
    tenants={"acme": Quota(tokens_per_day=50_000, cost_usd_per_day=2.0)},
    owners={"alice": "acme", "bob": "acme"},
)


def test_an_owner_belongs_to_its_tenant_or_is_a_tenant_of_its_own() -> None:
    assert POLICY.tenant_of("alice") == "acme" and POLICY.tenant_of("carol") == "carol"
    assert POLICY.owners_of("acme") == ["acme", "alice", "bob"] and POLICY.owners_of("carol") == ["carol"]
    assert QuotaPolicy(owners={"acme": "bigco"}).owners_of("acme") == []  # the name is mapped elsewhere


def test_a_tenant_s_limits_are_the_default_its_own_then_the_raises() -> None:
    assert POLICY.limits("carol") == Quota(tokens_per_day=1_000, concurrent_sessions=5)
    assert POLICY.limits("acme") == Quota(tokens_per_day=50_000, cost_usd_per_day=2.0, concurrent_sessions=5)
    assert POLICY.limits("acme", Quota(tokens_per_day=90_000)).tokens_per_day == 90_000


def test_the_day_runs_from_utc_midnight_to_the_next() -> None:
    assert DAY == datetime(2026, 12, 6, tzinfo=UTC) and MIDNIGHT == datetime(2026, 12, 7, tzinfo=UTC)


def test_a_tenant_at_a_daily_quota_is_refused_with_the_quota_the_use_and_the_reset() -> None:
    err = check_quota("acme", POLICY.limits("acme"), QuotaUsage(day=DAY, tokens=50_000))
    assert err is not None and (err.quota, err.limit, err.used, err.resets_at) == ("tokens_per_day", 50_000, 50_000, MIDNIGHT)
    assert "tokens_per_day quota of 50,000 (used 50,000)" in str(err) and "2026-12-07T00:00:00Z" in str(err)
    assert "agentrt quota raise acme --tokens-per-day" in str(err)
    assert check_quota("acme", POLICY.limits("acme"), QuotaUsage(day=DAY, tokens=49_999)) is None


def test_a_prompt_that_would_pass_a_quota_is_refused_and_one_that_fits_is_not() -> None:
    usage = QuotaUsage(day=DAY, tokens=49_000, cost_usd=1.9)
    err = check_quota("acme", POLICY.limits("acme"), usage, prompt_tokens=1_001)
    assert err is not None and err.quota == "tokens_per_day" and err.estimated == 1_001
    assert check_quota("acme", POLICY.limits("acme"), usage, prompt_tokens=1_000) is None
    cost = check_quota("acme", POLICY.limits("acme"), usage, prompt_tokens=10, prompt_cost_usd=0.2)
    assert cost is not None and cost.quota == "cost_usd_per_day"


def test_concurrent_sessions_are_checked_only_where_counted_and_free_up_as_sessions_end() -> None:
    assert check_quota("carol", POLICY.limits("carol"), QuotaUsage(day=DAY)) is None
    err = check_quota("carol", POLICY.limits("carol"), QuotaUsage(day=DAY, sessions=5))
    assert err is not None and err.quota == "concurrent_sessions" and err.resets_at is None
    assert "frees up as the tenant's sessions end" in str(err)


def test_a_prompt_that_alone_would_pass_the_session_s_budget_is_a_crossing_with_its_estimate() -> None:
    spend = Spend(usage=Usage(input_tokens=600, output_tokens=100), cost_usd=0.01)
    crossing = Budget(max_tokens=1_000).passed_by(spend, 301)
    assert crossing is not None and (crossing.dimension, crossing.limit, crossing.used, crossing.estimated) == ("tokens", 1_000, 700, 301)
    assert crossing.text().startswith("tokens budget of 1,000 tokens would be passed by the next model call's prompt alone")
    assert Budget(max_tokens=1_000).passed_by(spend, 300) is None
    assert Budget(max_output_tokens=10).passed_by(spend, 10**9) is None  # output is known only after the call
    cost = Budget(max_cost_usd=0.02).passed_by(spend, 5, 0.011)
    assert cost is not None and cost.dimension == "cost_usd"
