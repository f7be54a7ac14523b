"""The activities a task graph calls besides its child sessions: the planner (``graph.plan``), the
reviewer of a node's answer (``graph.review``) and the store record of its events and row
(``graph.record``, ``frame-v1``). Workflow code only; used by ``TaskGraphWorkflow``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError

from agentrt.schemas import (
    Event,
    GraphConfig,
    GraphPlan,
    GraphPlanInput,
    GraphRecordInput,
    GraphState,
    NodeReviewInput,
    ReviewVerdict,
    SessionConfig,
    SessionParent,
    TaskBlocked,
    TaskCancelled,
    child_config,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _graph_parts as parts
from agentrt.workflows._errors import error_text
from agentrt.workflows._journal import Journal

# How soon a lost worker's planner or review call is retried elsewhere, and the bound on one attempt (seconds).
MODEL_HEARTBEAT_SECONDS = 10.0
MODEL_CALL_SECONDS = 600.0


def node_session(config: GraphConfig, state: GraphState, node_id: str, session_id: str, attempt: int, feedback: str, now: datetime) -> SessionConfig:
    """The child session of attempt ``attempt`` of ``node_id``: the node's grant (tools, sandbox,
    network), its prompt with the reviewer's ``feedback``, its share of the graph's budget at ``now``."""
    assert state.plan is not None and state.token is not None
    spec = state.plan.node(node_id)
    grant = state.token.grants[node_id]
    return child_config(
        config.template(),
        session_id=session_id,
        owner=config.owner,
        workspace=config.workspace,
        profile=spec.profile or config.profile,
        script=spec.script or config.script,
        tools=list(grant.tools),
        max_rounds_per_turn=config.max_rounds_per_node,
        sandbox=grant.sandbox,
        network=grant.network,
        interactive=False,
        title=f"graph {config.graph_id} · {node_id} · attempt {attempt}",
        prompt=parts.node_prompt(config, state, spec, attempt, feedback),
        ends_after_turn=True,
        parent=SessionParent(kind="graph", id=config.graph_id, number=attempt, node=node_id),
        **parts.node_budget(config, state, now),
        **({"agent": spec.agent} if spec.agent is not None else {}),
    )


def start_planner(config: GraphConfig, state: GraphState) -> workflow.ActivityHandle[GraphPlan]:
    """Start ``graph.plan``: the planner model's graph for the goal, or the given graph checked."""
    index = state.plans
    state.plans += 1
    nodes = len(config.graph.nodes) if config.graph else 0
    return workflow.start_activity(
        options.GRAPH_PLAN.name,
        GraphPlanInput(
            graph_id=config.graph_id, workspace=config.workspace, goal=config.goal, graph=config.graph,
            profile=config.planner_profile or config.profile, script=config.script, granted=config.tools,
            max_parallel=config.max_parallel or (config.graph.max_parallel if config.graph else 3), plan_index=index,
        ),
        result_type=GraphPlan,
        task_queue=config.model_task_queue,
        **options.GRAPH_PLAN.options(
            summary="plan the goal" if config.goal else f"check the graph of {nodes} nodes",
            start_to_close=MODEL_CALL_SECONDS, heartbeat_timeout=MODEL_HEARTBEAT_SECONDS,
        ),
    )


async def ask_reviewer(config: GraphConfig, state: GraphState, node_id: str, session_id: str, attempt: int, answer: str) -> ReviewVerdict:
    """The reviewer's verdict on node ``node_id``'s ``answer``; a review that cannot run passes
    (fail-open) with its error."""
    assert state.plan is not None
    spec = state.plan.node(node_id)
    try:
        return await workflow.execute_activity(
            options.GRAPH_REVIEW.name,
            NodeReviewInput(
                graph_id=config.graph_id, node_id=node_id, attempt=attempt, session_id=session_id,
                profile=config.reviewer_profile or spec.profile or config.profile,
                script=spec.script or config.script, prompt=spec.prompt, acceptance=spec.acceptance, answer=answer,
            ),
            result_type=ReviewVerdict,
            task_queue=config.model_task_queue,
            **options.GRAPH_REVIEW.options(
                summary=f"review {node_id} · attempt {attempt}", start_to_close=MODEL_CALL_SECONDS,
                heartbeat_timeout=MODEL_HEARTBEAT_SECONDS,
            ),
        )
    except ActivityError as err:
        return ReviewVerdict(passed=True, error=f"the review could not run: {error_text(err)}")


def after_failure(config: GraphConfig, state: GraphState, node_id: str, emit: Callable[[Event], None], *, halting: bool) -> bool:
    """After ``node_id`` failed for good: its pending dependants are blocked (unless
    ``allow_orphans``); under ``fail_fast`` (the graph not ``halting`` yet) every pending node is
    cancelled and True says the graph halts now (its running children are to be cancelled)."""
    policy = config.failure_policy
    assert state.plan is not None
    if policy == "allow_orphans":
        return False
    for dependant in parts.dependants(state.plan, node_id):
        node = state.nodes[dependant]
        if node.status == "pending":
            node.status = "blocked"
            node.blocked_by = node_id
            emit(TaskBlocked(node_id=dependant, blocked_by=node_id))
    if policy != "fail_fast" or halting:
        return False
    for other in state.order:
        node = state.nodes[other]
        if node.status == "pending":
            node.status = "cancelled"
            emit(TaskCancelled(node_id=other, principal="agentrt", reason=f"fail_fast: node {node_id} failed"))
    return True


def cancel_open_nodes(state: GraphState, now: datetime) -> None:
    """Every node not ended yet (pending, running, in review or waiting for its retry) ends cancelled at ``now``."""
    for node in state.nodes.values():
        if node.status in ("pending", "delegated", "reviewing", "retrying"):
            node.status = "cancelled"
            node.ended_at = now


class GraphRecord:
    """Writes a graph's staged events and its row to the store (``graph.record``) whenever there
    are some, one write at a time, from ``start`` until ``close`` has written the last of them."""

    def __init__(self, config: GraphConfig, state: GraphState, journal: Journal) -> None:
        self._config = config
        self._state = state
        self._journal = journal
        self._closing = False
        self._writer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write_while_open())

    async def close(self) -> None:
        """Write what is staged and stop (nothing when never started). Raises what a write raised."""
        if self._writer is not None:
            self._closing = True
            await self._writer

    async def _write_while_open(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self._state.unflushed_events) or self._closing)
            if not self._state.unflushed_events:
                return
            events = self._journal.take()
            config, now = self._config, workflow.now()
            record = GraphRecordInput(
                graph_id=config.graph_id, owner=config.owner, goal=parts.goal_text(config), status=parts.shown_status(self._state),
                workspace=config.workspace, spend=parts.snapshot(config, self._state, now).spend, events=events,
            )
            await options.GRAPH_RECORD.execute(record, local=False, summary=f"store {len(events)} graph events")
            self._journal.written(events)
