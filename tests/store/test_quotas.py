"""A tenant's day in the store, on SQLite and PostgreSQL: tokens, cost and tool calls summed from
the usage receipts of its owners' sessions since the start of the day, and operators' quota
raises recorded with who, when and why (the latest of a quota is its limit); the 0014 migration."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, update

from agentrt.schemas import Quota, SessionConfig, StoreAppendInput
from agentrt.store import Store
from agentrt.store._models import quota_raises, usage_receipts


def _session(store: Store, session_id: str, owner: str) -> None:
    config = SessionConfig(session_id=session_id, owner=owner, workspace="/ws", profile="scripted")
    store.append(StoreAppendInput(session_id=session_id, config=config))


def test_the_quota_tables_match_their_migration(store: Store) -> None:
    ours = MetaData()
    for table in (quota_raises, usage_receipts):
        table.to_metadata(ours)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), ours)
    assert [d for d in diff if "quota" in str(d) or "usage_receipts" in str(d)] == []


def test_a_tenant_s_day_sums_the_receipts_of_its_owners_sessions_since_the_day_began(store: Store) -> None:
    _session(store, "a1", "alice")  # (the PostgreSQL store empties sessions and receipts between tests)
    _session(store, "b1", "bob")
    _session(store, "c1", "carol")
    store.record_usage("a1", "turn-1", 1, 1, "completed", 100, 20, cost_usd=0.5, tool_calls=2)
    store.record_usage("a1", "turn-1", 2, 1, "interrupted", 30, 0)
    store.record_usage("b1", "turn-1", 1, 1, "completed", 10, 5, cost_usd=0.25, tool_calls=1)
    store.record_usage("c1", "turn-1", 1, 1, "completed", 1000, 1000, cost_usd=9.0, tool_calls=9)  # another tenant
    store.record_usage("b1", "turn-0", 1, 1, "completed", 7000, 7000, cost_usd=70.0, tool_calls=70)
    yesterday = datetime.now(timezone.utc) - timedelta(days=1)
    with store.transaction() as conn:
        conn.execute(update(usage_receipts).where(usage_receipts.c.turn_id == "turn-0").values(created_at=yesterday))
    day = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)

    tokens, cost, calls = store.tenant_usage(["alice", "bob"], day)

    assert (tokens, calls) == (100 + 20 + 30 + 10 + 5, 3) and cost == pytest.approx(0.75)
    assert store.tenant_usage(["nobody"], day) == (0, 0.0, 0)
    assert store.session_owner("b1") == "bob" and store.session_owner("zz") is None


def test_the_latest_raise_of_each_quota_is_its_limit_and_every_raise_is_kept(store: Store) -> None:
    acme, other = f"acme-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    assert store.raised_quota(acme) is None
    store.raise_quota(acme, "tokens_per_day", 1000, "ops", "trial")
    store.raise_quota(acme, "cost_usd_per_day", 2.5, "ops", "trial")
    store.raise_quota(acme, "tokens_per_day", 5000, "root", "customer upgraded")
    store.raise_quota(other, "tool_calls_per_day", 1, "ops", "elsewhere")

    assert store.raised_quota(acme) == Quota(tokens_per_day=5000, cost_usd_per_day=2.5)
    raises = store.quota_raises(acme)
    assert [(r.quota, r.limit, r.principal, r.reason) for r in raises] == [
        ("tokens_per_day", 1000, "ops", "trial"), ("cost_usd_per_day", 2.5, "ops", "trial"),
        ("tokens_per_day", 5000, "root", "customer upgraded"),
    ]
    assert all(r.at.tzinfo is not None for r in raises)


def test_each_raise_is_an_act_in_the_audit_log_with_who_what_and_why(store: Store) -> None:
    acme = f"acme-{uuid.uuid4().hex[:8]}"
    store.raise_quota(acme, "tokens_per_day", 1000, "ops", "trial")
    store.raise_quota(acme, "tokens_per_day", 1000, "ops", "trial")  # the same raise twice: two acts

    acts = store.audit(target=acme, limit=10)

    assert [(a.principal, a.action, a.target_kind, a.target_id, a.reason) for a in acts] == [("ops", "raise_quota", "tenant", acme, "trial")] * 2
    assert acts[0].detail == {"quota": "tokens_per_day", "limit": 1000}


@pytest.mark.parametrize(
    ("quota", "limit", "reason", "problem"),
    [("tokens", 1, "x", "unknown quota"), ("tokens_per_day", -1, "x", "0 or more"), ("tokens_per_day", 1, " ", "reason")],
)
def test_a_raise_with_an_unknown_quota_a_negative_limit_or_no_reason_is_refused(
    store: Store, quota: str, limit: float, reason: str, problem: str
) -> None:
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ValueError, match=problem):
        store.raise_quota(tenant, quota, limit, "ops", reason)
    assert store.quota_raises(tenant) == []
