"""TaskGraphWorkflow: a goal planned into a DAG of agent tasks, approved once, run as child
sessions in dependency order, each result judged by a reviewer.

One workflow per graph (id ``graph-<graph_id>``):

    plan (activity ``graph.plan``: the planner model, or a given graph checked) -> TaskDecomposed
    -> approval (update ``approve_plan``; automatic for ``approve_plan="auto"`` below high risk)
       mints the capability token: every node's grants, frozen for the run
    -> ready nodes run as child SessionWorkflows, at most ``max_parallel`` at once
    -> the reviewer (activity ``graph.review``, fail-open) passes or fails each answer; a fail
       reruns the node with the findings, up to ``max_retries``
    -> a node that fails for good blocks its dependants (``failure_policy``)

``cancel`` (update, or Temporal's cancel) cancels every running child and waits for it; queries
``snapshot`` (the graph with each node's status) and ``events``. A graph's history is bounded
by its nodes and retries (``MAX_GRAPH_NODES``, ``MAX_NODE_RETRIES``), so it does not continue as new.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    SESSION_WORKFLOW,
    TASK_GRAPH_WORKFLOW,
    TERMINAL_GRAPH_STATUSES,
    AgentTaskCompleted,
    AgentTaskFailed,
    AgentTaskStarted,
    ApprovePlanInput,
    Event,
    EventsPage,
    EventsQuery,
    GraphConfig,
    GraphControlInput,
    GraphPlan,
    GraphPlanInput,
    GraphSnapshot,
    GraphState,
    GraphStatus,
    InvalidGraph,
    NodeReviewInput,
    NodeState,
    ReviewVerdict,
    SessionConfig,
    SessionInput,
    SessionParent,
    SessionResult,
    Spend,
    TaskBlocked,
    TaskCancelled,
    TaskDecomposed,
    TaskGraphCompleted,
    TaskGraphCreated,
    TaskGraphFailed,
    TaskGraphInput,
    TaskGraphResult,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    TaskReviewed,
    graph_node_session_id,
    graph_workflow_id,
    session_workflow_id,
    validate_graph,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _console as console
from agentrt.workflows import _graph_parts as parts
from agentrt.workflows._approvals import standing_refusal
from agentrt.workflows._errors import error_text, error_type, rejected

__all__ = ["TaskGraphWorkflow"]

# A child session's workflow task timeout, as client-started sessions have (client/_starts.py).
SESSION_TASK_TIMEOUT = timedelta(seconds=4)
# How soon a lost worker's planner or review call is retried elsewhere, and the bound on one attempt (seconds).
MODEL_HEARTBEAT_SECONDS = 10.0
MODEL_CALL_SECONDS = 600.0
PLAN_ERRORS = ("InvalidGraph", "NodeCannotDecompose")


# Not sandboxed, as SessionWorkflow is not (see workflows/session.py): this module imports only
# temporalio, agentrt.schemas and pure workflow parts (tests/workflows/test_determinism.py).
@workflow.defn(name=TASK_GRAPH_WORKFLOW, sandboxed=False)
class TaskGraphWorkflow:
    @workflow.init
    def __init__(self, input: TaskGraphInput) -> None:
        self._config: GraphConfig = input.config
        self._state = GraphState()
        self._journal = parts.GraphJournal(self._state)
        self._children: dict[str, workflow.ChildWorkflowHandle] = {}
        self._cancel: GraphControlInput | None = None
        self._halting = False  # fail_fast after a node failed for good: start nothing more
        self._status_written: GraphStatus | None = None
        # console-v1: every search attribute of the graph kept current (_set_status), child sessions
        # started with their kind and profile. Asked here, in the run's first workflow task.
        self._console = workflow.patched(console.CONSOLE_PATCH)

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: TaskGraphInput) -> TaskGraphResult:
        config = self._config
        expected = graph_workflow_id(config.graph_id)
        if workflow.info().workflow_id != expected:
            raise ApplicationError(
                f"workflow {workflow.info().workflow_id!r} cannot run graph {config.graph_id!r}: a graph runs as workflow {expected!r}",
                type="GraphIdMismatch",
                non_retryable=True,
            )
        self._state.started_at = workflow.now()
        self._emit(TaskGraphCreated(graph_id=config.graph_id, owner=config.owner, goal=config.goal, approve_plan=config.approve_plan))
        try:
            await self._run_graph()
        except asyncio.CancelledError:
            # Temporal's own cancel: cancel the children, record it, end Canceled.
            self._cancel = self._cancel or GraphControlInput(principal="temporal", reason="workflow cancelled")
            await self._end_cancelled(self._cancel)
            raise
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result()

    async def _run_graph(self) -> None:
        self._set_status("planning")
        if not await self._plan():
            return
        if self._state.status != "completed":
            await self._approve()
        if self._cancel is not None:
            await self._end_cancelled(self._cancel)
            return
        if self._state.status in TERMINAL_GRAPH_STATUSES:
            return
        self._set_status("executing")
        await self._execute()
        if self._cancel is not None:
            await self._end_cancelled(self._cancel)
            return
        self._finish()

    # ---------------------------------------------------------------- plan and approval

    async def _plan(self) -> bool:
        """Ask ``graph.plan``; False when the graph ended (failed, cancelled) instead."""
        config = self._config
        index = self._state.plans
        self._state.plans += 1
        handle = workflow.start_activity(
            options.GRAPH_PLAN.name,
            GraphPlanInput(
                graph_id=config.graph_id, workspace=config.workspace, goal=config.goal, graph=config.graph,
                profile=config.planner_profile or config.profile, script=config.script, granted=config.tools,
                max_parallel=config.max_parallel or (config.graph.max_parallel if config.graph else 3), plan_index=index,
            ),
            result_type=GraphPlan,
            **options.GRAPH_PLAN.options(
                summary="plan the goal" if config.goal else f"check the graph of {len(config.graph.nodes) if config.graph else 0} nodes",
                start_to_close=MODEL_CALL_SECONDS, heartbeat_timeout=MODEL_HEARTBEAT_SECONDS,
            ),
        )
        await workflow.wait_condition(lambda: handle.done() or self._cancel is not None)
        if not handle.done():
            handle.cancel()
        try:
            plan = await handle
        except (ActivityError, asyncio.CancelledError) as err:
            if self._cancel is not None:
                await self._end_cancelled(self._cancel)
                return False
            kind = error_type(err)
            self._fail("invalid_plan" if kind in PLAN_ERRORS else "planner_failed", error_text(err))
            return False
        if self._cancel is not None:
            await self._end_cancelled(self._cancel)
            return False
        parts.add_spend(self._state, Spend(usage=plan.usage, cost_usd=plan.cost_usd))
        source = "planner" if config.goal else "graph"
        if plan.graph is None:
            answer = plan.direct_answer or ""
            self._emit(TaskDecomposed(source=source, direct_answer=answer, usage=plan.usage))
            self._state.answer = answer
            self._complete()
            return True
        if config.goal is not None:
            # A planner (a model) chooses neither a node's model nor a file on the worker: the graph's apply.
            plan.graph = parts.without_model_choices(plan.graph)
        try:
            self._state.order = validate_graph(plan.graph, granted=parts.graph_tools(config, plan.tools), source="plan")
        except InvalidGraph as err:  # the activity checked it; a worker of another version may not have
            self._fail("invalid_plan", f"{type(err).__name__}: {err}")
            return False
        self._state.plan = plan.graph
        self._state.tools = dict(plan.tools)
        self._state.nodes = {node_id: NodeState(id=node_id) for node_id in self._state.order}
        self._state.risk_level, self._state.risk_reasons = parts.assess_risk(config, plan.graph, self._state.tools)
        self._emit(
            TaskDecomposed(
                source=source, nodes=list(plan.graph.nodes), max_parallel=parts.max_parallel(config, self._state),
                risk_level=self._state.risk_level, risk_reasons=list(self._state.risk_reasons), usage=plan.usage,
            )
        )
        return True

    async def _approve(self) -> None:
        """Approve automatically when allowed, else wait for ``approve_plan`` (or a cancel)."""
        if self._config.approve_plan == "auto" and self._state.risk_level != "high":
            self._mint("agentrt", None, automatic=True)
            return
        self._set_status("pending_approval")
        await workflow.wait_condition(lambda: self._state.status != "pending_approval" or self._cancel is not None)

    def _mint(self, principal: str, reason: str | None, *, automatic: bool) -> None:
        token = parts.mint_token(
            self._config, self._state, token_id=str(workflow.uuid4()), principal=principal, now=workflow.now(), automatic=automatic
        )
        self._state.token = token
        self._set_status("approved")
        self._emit(TaskPlanApproved(principal=principal, reason=reason, token=token))

    # ---------------------------------------------------------------- execution

    async def _execute(self) -> None:
        """Run ready nodes, at most ``max_parallel`` at once, until none is ready or running."""
        limit = parts.max_parallel(self._config, self._state)
        tasks: dict[str, asyncio.Task[None]] = {}
        while True:
            if self._cancel is None and not self._halting:
                for node_id in parts.ready_nodes(self._config, self._state):
                    if len(tasks) >= limit:
                        break
                    self._state.nodes[node_id].status = "delegated"  # taken: not ready again
                    tasks[node_id] = asyncio.create_task(self._run_node(node_id))
            if not tasks:
                return
            await workflow.wait_condition(lambda: any(t.done() for t in tasks.values()) or self._cancel is not None)
            if self._cancel is not None:
                self._cancel_children()
                for node_id, task in tasks.items():
                    if self._state.nodes[node_id].status == "reviewing":
                        task.cancel()  # cancels its review call; the node ends cancelled
                await asyncio.gather(*tasks.values(), return_exceptions=True)
                return
            for node_id in [n for n, t in tasks.items() if t.done()]:
                tasks.pop(node_id).result()
                if self._state.nodes[node_id].status == "failed":
                    self._after_failure(node_id)

    def _after_failure(self, node_id: str) -> None:
        policy = self._config.failure_policy
        assert self._state.plan is not None
        if policy == "allow_orphans":
            return
        for dependant in parts.dependants(self._state.plan, node_id):
            node = self._state.nodes[dependant]
            if node.status == "pending":
                node.status = "blocked"
                node.blocked_by = node_id
                self._emit(TaskBlocked(node_id=dependant, blocked_by=node_id))
        if policy == "fail_fast" and not self._halting:
            self._halting = True
            self._cancel_children()
            for other in self._state.order:
                node = self._state.nodes[other]
                if node.status == "pending":
                    node.status = "cancelled"
                    self._emit(TaskCancelled(node_id=other, principal="agentrt", reason=f"fail_fast: node {node_id} failed"))

    async def _run_node(self, node_id: str) -> None:
        """Attempts of one node until the reviewer passes it, it fails for good, or it is cancelled."""
        assert self._state.plan is not None and self._state.token is not None
        spec = self._state.plan.node(node_id)
        node = self._state.nodes[node_id]
        node.started_at = workflow.now()
        feedback = ""
        while True:
            node.attempts += 1
            attempt = node.attempts
            node.status = "delegated"
            node.error = None
            session_id = graph_node_session_id(self._config.graph_id, node_id, attempt, workflow.uuid4().hex[:8])
            node.session_ids.append(session_id)
            grant = self._state.token.grants[node_id]
            self._emit(AgentTaskStarted(node_id=node_id, attempt=attempt, session_id=session_id, role=spec.role, tools=list(grant.tools)))
            self._set_status("executing")
            result, error, cancelled = await self._run_session(node_id, session_id, attempt, feedback)
            spend = (result.spend or Spend(usage=result.usage)) if result is not None else Spend()
            parts.add_spend(self._state, spend, node_id)
            if cancelled or self._cancel is not None or self._halting:
                self._node_cancelled(node_id)
                return
            outcome = result.outcome if result is not None else None
            answer = (outcome.answer or "") if outcome is not None else ""
            if outcome is not None and outcome.status == "completed" and answer.strip():
                verdict = await self._review(node_id, session_id, attempt, answer)
                if self._cancel is not None or self._halting:
                    self._node_cancelled(node_id)
                    return
                node.answer = parts.cut(answer)
                if verdict.passed:
                    node.status = "completed"
                    node.findings = []
                    node.ended_at = workflow.now()
                    self._emit(AgentTaskCompleted(node_id=node_id, attempt=attempt, session_id=session_id, answer=node.answer, spend=node.spend))
                    return
                node.findings = list(verdict.findings)
                feedback = "; ".join([verdict.summary, *verdict.findings]).strip("; ") or "the reviewer failed the answer"
                error = f"the reviewer failed it: {feedback}"
            else:
                status = outcome.status if outcome is not None else "failed"
                if outcome is not None and outcome.error:
                    error = outcome.error
                error = f"session {status}" + (f": {error}" if error else "") if status != "completed" else "the session gave no final answer"
                feedback = error
            final = attempt > self._config.max_retries
            self._emit(AgentTaskFailed(node_id=node_id, attempt=attempt, session_id=session_id, error=parts.cut(error or "", 2_000), final=final, spend=spend))
            if final:
                node.status = "failed"
                node.error = parts.cut(error or "", 2_000)
                node.ended_at = workflow.now()
                return
            node.status = "retrying"
            self._emit(TaskRetried(node_id=node_id, attempt=attempt + 1, feedback=parts.cut(feedback, parts.FEEDBACK_CHARS)))

    async def _run_session(self, node_id: str, session_id: str, attempt: int, feedback: str) -> tuple[SessionResult | None, str | None, bool]:
        """Start attempt ``attempt`` of ``node_id`` as a child session and wait for it: (result, error, cancelled)."""
        assert self._state.plan is not None and self._state.token is not None
        config = self._config
        spec = self._state.plan.node(node_id)
        grant = self._state.token.grants[node_id]
        session_config = SessionConfig(
            session_id=session_id,
            owner=config.owner,
            workspace=config.workspace,
            profile=spec.profile or config.profile,
            script=spec.script or config.script,
            tools=list(grant.tools),
            approval=config.approval,
            max_rounds_per_turn=config.max_rounds_per_node,
            sandbox=grant.sandbox,
            network=grant.network,
            interactive=False,
            operators=list(config.operators),
            tool_task_queue=config.tool_task_queue,
            title=f"graph {config.graph_id} · {node_id} · attempt {attempt}",
            prompt=parts.node_prompt(config, self._state, spec, attempt, feedback),
            ends_after_turn=True,
            parent=SessionParent(kind="graph", id=config.graph_id, number=attempt, node=node_id),
        )
        try:
            handle = await workflow.start_child_workflow(
                SESSION_WORKFLOW,
                SessionInput(config=session_config),
                id=session_workflow_id(session_id),
                result_type=SessionResult,
                task_timeout=SESSION_TASK_TIMEOUT,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                static_summary=f"graph {config.graph_id} · node {node_id} · attempt {attempt}",
                static_details=f"{spec.role}: {parts.cut(spec.prompt, 300)}",
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(SESSION_OWNER, config.owner), SearchAttributePair(SESSION_STATUS, "idle")]
                    + (console.child_session_attributes(session_config.profile) if self._console else [])
                ),
            )
        except WorkflowAlreadyStartedError:
            return None, f"a workflow with session id {session_id} already exists", False
        self._children[node_id] = handle
        if self._cancel is not None or self._halting:
            handle.cancel()  # a cancel came while the child was starting: its sweep did not see it
        try:
            return await handle, None, False
        except ChildWorkflowError as err:
            return None, error_text(err), isinstance(err.cause, CancelledError)
        except asyncio.CancelledError:
            return None, "cancelled", True
        finally:
            self._children.pop(node_id, None)

    async def _review(self, node_id: str, session_id: str, attempt: int, answer: str) -> ReviewVerdict:
        """The reviewer's verdict on ``answer``; a review that cannot run passes (fail-open) with its error."""
        assert self._state.plan is not None
        spec = self._state.plan.node(node_id)
        node = self._state.nodes[node_id]
        node.status = "reviewing"
        self._set_status("executing")
        try:
            verdict = await workflow.execute_activity(
                options.GRAPH_REVIEW.name,
                NodeReviewInput(
                    graph_id=self._config.graph_id, node_id=node_id, attempt=attempt, session_id=session_id,
                    profile=self._config.reviewer_profile or spec.profile or self._config.profile,
                    script=spec.script or self._config.script, prompt=spec.prompt, acceptance=spec.acceptance, answer=answer,
                ),
                result_type=ReviewVerdict,
                **options.GRAPH_REVIEW.options(
                    summary=f"review {node_id} · attempt {attempt}", start_to_close=MODEL_CALL_SECONDS,
                    heartbeat_timeout=MODEL_HEARTBEAT_SECONDS,
                ),
            )
        except ActivityError as err:
            verdict = ReviewVerdict(passed=True, error=f"the review could not run: {error_text(err)}")
        parts.add_spend(self._state, Spend(usage=verdict.usage, cost_usd=verdict.cost_usd), node_id)
        self._emit(
            TaskReviewed(
                node_id=node_id, attempt=attempt, passed=verdict.passed, findings=list(verdict.findings),
                summary=verdict.summary, error=verdict.error,
            )
        )
        return verdict

    def _node_cancelled(self, node_id: str) -> None:
        node = self._state.nodes[node_id]
        node.status = "cancelled"
        node.ended_at = workflow.now()
        who = self._cancel.principal if self._cancel is not None else "agentrt"
        why = self._cancel.reason if self._cancel is not None else "fail_fast: another node failed"
        self._emit(TaskCancelled(node_id=node_id, principal=who, reason=why))

    def _cancel_children(self) -> None:
        for handle in list(self._children.values()):
            handle.cancel()

    # ---------------------------------------------------------------- ending

    def _finish(self) -> None:
        failed = [n for n in self._state.order if self._state.nodes[n].status != "completed"]
        if not failed:
            self._state.answer = parts.final_answer(self._state)
            self._complete()
            return
        first = next((n for n in self._state.order if self._state.nodes[n].status == "failed"), failed[0])
        details = ", ".join(f"{n} {self._state.nodes[n].status}" for n in failed[:10])
        self._state.answer = parts.final_answer(self._state) or None
        self._fail("node_failed", f"node {first} failed: {self._state.nodes[first].error or 'see its events'} ({details})")

    def _complete(self) -> None:
        self._state.ended_at = workflow.now()
        self._set_status("completed")
        self._emit(TaskGraphCompleted(answer=parts.cut(self._state.answer or ""), spend=self._snapshot().spend))

    def _fail(self, reason: str, error: str) -> None:
        self._state.failure_reason = reason
        self._state.failure = parts.cut(error, 4_000)
        self._state.ended_at = workflow.now()
        self._set_status("failed")
        self._emit(TaskGraphFailed(reason=reason, error=self._state.failure, spend=self._snapshot().spend))

    async def _end_cancelled(self, request: GraphControlInput) -> None:
        """Cancel every running child session (waiting for each to end) and record the cancel."""
        handles = list(self._children.values())
        for handle in handles:
            handle.cancel()
        for handle in handles:
            try:
                await handle
            except (ChildWorkflowError, asyncio.CancelledError):
                pass
        if self._state.status == "cancelled":
            return
        for node_id in self._state.order:
            node = self._state.nodes[node_id]
            if node.status in ("pending", "delegated", "reviewing", "retrying"):
                node.status = "cancelled"
                node.ended_at = workflow.now()
        self._state.ended_at = workflow.now()
        self._set_status("cancelled")
        self._emit(TaskCancelled(principal=request.principal, reason=request.reason))

    def _result(self) -> TaskGraphResult:
        return TaskGraphResult(
            graph_id=self._config.graph_id, status=self._state.status,
            nodes={n: self._state.nodes[n].status for n in self._state.order}, answer=self._state.answer,
            spend=self._snapshot().spend, failure=self._state.failure, failure_reason=self._state.failure_reason,
        )

    def _emit(self, event: Event) -> None:
        self._journal.emit(event, workflow.now())
        workflow.set_current_details(parts.current_details(self._config, self._state))

    def _set_status(self, status: GraphStatus) -> None:
        """Record ``status``, show the current details and write the search attributes that changed
        (``console-v1``: all of the graph's, its plan approval counted as one waiting; before it,
        ``AgentSessionStatus`` alone)."""
        self._state.status = status
        workflow.set_current_details(parts.current_details(self._config, self._state))
        if self._console:
            listing = console.Listing(
                kind="graph", owner=self._config.owner, status=status, profile=self._config.profile,
                pending_approvals=1 if status == "pending_approval" else 0,
                spend_usd=console.spend_or_none(self._state.spend.cost_usd),
            )
            updates = console.changed(listing, workflow.info().typed_search_attributes)
            if updates:
                workflow.upsert_search_attributes(updates)
        elif status != self._status_written:
            self._status_written = status
            workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])

    def _snapshot(self) -> GraphSnapshot:
        return parts.snapshot(self._config, self._state, workflow.now())

    # ---------------------------------------------------------------- updates

    def _check_principal(self, principal: str, reason: str | None, verb: str) -> None:
        refusal = standing_refusal(self._config.owner, self._config.operators, principal, reason, verb, f"graph {self._config.graph_id}")
        if refusal is not None:
            raise rejected(refusal)

    @workflow.update
    def approve_plan(self, input: ApprovePlanInput) -> GraphSnapshot:
        """Approve the plan (mint the capability token; the nodes run) or reject it (the graph ends
        ``rejected``). Atomic: of concurrent approvals one mints the token, the others fail."""
        if self._state.token is not None or self._state.status != "pending_approval":
            raise rejected(self._decided_text())
        if input.approve:
            self._mint(input.principal, input.reason, automatic=False)
        else:
            for node in self._state.nodes.values():
                node.status = "cancelled"  # none of them will run
            self._state.ended_at = workflow.now()
            self._set_status("rejected")
            self._emit(TaskPlanRejected(principal=input.principal, reason=input.reason))
        return self._snapshot()

    def _decided_text(self) -> str:
        """Why a plan cannot be decided now: decided already (by whom), or not planned yet, or ended."""
        graph, status, token = self._config.graph_id, self._state.status, self._state.token
        if token is not None:
            return f"the plan of graph {graph} was approved already by {token.approved_by} (token {token.token_id}); the graph is {status}"
        if status == "planning":
            return f"graph {graph} is still planning: there is no plan to decide yet"
        return f"graph {graph} is {status}: only a plan pending approval can be decided"

    @approve_plan.validator
    def _validate_approve_plan(self, input: ApprovePlanInput) -> None:
        self._check_principal(input.principal, input.reason, "approve the plan of" if input.approve else "reject the plan of")
        if self._cancel is not None:
            raise rejected(f"graph {self._config.graph_id} is being cancelled")
        if self._state.status != "pending_approval":
            raise rejected(self._decided_text())

    @workflow.update
    async def cancel(self, input: GraphControlInput) -> GraphSnapshot:
        """End the graph: running child sessions are cancelled first; answers once the graph has ended."""
        if self._cancel is None:
            self._cancel = input
        await workflow.wait_condition(lambda: self._state.status in TERMINAL_GRAPH_STATUSES)
        return self._snapshot()

    @cancel.validator
    def _validate_cancel(self, input: GraphControlInput) -> None:
        self._check_principal(input.principal, input.reason, "cancel")
        if self._state.status in TERMINAL_GRAPH_STATUSES:
            raise rejected(f"graph {self._config.graph_id} has ended ({self._state.status}): it cannot be cancelled")
        if self._cancel is not None:
            raise rejected(f"graph {self._config.graph_id} is being cancelled")

    # ---------------------------------------------------------------- queries

    @workflow.query
    def snapshot(self) -> GraphSnapshot:
        return self._snapshot()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return self._journal.page(input.since_seq, input.limit)
