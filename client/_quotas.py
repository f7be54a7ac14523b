"""Tenant quotas on the client: the check every start makes, and what operators read and raise.

A start (``sessions.start``, ``start_and_wait``, ``tasks.start``, ``graphs.start``, and so the CLI
and the gateway) asks ``Quotas.check_start`` first: a tenant at a quota gets ``QuotaExceeded`` and
nothing starts. Concurrent sessions are counted in Temporal visibility (running session
workflows whose ``AgentOwner`` is one of the tenant's owners); the day's tokens, dollars and tool
calls are summed from the store's usage receipts (``Store.tenant_usage``), so a client without a
store checks concurrent sessions only. The model activity checks the daily quotas again before
each call (``activities/_call_gate.py``), so a turn over quota is refused too.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from agentrt.client._connection import Connection
from agentrt.schemas import (
    QUOTA_NAMES,
    SESSION_OWNER,
    SESSION_WORKFLOW,
    Quota,
    QuotaExceeded,
    QuotaUsage,
    QuotaView,
    RequestRejected,
    check_quota,
    quota_day,
)

__all__ = ["Quotas"]


def _literal(value: str) -> str:
    """``value`` as a visibility-query string literal (single quotes, backslash-escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _rejected(tenant: str, request: str, reason: str) -> RequestRejected:
    """``tenant <tenant> rejected <request>: <reason>`` (the error's ``session_id`` field holds the tenant)."""
    error = RequestRejected(tenant, request, reason)
    error.args = (f"tenant {tenant} rejected {request}: {reason}",)
    return error


class Quotas:
    """``check_start``, ``show`` and ``raise_quota`` over the connection's ``QuotaPolicy``
    (``Connection.quotas``, the configuration's ``[quotas]`` and ``[tenants]``) and store."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def tenant(self, owner: str | None = None) -> str:
        """The tenant of ``owner`` (default: this client's principal)."""
        return self._connection.quotas.tenant_of(owner or self._connection.principal)

    async def usage(self, tenant: str, *, sessions: bool = True) -> QuotaUsage:
        """What ``tenant`` has used today (UTC): its open sessions (when ``sessions``; from Temporal
        visibility) and, with a store, the day's tokens, US dollars and tool calls."""
        c = self._connection
        owners = c.quotas.owners_of(tenant)
        day, _ = quota_day(datetime.now(UTC))
        usage = QuotaUsage(day=day)
        if sessions:
            query = (
                f"WorkflowType = '{SESSION_WORKFLOW}' AND ExecutionStatus = 'Running' AND "
                f"{SESSION_OWNER.name} IN ({', '.join(_literal(o) for o in owners)})"
            )
            usage.sessions = (await c.temporal.count_workflows(query)).count
        if c.store is not None:
            tokens, cost, calls = await asyncio.to_thread(c.store.tenant_usage, owners, day)
            usage.tokens, usage.cost_usd, usage.tool_calls = tokens, cost, calls
        return usage

    async def limits(self, tenant: str) -> Quota:
        """``tenant``'s limits: configured, with the operators' recorded raises over them."""
        c = self._connection
        raised = await asyncio.to_thread(c.store.raised_quota, tenant) if c.store is not None else None
        return c.quotas.limits(tenant, raised)

    async def check_start(self) -> None:
        """Raise ``QuotaExceeded`` (nothing started) when this principal's tenant is at a quota; a
        deployment without quotas asks nothing."""
        c = self._connection
        if c.quotas.is_unbounded() and c.store is None:
            return
        tenant = self.tenant()
        limits = await self.limits(tenant)
        if limits.is_unbounded():
            return
        usage = await self.usage(tenant, sessions=limits.concurrent_sessions is not None)
        exceeded = check_quota(tenant, limits, usage)
        if exceeded is not None:
            raise exceeded

    async def show(self, tenant: str | None = None) -> QuotaView:
        """``tenant``'s quotas (default: this principal's tenant): owners, limits after raises, today's
        use, when the day resets (UTC midnight) and the recorded raises. Another tenant's are an
        operator's to read: anyone else gets ``RequestRejected``."""
        c = self._connection
        tenant = tenant or self.tenant()
        if tenant != self.tenant() and c.principal not in c.operators:
            raise _rejected(tenant, "quota show", "only an operator reads another tenant's quotas")
        limits = await self.limits(tenant)
        usage = await self.usage(tenant)
        raises = await asyncio.to_thread(c.store.quota_raises, tenant) if c.store is not None else []
        return QuotaView(
            tenant=tenant, owners=c.quotas.owners_of(tenant), limits=limits, usage=usage,
            resets_at=quota_day(usage.day)[1], raises=raises,
        )

    async def raise_quota(
        self,
        tenant: str,
        *,
        reason: str,
        concurrent_sessions: int | None = None,
        tokens_per_day: int | None = None,
        cost_usd_per_day: float | None = None,
        tool_calls_per_day: int | None = None,
    ) -> QuotaView:
        """Set ``tenant``'s given quotas to the given limits (tokens, US dollars, tool calls per UTC
        day; sessions at once), recorded in the store with this principal, the time and ``reason``;
        the latest raise of a quota is its limit from now on, and a start or turn refused by it goes
        on. Operators only (``[principals] operators``). Raises ``RequestRejected`` for another
        principal, an empty reason, no limit given or a negative one; ``ConfigurationError`` without a store."""
        c = self._connection
        store = c.needs_store("quotas.raise_quota")
        given = {
            "concurrent_sessions": concurrent_sessions, "tokens_per_day": tokens_per_day,
            "cost_usd_per_day": cost_usd_per_day, "tool_calls_per_day": tool_calls_per_day,
        }
        given = {name: value for name, value in given.items() if value is not None}
        if c.principal not in c.operators:
            raise _rejected(tenant, "quota raise", f"{c.principal} is not an operator ([principals] operators)")
        if not reason.strip():
            raise _rejected(tenant, "quota raise", "a quota raise needs a reason")
        if not given:
            raise _rejected(tenant, "quota raise", f"name at least one quota: {', '.join(QUOTA_NAMES)}")
        negative = [name for name, value in given.items() if value < 0]
        if negative:
            raise _rejected(tenant, "quota raise", f"a limit is 0 or more: {', '.join(negative)}")
        for name, value in given.items():
            await asyncio.to_thread(store.raise_quota, tenant, name, float(value), c.principal, reason)
        return await self.show(tenant)
