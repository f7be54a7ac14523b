"""The gateway's autonomous-task routes (``/v1/tasks``, scope ``tasks``) and task-graph routes, the
runs API (``/v1/runs``, and ``/apps/{app}/runs`` where the app names the profile; scope ``runs``),
each as the token's principal. A decision on a task or graph is bounded as a session update is
(``Gateway.in_time``): 503 at once while no worker polls, 503 when none takes it in time, and a
decision answered 503 is never applied later (its ``expires_at`` has passed when a worker takes it)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request

from agentrt.gateway._auth import Caller, caller_for, gateway_of, idempotency_key, path_id
from agentrt.gateway._errors import Problem
from agentrt.gateway._models import (
    ID_PATTERN,
    MAX_NEW_ID_CHARS,
    RUN_STATUS,
    ControlRequest,
    RunCreate,
    RunCreated,
    RunList,
    RunSummary,
    RunView,
    TaskCreate,
    TaskCreated,
    TaskList,
    TaskSummary,
)
from agentrt.schemas import (
    MAX_NODE_ID_CHARS,
    ApprovalPolicy,
    EventsPage,
    GraphSnapshot,
    TaskNotFound,
    TaskStatusView,
    graph_workflow_id,
    task_workflow_id,
)

__all__ = ["graph_routes", "task_routes"]

TasksCaller = Annotated[Caller, Depends(caller_for("tasks"))]
RunsCaller = Annotated[Caller, Depends(caller_for("runs"))]
Key = Annotated[dict[str, str], Depends(idempotency_key)]
ItemId = Annotated[str, Path(description="An id (letters, digits, `_`, `.`, `-`).")]
NodeId = Annotated[str, Path(description="A node's id in its graph.", max_length=MAX_NODE_ID_CHARS, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


# ---------------------------------------------------------------- tasks


def task_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/tasks", tags=["tasks"])

    async def visible(request: Request, caller: Caller, task_id: str) -> None:
        path_id(task_id, "task")
        await gateway_of(request).ensure_visible(caller, task_workflow_id(task_id), TaskNotFound(task_id))

    @router.get("", response_model=TaskList, summary="List the caller's tasks")
    async def list_tasks(
        caller: TasksCaller, limit: Annotated[int, Query(ge=1, le=500)] = 50, status: str | None = Query(None, max_length=40)
    ) -> TaskList:
        rows = await caller.client.list_tasks(status, limit)
        return TaskList(tasks=[TaskSummary(task_id=r.task_id, status=r.status, started_at=r.started_at, closed=r.closed) for r in rows])

    @router.post("", status_code=201, response_model=TaskCreated, summary="Start an autonomous task")
    async def create_task(request: Request, body: TaskCreate, caller: TasksCaller, key: Key) -> TaskCreated:
        gateway = gateway_of(request)
        caller.check_sandbox(body.sandbox, body.network)
        workspace = await gateway.workspace_for(caller, body.workspace)
        script = await gateway.script_for(caller, body.script) if body.script else None
        if body.profile is not None or script is None:
            gateway.check_profile(body.profile or caller.client.default_profile)
        gateway.check_profile(body.reviewer_profile, "reviewer_profile")
        task_id = await caller.client.start_task(
            body.goal, workspace=workspace, task_id=body.task_id, criteria=body.criteria,
            accept_command=body.accept_command, accept_review=body.accept_review, every_seconds=body.every_seconds,
            cron=body.cron, trigger_command=body.trigger_command, max_sessions=body.max_sessions,
            max_rounds_per_session=body.max_rounds_per_session, budget=body.budget, profile=body.profile, script=script,
            tools=body.tools, sandbox=body.sandbox, network=body.network, reviewer_profile=body.reviewer_profile,
            approval=ApprovalPolicy(mode=body.approval_mode), title=body.title, agent=body.agent, **key,
        )
        await gateway.watch("task", task_id, caller.principal)
        return TaskCreated(task_id=task_id, workflow_id=task_workflow_id(task_id))

    @router.get("/{task_id}", response_model=TaskStatusView, summary="Read a task's status")
    async def get_task(request: Request, task_id: ItemId, caller: TasksCaller) -> Any:
        await visible(request, caller, task_id)
        return await caller.client.task_status(task_id)

    @router.get("/{task_id}/events", response_model=EventsPage, summary="Read a task's events")
    async def get_task_events(
        request: Request, task_id: ItemId, caller: TasksCaller,
        since_seq: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
    ) -> Any:
        await visible(request, caller, task_id)
        return await caller.client.task_events(task_id, since_seq, limit)

    for action, summary in (("cancel", "Cancel a task"), ("pause", "Pause a task"), ("resume", "Resume a paused task")):
        router.add_api_route(
            f"/{{task_id}}/{action}", _task_control(action, visible), methods=["POST"], response_model=TaskStatusView,
            summary=summary, name=f"{action}_task",
        )
    return router


def _task_control(action: str, visible: Any) -> Any:
    async def control(request: Request, task_id: ItemId, caller: TasksCaller, body: ControlRequest | None = None) -> Any:
        await visible(request, caller, task_id)
        method = {"cancel": caller.client.cancel_task, "pause": caller.client.pause_task, "resume": caller.client.resume_task}[action]
        return await gateway_of(request).in_time(method(task_id, (body or ControlRequest()).reason))

    return control


# ---------------------------------------------------------------- task graphs (the runs API)


def app_name(
    app: Annotated[str, Path(max_length=MAX_NEW_ID_CHARS, pattern=ID_PATTERN, description="The app: a profile name.")],
) -> str:
    return app


def graph_routes(prefix: str, tag: str = "graphs") -> APIRouter:
    """The task-graph routes under ``prefix``: ``/v1/graphs``; the same under ``/v1/runs`` (an alias
    kept for callers of the runs API, tag ``runs``), or ``/apps/{app}/graphs`` and its alias
    ``/apps/{app}/runs`` (the app is the profile of the graphs it creates). The bodies are the runs
    API's (``RunCreate``, ``RunView``), where a graph's id is both ``graph_id`` and ``run_id``; the
    scope is ``runs`` on every prefix."""
    scoped = "{app}" in prefix
    router = APIRouter(prefix=prefix, tags=[tag], dependencies=[Depends(app_name)] if scoped else [])

    @router.get("", response_model=RunList, summary="List the caller's task graphs")
    async def list_runs(caller: RunsCaller, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> RunList:
        rows = await caller.client.list_graphs(None, limit)
        return RunList(runs=[
            RunSummary(graph_id=r.graph_id, run_id=r.graph_id, status=RUN_STATUS.get(r.status, "failed"), graph_status=r.status, started_at=r.started_at, closed=r.closed)
            for r in rows
        ])

    @router.post("", status_code=201, response_model=RunCreated, summary="Start a task graph")
    async def create_run(request: Request, body: RunCreate, caller: RunsCaller, key: Key) -> RunCreated:
        gateway = gateway_of(request)
        app = request.path_params.get("app")
        if app is not None and body.profile is not None and body.profile != app:
            raise Problem(422, "invalid-request", f"the app {app!r} is the profile of its runs; the body names {body.profile[:200]!r}")
        profile = app or body.profile
        caller.check_sandbox(body.sandbox, body.network)
        workspace = await gateway.workspace_for(caller, body.workspace)
        script = await gateway.script_for(caller, body.script) if body.script else None
        graph = body.graph
        if graph is not None:
            graph = graph.model_copy(update={"nodes": [
                n.model_copy(update={"script": await gateway.script_for(caller, n.script, f"node {n.id!r} script")}) if n.script else n
                for n in graph.nodes
            ]})
        if profile is not None or (script is None and graph is None):
            gateway.check_profile(profile or caller.client.default_profile)
        for name, value in (("planner_profile", body.planner_profile), ("reviewer_profile", body.reviewer_profile)):
            gateway.check_profile(value, name)
        run_id = await caller.client.start_graph(
            goal=body.goal, graph=graph, workspace=workspace, graph_id=body.graph_id or body.run_id, profile=profile, script=script,
            planner_profile=body.planner_profile, reviewer_profile=body.reviewer_profile, approve_plan=body.approve_plan,
            risk_level=body.risk_level, max_parallel=body.max_parallel, max_retries=body.max_retries,
            failure_policy=body.failure_policy, retry_window_seconds=body.retry_window_seconds, tools=body.tools, sandbox=body.sandbox, network=body.network,
            max_rounds_per_node=body.max_rounds_per_node, budget=body.budget, **key,
        )
        await gateway.watch("run", run_id, caller.principal)
        return RunCreated(graph_id=run_id, run_id=run_id, workflow_id=graph_workflow_id(run_id), status="planning")

    @router.get("/{run_id}", response_model=RunView, summary="Read a task graph: its status and nodes")
    async def get_run(run_id: ItemId, caller: RunsCaller) -> RunView:
        return run_view(await caller.client.graph_status(path_id(run_id, "run")))

    @router.get("/{run_id}/events", response_model=EventsPage, summary="Read a task graph's events")
    async def get_run_events(
        run_id: ItemId, caller: RunsCaller,
        since_seq: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
    ) -> Any:
        return await caller.client.graph_events(path_id(run_id, "run"), since_seq, limit)

    @router.post("/{run_id}/approve", response_model=RunView, summary="Approve a task graph's plan")
    async def approve_run(request: Request, run_id: ItemId, caller: RunsCaller, body: ControlRequest | None = None) -> RunView:
        return await _decided(request, caller.client.approve_graph(path_id(run_id, "run"), (body or ControlRequest()).reason))

    @router.post("/{run_id}/reject", response_model=RunView, summary="Reject a task graph's plan (the graph ends)")
    async def reject_run(request: Request, run_id: ItemId, caller: RunsCaller, body: ControlRequest | None = None) -> RunView:
        return await _decided(request, caller.client.reject_graph(path_id(run_id, "run"), (body or ControlRequest()).reason))

    @router.post("/{run_id}/cancel", response_model=RunView, summary="Cancel a task graph")
    async def cancel_run(request: Request, run_id: ItemId, caller: RunsCaller, body: ControlRequest | None = None) -> RunView:
        return await _decided(request, caller.client.cancel_graph(path_id(run_id, "run"), (body or ControlRequest()).reason))

    @router.post("/{run_id}/pause", response_model=RunView, summary="Pause a task graph: no node starts, its sessions pause")
    async def pause_run(request: Request, run_id: ItemId, caller: RunsCaller, body: ControlRequest | None = None) -> RunView:
        return await _decided(request, caller.client.graphs.pause(path_id(run_id, "run"), (body or ControlRequest()).reason))

    @router.post("/{run_id}/resume", response_model=RunView, summary="Resume a paused task graph")
    async def resume_run(request: Request, run_id: ItemId, caller: RunsCaller, body: ControlRequest | None = None) -> RunView:
        return await _decided(request, caller.client.graphs.resume(path_id(run_id, "run"), (body or ControlRequest()).reason))

    @router.post(
        "/{run_id}/nodes/{node_id}/retry", response_model=RunView,
        summary="Retry a node of a task graph that failed for good: it runs again, its blocked dependants wait for it",
    )
    async def retry_run_node(run_id: ItemId, node_id: NodeId, caller: RunsCaller, body: ControlRequest | None = None) -> RunView:
        return run_view(await caller.client.graphs.retry_node(path_id(run_id, "run"), node_id, (body or ControlRequest()).reason))

    return router


async def _decided(request: Request, decision: Awaitable[GraphSnapshot]) -> RunView:
    """A graph's answer to a decision (approve, reject, cancel, pause, resume) as the session routes
    wait for theirs (``Gateway.in_time``): 503 at once while no worker polls (nothing is sent), else
    503 when none takes it in time (the client's ``WorkerUnavailable``: it expired, never applied)."""
    return run_view(await gateway_of(request).in_time(decision))


def run_view(snapshot: GraphSnapshot) -> RunView:
    """A graph's snapshot in the runs API's words (``RunView``)."""
    return RunView(
        graph_id=snapshot.graph_id, run_id=snapshot.graph_id, status=RUN_STATUS[snapshot.status], graph_status=snapshot.status, owner=snapshot.owner,
        goal=snapshot.goal, approve_plan=snapshot.approve_plan, risk_level=snapshot.risk_level,
        risk_reasons=snapshot.risk_reasons, approved_by=snapshot.approved_by, nodes=snapshot.nodes,
        running_nodes=snapshot.running, spend=snapshot.spend, answer=snapshot.answer, failure=snapshot.failure,
        failure_reason=snapshot.failure_reason, started_at=snapshot.started_at, ended_at=snapshot.ended_at,
        paused=snapshot.paused, retry_until=snapshot.retry_until,
    )
