"""Decisions on task graphs and autonomous tasks while no worker takes them, end to end on the dev
server: the client answers ``WorkerUnavailable`` within its decision bound and the gateway 503, and
the decision is never applied when a worker comes back (its ``expires_at`` has passed, so the
worker refuses it): the graph or task goes on as it was, and the next decision is taken."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from agentrt.client import AgentClient, create_app
from agentrt.schemas import (
    AgentrtError,
    ApprovePlanInput,
    AutonomousTaskGoalAmended,
    AutonomousTaskPaused,
    GraphSnapshot,
    GraphSpec,
    TaskPlanApproved,
    TaskPlanRejected,
    WorkerUnavailable,
    graph_workflow_id,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, GatewayConfig, GatewayToken, token_sha256
from tests.conftest import OWNER, Harness
from tests.e2e._graphs import PASS, write_graph_script
from tests.e2e._tasks import write_task_script
from tests.gateway.test_gateway import assert_problem, serving

T = TypeVar("T")
TOKEN = "alice-decisions-token-0123456789"
# The decision bound of the clients that decide while no worker runs (seconds): short, so a test
# does not wait the default 50 s.
HASTY_SECONDS = 1.0


@pytest.fixture
def crew(temporal_client: Any, temporal_server: Any, store: Store, store_url: str) -> Harness:
    """A worker of its own queue that a test starts and stops (``async with crew.worker()``)."""
    config = AgentrtConfig(temporal_address=temporal_server.address, task_queue=f"tq-{uuid.uuid4().hex[:8]}", database_url=store_url)
    return Harness(temporal_client, config.task_queue, config, store, temporal_server)


def hasty(crew: Harness) -> AgentClient:
    return AgentClient(crew.temporal, task_queue=crew.task_queue, principal=OWNER, store=crew.store, decision_seconds=HASTY_SECONDS)


async def _until(read: Callable[[], Awaitable[T]], holds: Callable[[T], Any], timeout: float = 60) -> T:
    async def poll() -> T:
        while True:
            try:
                value = await read()
            except AgentrtError:  # not started yet, or its worker not polling yet
                await asyncio.sleep(0.1)
                continue
            if holds(value):
                return value
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), timeout)


async def pending_graph(crew: Harness, workspace: Path, tmp_path: Path) -> str:
    """A one-node graph waiting for its plan's approval (a worker must run while this does)."""
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "write the notes"}]})
    script = write_graph_script(tmp_path, {"a": [{"turns": [{"text": "the notes"}], "review": PASS}]})
    graph_id = await crew.client.start_graph(graph=spec, workspace=str(workspace), script=script)
    await _until(lambda: crew.client.graph_status(graph_id), lambda v: v.status == "pending_approval")
    return graph_id


async def test_a_plan_rejected_while_no_worker_runs_is_worker_unavailable_and_never_applied_when_one_comes_back(
    crew: Harness, workspace: Path, tmp_path: Path
) -> None:
    async with crew.worker():
        graph_id = await pending_graph(crew, workspace, tmp_path)

    with pytest.raises(WorkerUnavailable) as caught:
        await hasty(crew).graphs.reject(graph_id, "not this plan")

    assert f"graph {graph_id}: no worker" in str(caught.value)
    assert "no worker took update approve_plan within 1 s; it was not applied and never will be" in str(caught.value)
    async with crew.worker():
        approved = await crew.client.graphs.approve(graph_id, "the second look")  # behind the expired reject
        assert approved.approved_by == OWNER
        result = await asyncio.wait_for(crew.client.wait_graph(graph_id), 120)
        events = (await crew.client.graph_events(graph_id)).events  # a query: a worker answers it
    assert result.status == "completed"
    assert not [e for e in events if isinstance(e, TaskPlanRejected)]
    assert [e.reason for e in events if isinstance(e, TaskPlanApproved)] == ["the second look"]


async def test_a_decision_that_expired_before_a_worker_took_it_is_refused_and_changes_nothing(
    crew: Harness, workspace: Path, tmp_path: Path
) -> None:
    async with crew.worker():
        graph_id = await pending_graph(crew, workspace, tmp_path)
        handle = crew.temporal.get_workflow_handle(graph_workflow_id(graph_id))
        late = ApprovePlanInput(principal=OWNER, expires_at=datetime.now(timezone.utc) - timedelta(seconds=1))

        with pytest.raises(WorkflowUpdateFailedError) as refused:  # past the client, straight to Temporal
            await handle.execute_update("approve_plan", late, result_type=GraphSnapshot)

        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "RequestExpired"
        assert "this request expired at" in cause.message and "nothing was changed" in cause.message
        assert (await crew.client.graph_status(graph_id)).status == "pending_approval"
        await crew.client.graphs.cancel(graph_id, "done with it")


async def test_a_task_paused_while_no_worker_runs_is_worker_unavailable_and_goes_on_unpaused_when_one_comes_back(
    crew: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "first pass done"}]])
    async with crew.worker():
        task_id = await crew.client.start_task("keep the notes", workspace=str(workspace), script=script, every_seconds=3600)
        await _until(lambda: crew.client.task_status(task_id), lambda v: v.status == "waiting")

    with pytest.raises(WorkerUnavailable, match="it was not applied and never will be"):
        await hasty(crew).tasks.pause(task_id, "hold on")

    async with crew.worker():
        view = await crew.client.tasks.amend_goal(task_id, "keep the notes short")  # behind the expired pause
        assert view.status in ("waiting", "running") and view.goal == "keep the notes short"
        events = (await crew.client.task_events(task_id)).events
        assert not [e for e in events if isinstance(e, AutonomousTaskPaused)]
        assert [e.goal for e in events if isinstance(e, AutonomousTaskGoalAmended)] == ["keep the notes short"]
        await crew.client.tasks.cancel(task_id, "done with it")


@pytest.fixture
async def http(crew: Harness, workspace: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway over the crew's queue, deciding with the short bound."""
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(TOKEN), principal=OWNER, scopes=("runs", "tasks"))])
    async with serving(create_app(hasty(crew), config, workspace_root=workspace.parent)) as client:
        yield client


AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def test_a_run_approved_over_http_while_no_worker_runs_is_503_and_is_approved_only_by_the_next_request(
    crew: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    async with crew.worker():
        graph_id = await pending_graph(crew, workspace, tmp_path)

    refused = await http.post(f"/v1/runs/{graph_id}/approve", json={"reason": "first try"}, headers=AUTH)

    body = assert_problem(refused, 503)
    assert body["type"] == "urn:agentrt:problem:unavailable" and refused.headers["retry-after"] == "5"
    assert "no worker" in body["detail"]
    async with crew.worker():
        read = await _until(lambda: http.get(f"/v1/runs/{graph_id}", headers=AUTH), lambda r: r.status_code == 200)
        assert read.json()["status"] == "pending_approval" and read.json()["approved_by"] is None
        approved = await http.post(f"/v1/runs/{graph_id}/approve", json={"reason": "second try"}, headers=AUTH)
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] in ("running", "completed") and approved.json()["approved_by"] == OWNER
        await asyncio.wait_for(crew.client.wait_graph(graph_id), 120)
        events = (await crew.client.graph_events(graph_id)).events
    assert [e.reason for e in events if isinstance(e, TaskPlanApproved)] == ["second try"]
