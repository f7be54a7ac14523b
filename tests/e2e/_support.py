"""Helpers for end-to-end tests: scripted-model files and waiting on events."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

from client import AgentClient
from schemas import ApprovalPolicy, Event, SessionConfig

ALLOW_ALL = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow")


def write_script(directory: Path, turns: list[dict[str, Any]], name: str = "script.json") -> str:
    path = directory / name
    path.write_text(json.dumps({"turns": turns}))
    return str(path)


def session_config(client: AgentClient, session_id: str, workspace: Path, script: str, **fields: Any) -> SessionConfig:
    fields.setdefault("heartbeat_timeout_seconds", 5.0)
    return client.new_config(str(workspace), session_id=session_id, profile="scripted", script=script, **fields)


async def wait_for_event(
    client: AgentClient, session_id: str, predicate: Callable[[Event], bool], timeout: float = 60.0
) -> Event:
    """Poll the ``events`` query until an event matches (bounded by ``timeout`` seconds)."""
    async def poll() -> Event:
        while True:
            try:
                page = await client.events(session_id)
            except Exception:  # noqa: BLE001 - the workflow may not have started yet
                page = None
            if page is not None:
                for event in page.events:
                    if predicate(event):
                        return event
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), timeout)


def event_types(events: list[Event]) -> list[str]:
    return [e.type for e in events]
