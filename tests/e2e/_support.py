"""Helpers for end-to-end tests: scripted-model files and waiting on events."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from temporalio.api.enums.v1 import EventType

from agentrt.client import AgentClient
from agentrt.schemas import ApprovalPolicy, Event, SessionConfig

if TYPE_CHECKING:
    from tests.conftest import Harness

ALLOW_ALL = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow")


def write_script(directory: Path, turns: list[dict[str, Any]], name: str = "script.json") -> str:
    path = directory / name
    path.write_text(json.dumps({"turns": turns}))
    return str(path)


def session_config(client: AgentClient, session_id: str, workspace: Path, script: str, **fields: Any) -> SessionConfig:
    fields.setdefault("heartbeat_timeout_seconds", 5.0)
    fields.setdefault("profile", "scripted")
    return client.new_config(str(workspace), session_id=session_id, script=script, **fields)


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


@contextmanager
def worker_process(
    harness: "Harness", log: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`agentrt worker` (with ``args``) as a separate process on the harness's ``-proc`` task queue
    (``env`` adds to and overrides its environment); stopped on exit."""
    env = {
        **os.environ,
        "AGENTRT_TEMPORAL_ADDRESS": harness.server.address,
        "AGENTRT_TASK_QUEUE": harness.task_queue + "-proc",
        "AGENTRT_DATABASE_URL": harness.config.database_url or "",
        **(env or {}),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "agentrt.cli", "worker", *args],
        cwd=cwd,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def kill_hard(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's whole process group, as a crash would, and reap it."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def data_fields(node: Any) -> Iterator[bytes]:
    """The base64-decoded ``data`` of every payload in a history's proto3 JSON."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "data" and isinstance(value, str):
                try:
                    yield base64.b64decode(value, validate=True)
                except ValueError:
                    pass
            else:
                yield from data_fields(value)
    elif isinstance(node, list):
        for item in node:
            yield from data_fields(item)


def shell_round_script(tmp_path: Path, commands: list[str]) -> str:
    """A model script (``write_script``) whose first reply runs each of ``commands`` with
    ``shell.run``, all in one round, and whose second answers "done": a hostile model's attacks."""
    return write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": c}} for c in commands]},
        {"text": "done"},
    ])


async def scheduled_activity_counts(harness: "Harness", session_id: str) -> Counter[str]:
    """How many activities of each type the session's current run scheduled (its history's
    ``ActivityTaskScheduled`` events, by activity type)."""
    history = await harness.handle(session_id).fetch_history()
    return Counter(
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )
