"""The gateway's audit route (``GET /v1/audit``, scope ``admin``): every principal's acts on
sessions, tasks, graphs and memories, the list ``agentrt audit --json`` prints."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from agentrt.gateway._auth import Caller, caller_for
from agentrt.gateway._errors import Problem
from agentrt.schemas import AuditEntry
from agentrt.store import MAX_AUDIT_LIMIT

__all__ = ["audit_routes"]

AdminCaller = Annotated[Caller, Depends(caller_for("admin"))]
# The longest principal, target or action a filter names (characters): no stored one is longer.
MAX_FILTER_CHARS = 600


def audit_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/audit", tags=["audit"])

    @router.get(
        "", response_model=list[AuditEntry],
        summary="List the audit log: who did what, on what, when and why",
        description=(
            "The latest acts of principals (approve, deny, edit, cancel, archive, reconcile, raise_budget, pause, "
            "resume, approve_plan, accept_memory, ...), newest first, whatever carried them (the Python client, the "
            "CLI, this gateway or a signal sent from the Temporal UI). Filters: `principal`, `target` (a session, "
            "task, graph or memory id), `action`, `since` (ISO 8601; UTC unless it names a zone). Operators only "
            "(scope `admin`)."
        ),
    )
    async def audit(
        caller: AdminCaller,
        principal: Annotated[str | None, Query(max_length=MAX_FILTER_CHARS)] = None,
        target: Annotated[str | None, Query(max_length=MAX_FILTER_CHARS)] = None,
        action: Annotated[str | None, Query(max_length=MAX_FILTER_CHARS)] = None,
        since: Annotated[datetime | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_LIMIT)] = 100,
    ) -> list[AuditEntry]:
        store = caller.client.store
        if store is None:
            raise Problem(503, "unavailable", "the gateway has no store: the audit log is kept there")
        return await asyncio.to_thread(
            store.audit, principal=principal, target=target, action=action, since=since, limit=limit
        )

    return router
