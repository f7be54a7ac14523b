"""The gateway's owner-wide kill switch (``POST /v1/pause`` and ``POST /v1/resume``, scope ``admin``):
every running session, task and graph of one owner paused or resumed at once, the report
``agentrt pause --owner X --json`` prints (``AgentClient.pause_owner``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from agentrt.gateway._auth import Caller, caller_for
from agentrt.gateway._models import OwnerPauseRequest
from agentrt.schemas import OwnerPauseReport

__all__ = ["pause_routes"]

AdminCaller = Annotated[Caller, Depends(caller_for("admin"))]


def pause_routes() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["pause"])

    @router.post(
        "/pause", response_model=OwnerPauseReport, summary="Pause every running session, task and graph of one owner",
        description=(
            "No model or tool call starts in any of them until `POST /v1/resume` (a call in flight finishes; messages "
            "queue). Sessions a task, graph or session started pause with their parent. The caller must be the owner or "
            "one of the gateway's operators giving a `reason` (403 otherwise; each workflow checks its own operators "
            "too). The report has each workflow's outcome: `paused`, `already`, `refused`, `gone` or `failed`."
        ),
    )
    async def pause(body: OwnerPauseRequest, caller: AdminCaller) -> OwnerPauseReport:
        return await caller.client.pause_owner(body.owner, body.reason)

    @router.post(
        "/resume", response_model=OwnerPauseReport, summary="Resume every paused session, task and graph of one owner",
        description="Each goes on where it stopped. Who may: as `POST /v1/pause`.",
    )
    async def resume(body: OwnerPauseRequest, caller: AdminCaller) -> OwnerPauseReport:
        return await caller.client.resume_owner(body.owner, body.reason)

    return router
