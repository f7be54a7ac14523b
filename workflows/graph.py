"""TaskGraphWorkflow: a goal planned into a DAG of agent tasks, approved once, run as child
sessions in dependency order, each result judged by a reviewer.

One workflow per graph (id ``graph-<graph_id>``):

    plan (activity ``graph.plan``: the planner model, or a given graph checked) -> TaskDecomposed
    -> approval (update ``approve_plan``; automatic for ``approve_plan="auto"`` below high risk)
       mints the capability token: every node's grants, frozen for the run
    -> ready nodes run as child SessionWorkflows, at most ``max_parallel`` at once
    -> the reviewer (activity ``graph.review``, fail-open) passes or fails each answer; a fail
       reruns the node with the findings, up to ``max_retries`` (an answer that starts with
       ``Error:`` fails without a review, ``graph-error-answer-v1``)
    -> a node that fails for good blocks its dependants (``failure_policy``); update ``retry_node``
       runs it again and unblocks them (the graph waits ``retry_window_seconds`` for one)

``cancel`` (update, or Temporal's cancel) cancels every running child and waits for it; queries
``snapshot`` (the graph with each node's status) and ``events``. A graph's history is bounded
by its nodes and retries (``MAX_GRAPH_NODES``, ``MAX_NODE_RETRIES``): it continues as new only
to move to its deployment's newer current build, once no node runs (``GraphFrame.move``; pinned runs).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError

from agentrt.schemas import (
    CHILD_SPEND_SIGNAL,
    UPGRADE_SIGNAL,
    TASK_GRAPH_WORKFLOW,
    TERMINAL_GRAPH_STATUSES,
    AgentTaskCompleted,
    AgentTaskFailed,
    AgentTaskStarted,
    ApprovePlanInput,
    ChildSpendReport,
    EventsPage,
    EventsQuery,
    GraphConfig,
    GraphControlInput,
    GraphSnapshot,
    GraphState,
    InvalidGraph,
    NodeState,
    RetryNodeInput,
    ReviewVerdict,
    Spend,
    TaskCancelled,
    TaskDecomposed,
    TaskGraphCreated,
    TaskGraphInput,
    TaskGraphResult,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    TaskReviewed,
    code_span,
    graph_node_session_id,
    graph_workflow_id,
    validate_graph,
)
from agentrt.workflows import _graph_parts as parts
from agentrt.workflows import _graph_steps as steps
from agentrt.workflows._children import ChildEnd, ChildSessions
from agentrt.workflows._errors import error_text, error_type, rejected
from agentrt.workflows._frame import Standing, require_workflow_id
from agentrt.workflows._graph_frame import GraphFrame
from agentrt.workflows._pause import GraphPause

__all__ = ["TaskGraphWorkflow"]

PLAN_ERRORS = ("InvalidGraph", "NodeCannotDecompose")


# Not sandboxed, as SessionWorkflow is not (see workflows/session.py): this module imports only
# temporalio, agentrt.schemas and pure workflow parts (tests/workflows/test_determinism.py).
@workflow.defn(name=TASK_GRAPH_WORKFLOW, sandboxed=False)
class TaskGraphWorkflow:
    @workflow.init
    def __init__(self, input: TaskGraphInput) -> None:
        self._config: GraphConfig = input.config
        self._carried = input.state is not None  # continued as new onto a newer build (GraphFrame.move)
        self._state = input.state or GraphState()
        self._cancel: GraphControlInput | None = None
        self._halting = False  # fail_fast after a node failed for good: start nothing more
        self._hand_retries = 0  # retry_node updates taken by this run (each wakes the execution loop)
        self._frame = GraphFrame(self._config, self._state)  # asks the frame's patches (console-v1, frame-v1, status-events-v1)
        self._emit, self._set_status, self._snapshot = self._frame.emit, self._frame.set_status, self._frame.snapshot
        self._recorded, self._moves, self._record = self._frame.recorded, self._frame.moves, self._frame.record
        close = workflow.ParentClosePolicy.REQUEST_CANCEL if self._recorded else workflow.ParentClosePolicy.TERMINATE
        self._children = ChildSessions(self._config.owner, parent_close=close, console=self._frame.board.console)
        self._standing = Standing(self._config.owner, self._config.operators, f"graph {self._config.graph_id}")
        self._pauses = GraphPause(
            self._config.graph_id, self._state, self._children, self._standing, self._emit, lambda: self._set_status(self._state.status)
        )

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: TaskGraphInput) -> TaskGraphResult:
        config = self._config
        require_workflow_id("graph", config.graph_id, graph_workflow_id(config.graph_id))
        if not self._carried:
            self._state.started_at = workflow.now()
            self._emit(TaskGraphCreated(graph_id=config.graph_id, owner=config.owner, goal=config.goal,
                                        approve_plan=config.approve_plan, status_events=self._frame.statuses.on))
        if self._recorded:
            self._record.start()
        try:
            await self._run_graph()
        except asyncio.CancelledError:
            # Temporal's own cancel: cancel the children, record it, end Canceled.
            self._cancel = self._cancel or GraphControlInput(principal="temporal", reason="workflow cancelled")
            await self._end_cancelled(self._cancel)
            await self._record.close()
            raise
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._record.close()
        return parts.result(self._config, self._state, workflow.now())

    async def _run_graph(self) -> None:
        if not self._carried:
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
        if await self._execute():
            await self._frame.move()
        if self._cancel is not None:
            await self._end_cancelled(self._cancel)
            return
        self._frame.finish()

    # ---------------------------------------------------------------- plan and approval

    async def _plan(self) -> bool:
        """Ask ``graph.plan``; False when the graph ended (failed, cancelled) instead."""
        config = self._config
        handle = steps.start_planner(config, self._state)
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
            self._frame.fail("invalid_plan" if kind in PLAN_ERRORS else "planner_failed", error_text(err))
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
            self._frame.complete()
            return True
        if config.goal is not None:
            # A planner (a model) chooses neither a node's model nor a file on the worker: the graph's apply.
            plan.graph = parts.without_model_choices(plan.graph)
        try:
            self._state.order = validate_graph(plan.graph, granted=parts.graph_tools(config, plan.tools), source="plan")
        except InvalidGraph as err:  # the activity checked it; a worker of another version may not have
            self._frame.fail("invalid_plan", f"{type(err).__name__}: {err}")
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

    async def _execute(self) -> bool:
        """Run ready nodes, at most ``max_parallel`` at once, until none is ready or running. True: a
        newer build is current and no node runs any more (none starts meanwhile): the graph moves."""
        limit = parts.max_parallel(self._config, self._state)
        tasks: dict[str, asyncio.Task[None]] = {}
        while True:
            if not tasks and self._cancel is None and self._moves.changed():
                return True
            if self._cancel is None and not self._halting and not self._pauses.paused and not self._moves.changed():
                for node_id in parts.ready_nodes(self._config, self._state, workflow.now()):
                    if len(tasks) >= limit:
                        break
                    self._state.nodes[node_id].status = "delegated"  # taken: not ready again
                    tasks[node_id] = asyncio.create_task(self._run_node(node_id))
            if not tasks and (self._halting or not self._pauses.paused):
                if await self._await_hand_retry():
                    continue  # a node was retried by hand: it is ready now
                return False
            resumes, retries = self._pauses.resumes, self._hand_retries  # a resume or a retry wakes the wait: ready nodes start
            await workflow.wait_condition(
                lambda: any(t.done() for t in tasks.values()) or self._cancel is not None or self._pauses.resumes != resumes
                or (not tasks and self._moves.changed()) or self._hand_retries != retries
            )
            if self._cancel is not None:
                self._children.cancel_all()
                for node_id, task in tasks.items():
                    if self._state.nodes[node_id].status == "reviewing":
                        task.cancel()  # cancels its review call; the node ends cancelled
                await asyncio.gather(*tasks.values(), return_exceptions=True)
                return False
            for node_id in [n for n, t in tasks.items() if t.done()]:
                tasks.pop(node_id).result()
                if self._state.nodes[node_id].status == "failed":
                    self._after_failure(node_id)

    async def _await_hand_retry(self) -> bool:
        """Nodes failed for good and nothing runs: wait up to ``retry_window_seconds`` for
        ``retry_node`` (True) or a cancel (False). False at once without a window, under a halt or
        with no failed node (the graph then ends)."""
        window = self._config.retry_window_seconds
        if not window or self._halting or self._cancel is not None or not any(n.status == "failed" for n in self._state.nodes.values()):
            return False
        retries, self._state.retry_until = self._hand_retries, workflow.now() + timedelta(seconds=window)
        self._set_status(self._state.status)
        try:
            await workflow.wait_condition(lambda: self._hand_retries != retries or self._cancel is not None, timeout=timedelta(seconds=window),
                                          timeout_summary=f"graph {self._config.graph_id}: wait for a retry by hand")
        except asyncio.TimeoutError:
            pass
        self._state.retry_until = None
        return self._hand_retries != retries and self._cancel is None

    def _after_failure(self, node_id: str) -> None:
        """Block the dependants of a node that failed for good; under ``fail_fast``, halt the graph."""
        if steps.after_failure(self._config, self._state, node_id, self._emit, halting=self._halting):
            self._halting = True
            self._children.cancel_all()

    async def _run_node(self, node_id: str) -> None:
        """Attempts of one node until the reviewer passes it, it fails for good, or it is cancelled."""
        assert self._state.plan is not None and self._state.token is not None
        spec = self._state.plan.node(node_id)
        node = self._state.nodes[node_id]
        node.started_at = workflow.now()
        first = node.attempts + 1  # a retry by hand (retry_node) gives 1 + max_retries attempts more
        feedback = node.error or ""  # after a retry by hand: why the last attempt failed
        while True:
            if not await self._held(node_id):
                return
            node.attempts += 1
            attempt = node.attempts
            node.status = "delegated"
            node.error = None
            session_id = graph_node_session_id(self._config.graph_id, node_id, attempt, workflow.uuid4().hex[:8])
            node.session_ids.append(session_id)
            grant = self._state.token.grants[node_id]
            self._emit(AgentTaskStarted(node_id=node_id, attempt=attempt, session_id=session_id, role=spec.role, tools=list(grant.tools)))
            self._set_status("executing")
            end = await self._run_session(node_id, session_id, attempt, feedback)
            spend, error = end.spend, end.error
            parts.add_spend(self._state, spend, node_id)
            if end.cancelled or self._cancel is not None or self._halting:
                self._node_cancelled(node_id)
                return
            answer = end.answer or ""
            # graph-error-answer-v1: an answer that is an error report fails the attempt without a review.
            if end.status == "completed" and parts.error_answer(answer) and self._frame.patches.has(parts.ERROR_ANSWER_PATCH):
                node.answer = parts.cut(answer)
                error = feedback = f"the node answered with an error: {parts.cut(answer.strip(), 1_000)}"
            elif end.status == "completed" and answer.strip():
                if not await self._held(node_id):
                    return
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
                status = end.status
                error = f"session {status}" + (f": {error}" if error else "") if status != "completed" else "the session gave no final answer"
                feedback = error
            final = attempt - first >= self._config.max_retries or parts.out_of_budget(self._config, self._state, workflow.now(), end.crossing is not None)
            self._emit(AgentTaskFailed(node_id=node_id, attempt=attempt, session_id=session_id, error=parts.cut(error or "", 2_000), final=final, spend=spend))
            if final:
                node.status = "failed"
                node.error = parts.cut(error or "", 2_000)
                node.ended_at = workflow.now()
                return
            node.status = "retrying"
            self._emit(TaskRetried(node_id=node_id, attempt=attempt + 1, feedback=parts.cut(feedback, parts.FEEDBACK_CHARS)))

    async def _run_session(self, node_id: str, session_id: str, attempt: int, feedback: str) -> ChildEnd:
        """Start attempt ``attempt`` of ``node_id`` as a child session and wait for its end."""
        assert self._state.plan is not None
        config, spec = self._config, self._state.plan.node(node_id)
        session_config = steps.node_session(config, self._state, node_id, session_id, attempt, feedback, workflow.now())
        try:
            handle = await self._children.start(
                session_config,
                summary=f"graph {config.graph_id} · node {code_span(node_id, 80)} · attempt {attempt}",
                details=f"{spec.role}: {code_span(spec.prompt, 300)}",
            )
        except WorkflowAlreadyStartedError:
            return ChildEnd("failed", None, f"a workflow with session id {session_id} already exists", Spend())
        if self._cancel is not None or self._halting:
            handle.cancel()  # a cancel came while the child was starting: its sweep did not see it
        return await self._children.wait(session_id, handle)

    async def _review(self, node_id: str, session_id: str, attempt: int, answer: str) -> ReviewVerdict:
        """The reviewer's verdict on ``answer`` (``steps.ask_reviewer``), its spend and ``TaskReviewed`` recorded."""
        node = self._state.nodes[node_id]
        node.status = "reviewing"
        self._set_status("executing")
        verdict = await steps.ask_reviewer(self._config, self._state, node_id, session_id, attempt, answer)
        parts.add_spend(self._state, Spend(usage=verdict.usage, cost_usd=verdict.cost_usd), node_id)
        self._emit(
            TaskReviewed(
                node_id=node_id, attempt=attempt, passed=verdict.passed, findings=list(verdict.findings),
                summary=verdict.summary, error=verdict.error, severity=verdict.severity,
            )
        )
        return verdict

    async def _held(self, node_id: str) -> bool:
        """Wait while paused (no attempt or review starts); False: a cancel or ``fail_fast`` ended the node."""
        if not self._pauses.paused:
            return True
        await self._pauses.hold(lambda: self._cancel is not None or self._halting)
        if self._cancel is not None or self._halting:
            self._node_cancelled(node_id)
            return False
        return True

    def _node_cancelled(self, node_id: str) -> None:
        node = self._state.nodes[node_id]
        node.status = "cancelled"
        node.ended_at = workflow.now()
        who, why = (self._cancel.principal, self._cancel.reason) if self._cancel else ("agentrt", "fail_fast: another node failed")
        self._emit(TaskCancelled(node_id=node_id, principal=who, reason=why))

    # ---------------------------------------------------------------- ending

    async def _end_cancelled(self, request: GraphControlInput) -> None:
        """Cancel every running child session (waiting for each to end) and record the cancel."""
        await self._children.end_all()
        if self._state.status == "cancelled":
            return
        steps.cancel_open_nodes(self._state, workflow.now())
        self._state.ended_at = workflow.now()
        self._set_status("cancelled")
        self._emit(TaskCancelled(principal=request.principal, reason=request.reason))

    # ---------------------------------------------------------------- updates

    @workflow.update
    def approve_plan(self, input: ApprovePlanInput) -> GraphSnapshot:
        """Approve the plan (mint the capability token; the nodes run) or reject it (the graph ends
        ``rejected``). Atomic: of concurrent approvals one mints the token, the others fail."""
        if self._state.token is not None or self._state.status != "pending_approval":
            raise rejected(parts.decided_text(self._config, self._state))
        if input.approve:
            self._mint(input.principal, input.reason, automatic=False)
        else:
            for node in self._state.nodes.values():
                node.status = "cancelled"  # none of them will run
            self._state.ended_at = workflow.now()
            self._set_status("rejected")
            self._emit(TaskPlanRejected(principal=input.principal, reason=input.reason))
        return self._snapshot()

    @approve_plan.validator
    def _validate_approve_plan(self, input: ApprovePlanInput) -> None:
        self._standing.check(input, "approve the plan of" if input.approve else "reject the plan of")
        if self._cancel is not None:
            raise rejected(f"graph {self._config.graph_id} is being cancelled")
        if self._state.status != "pending_approval":
            raise rejected(parts.decided_text(self._config, self._state))

    @workflow.update
    async def cancel(self, input: GraphControlInput) -> GraphSnapshot:
        """End the graph: running child sessions are cancelled first; answers once the graph has ended."""
        if self._cancel is None:
            self._cancel = input
        await workflow.wait_condition(lambda: self._state.status in TERMINAL_GRAPH_STATUSES)
        return self._snapshot()

    @cancel.validator
    def _validate_cancel(self, input: GraphControlInput) -> None:
        self._standing.check(input, "cancel")
        if self._state.status in TERMINAL_GRAPH_STATUSES:
            raise rejected(f"graph {self._config.graph_id} has ended ({self._state.status}): it cannot be cancelled")
        if self._cancel is not None:
            raise rejected(f"graph {self._config.graph_id} is being cancelled")

    @workflow.update
    async def pause(self, input: GraphControlInput) -> GraphSnapshot:
        """Start no node, retry or review until ``resume``; running child sessions pause too. Idempotent."""
        await self._pauses.apply(input, paused=True)
        return self._snapshot()

    @pause.validator
    def _validate_pause(self, input: GraphControlInput) -> None:
        self._pauses.validate(input, "pause", cancelling=self._cancel is not None)

    @workflow.update
    async def resume(self, input: GraphControlInput) -> GraphSnapshot:
        """Go on: paused child sessions go on and ready nodes start. Idempotent."""
        await self._pauses.apply(input, paused=False)
        return self._snapshot()

    @resume.validator
    def _validate_resume(self, input: GraphControlInput) -> None:
        self._pauses.validate(input, "resume", cancelling=self._cancel is not None)

    @workflow.update
    def retry_node(self, input: RetryNodeInput) -> GraphSnapshot:
        """Run a node that failed for good again (``1 + max_retries`` attempts more); the dependants
        it blocked wait for it again. Recorded as ``TaskRetried`` with the principal."""
        node = self._state.nodes[input.node_id]
        node.status, node.ended_at, node.hand_retries = "pending", None, node.hand_retries + 1
        self._state.retry_until = None  # the graph no longer waits: the node is ready
        unblocked = parts.unblock(self._state, input.node_id)
        self._hand_retries += 1
        self._emit(TaskRetried(node_id=input.node_id, attempt=node.attempts + 1, feedback=parts.cut(node.error or "", parts.FEEDBACK_CHARS),
                               principal=input.principal, reason=input.reason, unblocked=unblocked))
        self._set_status("executing")
        return self._snapshot()

    @retry_node.validator
    def _validate_retry_node(self, input: RetryNodeInput) -> None:
        self._standing.check(input, "retry a node of")
        refusal = parts.retry_refusal(self._config, self._state, input.node_id, cancelling=self._cancel is not None, halting=self._halting)
        if refusal is not None:
            raise rejected(refusal)

    @workflow.signal(name=CHILD_SPEND_SIGNAL)
    def child_spend(self, input: ChildSpendReport) -> None:
        self._children.record(input)  # a child session's, as it ends cancelled

    @workflow.signal(name=UPGRADE_SIGNAL)
    def upgrade(self) -> None:
        """A newer build is current: wakes a run with no node running, which moves to it (``GraphFrame.move``)."""

    # ---------------------------------------------------------------- queries

    @workflow.query
    def snapshot(self) -> GraphSnapshot:
        return self._snapshot()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return self._frame.journal.page(input.since_seq, input.limit)
