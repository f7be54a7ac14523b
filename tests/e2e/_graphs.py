"""Helpers for the task graph tests: scripts with a section per node, a starter that starts graphs
as ``AgentClient.start_graph`` does, and reads of a graph's snapshot, events and child sessions."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    TASK_GRAPH_WORKFLOW,
    AgentTaskStarted,
    Event,
    EventsPage,
    EventsQuery,
    GraphConfig,
    GraphSnapshot,
    TaskGraphInput,
    TaskGraphResult,
    graph_workflow_id,
    session_workflow_id,
)

OWNER = "alice"
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=4)
PASS = {"verdict": "pass", "summary": "meets the acceptance"}


def fail(*findings: str) -> dict[str, Any]:
    return {"verdict": "fail", "findings": list(findings), "summary": "not yet"}


def answer(text: str, delay: float = 0.0) -> dict[str, Any]:
    return {"text": text, "delay_seconds": delay}


def write_graph_script(
    directory: Path, nodes: dict[str, list[dict[str, Any]]], plan: list[dict[str, Any]] | None = None
) -> str:
    """A scripted-model file: ``nodes[id]`` lists one ``{"turns": [...], "review": {...}}`` per attempt."""
    path = directory / f"graph-{uuid.uuid4().hex[:6]}.json"
    body: dict[str, Any] = {"nodes": nodes}
    if plan is not None:
        body["plan"] = plan
    path.write_text(json.dumps(body))
    return str(path)


@dataclass
class GraphRig:
    temporal: Client
    task_queue: str
    started: list[str] = field(default_factory=list)

    def config(self, workspace: Path, script: str, **fields: Any) -> GraphConfig:
        fields.setdefault("graph_id", f"g{uuid.uuid4().hex[:10]}")
        return GraphConfig(owner=OWNER, workspace=str(workspace), profile="scripted", script=script, **fields)

    async def start(self, config: GraphConfig) -> str:
        self.started.append(config.graph_id)
        await self.temporal.start_workflow(
            TASK_GRAPH_WORKFLOW,
            TaskGraphInput(config=config),
            id=graph_workflow_id(config.graph_id),
            task_queue=self.task_queue,
            task_timeout=WORKFLOW_TASK_TIMEOUT,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(SESSION_OWNER, config.owner), SearchAttributePair(SESSION_STATUS, "planning")]
            ),
        )
        return config.graph_id

    def handle(self, graph_id: str) -> WorkflowHandle:
        return self.temporal.get_workflow_handle(graph_workflow_id(graph_id), result_type=TaskGraphResult)

    async def snapshot(self, graph_id: str) -> GraphSnapshot:
        return await self._query(graph_id, "snapshot", None, GraphSnapshot)

    async def events(self, graph_id: str) -> list[Event]:
        page = await self._query(graph_id, "events", EventsQuery(since_seq=0, limit=10_000), EventsPage)
        return page.events

    async def _query(self, graph_id: str, name: str, argument: Any, result_type: type[Any], timeout: float = 30.0) -> Any:
        """A query, asked again while no worker polls yet (a worker process still starting)."""
        args = [] if argument is None else [argument]
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                return await self.handle(graph_id).query(name, *args, result_type=result_type)
            except RPCError as err:
                if "no poller" not in str(err) or asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def wait(self, graph_id: str, timeout: float = 120.0) -> TaskGraphResult:
        return await asyncio.wait_for(self.handle(graph_id).result(), timeout)

    async def wait_until(self, graph_id: str, predicate: Callable[[GraphSnapshot], bool], timeout: float = 60.0) -> GraphSnapshot:
        async def poll() -> GraphSnapshot:
            while True:
                view = await self.snapshot(graph_id)
                if predicate(view):
                    return view
                await asyncio.sleep(0.1)

        return await asyncio.wait_for(poll(), timeout)

    async def approve(self, graph_id: str, principal: str = OWNER, **fields: Any) -> GraphSnapshot:
        from agentrt.schemas import ApprovePlanInput

        return await self.handle(graph_id).execute_update(
            "approve_plan", ApprovePlanInput(principal=principal, **fields), result_type=GraphSnapshot
        )

    async def session_ids(self, graph_id: str) -> list[str]:
        return [e.session_id for e in await self.events(graph_id) if isinstance(e, AgentTaskStarted)]

    async def workflow_handles(self) -> list[WorkflowHandle]:
        handles = []
        for graph_id in dict.fromkeys(self.started):
            handles.append(self.handle(graph_id))
            handles += [self.temporal.get_workflow_handle(session_workflow_id(s)) for s in await self.session_ids(graph_id)]
        return handles


def most_running(events: list[Event]) -> int:
    """The most nodes running at once, replayed from the events (a node runs from its first
    ``AgentTaskStarted`` until ``AgentTaskCompleted``, a final ``AgentTaskFailed`` or ``TaskCancelled``)."""
    running: set[str] = set()
    most = 0
    for event in events:
        if event.type == "AgentTaskStarted":
            running.add(event.node_id)  # type: ignore[attr-defined]
        elif event.type == "AgentTaskCompleted" or (event.type == "AgentTaskFailed" and event.final):  # type: ignore[attr-defined]
            running.discard(event.node_id)  # type: ignore[attr-defined]
        elif event.type == "TaskCancelled" and event.node_id:  # type: ignore[attr-defined]
            running.discard(event.node_id)  # type: ignore[attr-defined]
        most = max(most, len(running))
    return most
