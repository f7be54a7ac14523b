"""The gateway's operator routes (``/v1/health``, scope ``admin``): the sessions, tasks and graphs
whose workflow task keeps failing, the same list ``agentrt doctor`` prints."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from agentrt.gateway._auth import Caller, caller_for
from agentrt.client import find_stuck_workflows
from agentrt.schemas import StuckWorkflow

__all__ = ["health_routes"]

AdminCaller = Annotated[Caller, Depends(caller_for("admin"))]
# The most workflows one request looks at.
MAX_STUCK_LIMIT = 10_000


def health_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/health", tags=["health"])
    one_at_a_time = asyncio.Lock()  # a scan describes up to `limit` workflows: requests queue behind it

    @router.get(
        "/stuck", response_model=list[StuckWorkflow],
        summary="List stuck sessions, tasks and graphs (their workflow task keeps failing)",
        description=(
            "Running workflows of every principal whose workflow task failed or timed out again and again (a "
            "non-determinism error, an exception in workflow code, no worker finishing it): each with its cause, "
            "the failure's message and a hint. Empty when none is stuck. `scan=true` describes every running "
            "workflow instead of listing those the Temporal server flagged. Requests are answered one at a time."
        ),
    )
    async def stuck(
        caller: AdminCaller,
        limit: Annotated[int, Query(ge=1, le=MAX_STUCK_LIMIT)] = 1000,
        scan: Annotated[bool | None, Query()] = None,
    ) -> list[StuckWorkflow]:
        async with one_at_a_time:
            return await find_stuck_workflows(caller.client.temporal, scan=scan, limit=limit)

    return router
