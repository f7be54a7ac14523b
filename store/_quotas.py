"""Tenant quotas in the store: a tenant's use of a UTC day, summed from the usage receipts of its
owners' sessions (tokens, cost, tool calls: no counter of its own to drift), and the operators'
recorded quota raises (table ``quota_raises``: who raised what, when and why)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, insert, select

from agentrt.schemas import QUOTA_NAMES, Quota, QuotaRaiseRecord
from agentrt.store._audit import AuditTable
from agentrt.store._base import utc
from agentrt.store._models import quota_raises, sessions, usage_receipts


class QuotaTables(AuditTable):
    """Table ``quota_raises``, and the day's sums over ``usage_receipts`` and ``sessions``."""

    def tenant_usage(self, owners: list[str], since: datetime, *, conn: Connection | None = None) -> tuple[int, float, int]:
        """(tokens, cost in US dollars, tool calls) of the model call attempts that began at or after
        ``since`` in sessions owned by any of ``owners``; every attempt counts (an interrupted one's
        reported tokens too)."""
        r, s = usage_receipts.c, sessions.c
        q = (
            select(
                func.coalesce(func.sum(r.input_tokens + r.output_tokens), 0),
                func.coalesce(func.sum(r.cost_usd), 0.0),
                func.coalesce(func.sum(r.tool_calls), 0),
            )
            .select_from(usage_receipts.join(sessions, s.session_id == r.session_id))
            .where(s.owner.in_(owners), r.created_at >= since)
        )
        with self._reading(conn) as c:
            tokens, cost, calls = c.execute(q).one()
        return int(tokens), float(cost), int(calls)

    def session_owner(self, session_id: str, *, conn: Connection | None = None) -> str | None:
        """The owner of session ``session_id`` as the store has it, or None before its config is written."""
        with self._reading(conn) as c:
            return c.execute(select(sessions.c.owner).where(sessions.c.session_id == session_id)).scalar_one_or_none()

    def raise_quota(self, tenant: str, quota: str, limit: float, principal: str, reason: str) -> QuotaRaiseRecord:
        """Record that ``principal`` set ``tenant``'s ``quota`` to ``limit`` because of ``reason``; the
        latest raise of a quota is its limit. Raises ``ValueError`` for an unknown quota name, a
        negative limit or an empty reason."""
        if quota not in QUOTA_NAMES:
            raise ValueError(f"unknown quota {quota!r}; known: {', '.join(QUOTA_NAMES)}")
        if limit < 0:
            raise ValueError(f"a quota limit is 0 or more, not {limit}")
        if not reason.strip():
            raise ValueError("a quota raise needs a reason")
        now = self._now()
        with self.transaction() as conn:
            row = conn.execute(
                insert(quota_raises).values(
                    tenant=tenant, quota=quota, limit_value=limit, principal=principal, reason=reason, created_at=now
                )
            )
            raise_id = row.inserted_primary_key[0] if row.inserted_primary_key is not None else now.isoformat()
            self.record_act(
                principal, "raise_quota", "tenant", tenant, reason=reason, detail={"quota": quota, "limit": limit},
                key=f"tenant:{tenant}:quota:{raise_id}", at=now, conn=conn,
            )
        return QuotaRaiseRecord(tenant=tenant, quota=quota, limit=limit, principal=principal, reason=reason, at=now)

    def quota_raises(self, tenant: str) -> list[QuotaRaiseRecord]:
        """Every recorded raise of ``tenant``'s quotas, oldest first."""
        c = quota_raises.c
        q = select(quota_raises).where(c.tenant == tenant).order_by(c.created_at, c.id)
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [
            QuotaRaiseRecord(
                tenant=r.tenant, quota=r.quota, limit=r.limit_value, principal=r.principal, reason=r.reason, at=utc(r.created_at)
            )
            for r in rows
        ]

    def raised_quota(self, tenant: str, *, conn: Connection | None = None) -> Quota | None:
        """The limits operators set for ``tenant`` (the latest raise of each quota), or None without any."""
        c = quota_raises.c
        q = select(c.quota, c.limit_value).where(c.tenant == tenant).order_by(c.created_at, c.id)
        with self._reading(conn) as reading:
            rows = reading.execute(q).all()
        if not rows:
            return None
        latest = {quota: limit for quota, limit in rows}
        return Quota.model_validate(
            {name: (value if name == "cost_usd_per_day" else int(value)) for name, value in latest.items()}
        )
