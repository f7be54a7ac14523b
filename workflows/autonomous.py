"""AutonomousTaskWorkflow: a goal pursued across sessions and days, inspectable at every step.

One workflow per task (id ``task-<task_id>``). Its loop:

    wake (timer, nudge) -> trigger (execute | defer | ignore: AutonomyDecision)
    -> child SessionWorkflow ``<task_id>-s<N>-<token>`` with an orientation prompt -> its outcome
    -> acceptance check (a command in the sandbox, a reviewer model) -> checkpoint
    -> durable timer until the next wake

Every session's spend rolls up into the task's (``UsageReceipt``s); a task whose spend reaches its
budget stops at ``budget_exceeded`` until ``raise_budget``. ``pause``, ``resume``, ``nudge``,
``cancel``, ``amend_goal`` and ``raise_budget`` are updates (owner, or an operator with a reason);
``status`` and ``events`` are queries. It continues as new with one ``TaskState`` (``_task_frame.TaskFrame``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    CHILD_SPEND_SIGNAL,
    MAX_TASK_INTERVAL_SECONDS,
    MIN_DEFER_SECONDS,
    TERMINAL_TASK_STATUSES,
    UPGRADE_SIGNAL,
    AmendGoalInput,
    AutonomousTaskBudgetExceeded,
    AutonomousTaskBudgetRaised,
    AutonomousTaskCancelled,
    AutonomousTaskCheckpointed,
    AutonomousTaskCompleted,
    AutonomousTaskCreated,
    AutonomousTaskGoalAmended,
    AutonomousTaskInput,
    AutonomousTaskNudged,
    AutonomousTaskResult,
    AutonomousTaskSessionEnded,
    AutonomousTaskSessionStarted,
    AutonomousTaskWaiting,
    AutonomyDecision,
    BudgetCrossing,
    ChildSpendReport,
    EventsPage,
    EventsQuery,
    RaiseBudgetInput,
    SessionParent,
    Spend,
    TaskCheckpoint,
    TaskControlInput,
    TaskState,
    TaskStatusView,
    TriggerVerdict,
    UsageReceipt,
    child_config,
    code_span,
    format_seconds,
    task_session_id,
    task_workflow_id,
)
from agentrt.workflows import _task_parts as parts
from agentrt.workflows._children import ChildEnd, ChildSessions
from agentrt.workflows._errors import rejected
from agentrt.workflows._frame import Standing, require_workflow_id
from agentrt.workflows._pause import TaskPause
from agentrt.workflows._task_checks import TaskChecks
from agentrt.workflows._task_frame import TaskFrame

__all__ = ["AutonomousTaskWorkflow"]


# Not sandboxed, as SessionWorkflow is not (see workflows/session.py): this module imports only
# temporalio, agentrt.schemas and pure workflow parts (tests/workflows/test_determinism.py).
@workflow.defn(name=AUTONOMOUS_TASK_WORKFLOW, sandboxed=False)
class AutonomousTaskWorkflow:
    @workflow.init
    def __init__(self, input: AutonomousTaskInput) -> None:
        config = input.config
        self._config = config
        self._carried = input.state is not None
        self._state: TaskState = input.state or TaskState(
            goal=config.goal, criteria=list(config.criteria), budget=config.budget, max_sessions=config.max_sessions
        )
        self._nudged: TaskControlInput | None = None
        self._cancel: TaskControlInput | None = None
        self._cancelled_session: str | None = None  # the session a cancel ended (for AutonomousTaskCancelled)
        # The journal, status board and log, store writes and next run; asks console-v1 (every search
        # attribute kept current), status-events-v1, regular-activities-v1, frame-v1 and upgrade-at-turn-boundary-v1.
        self._frame = TaskFrame(config, self._state)
        self._patches, self._journal, self._next_run = self._frame.patches, self._frame.journal, self._frame.next_run
        self._emit, self._set_status, self._flush = self._frame.emit, self._frame.set_status, self._frame.flush
        self._local_activities = self._frame.local_activities
        self._checks = TaskChecks(config, self._state, self._journal, local_activities=self._local_activities)
        self._children = ChildSessions(config.owner, parent_close=self._frame.parent_close, console=self._frame.board.console)
        self._hold = TaskPause(self._state, self._children, self._patches)  # pause-v1: the session pauses with the task
        self._standing = Standing(config.owner, config.operators, f"task {config.task_id}")

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: AutonomousTaskInput) -> AutonomousTaskResult:
        require_workflow_id("task", self._config.task_id, task_workflow_id(self._config.task_id))
        try:
            if not self._carried:
                self._state.started_at = workflow.now()
                self._emit(
                    AutonomousTaskCreated(
                        task_id=self._config.task_id, owner=self._config.owner, goal=self._state.goal,
                        criteria=list(self._state.criteria), max_sessions=self._state.max_sessions,
                        budget=self._state.budget, schedule=self._config.schedule.describe(), status_events=self._frame.statuses.on,
                    )
                )
                self._state.next_wake = workflow.now()
                if self._config.schedule.cron is not None:
                    await self._checks.next_cron_time()  # a cron that never fires fails the task before any session
            await self._flush()
            while self._state.status not in TERMINAL_TASK_STATUSES and self._cancel is None:
                if self._next_run.due():
                    await self._frame.continue_as_new()
                if self._state.status in ("paused", "budget_exceeded"):
                    await self._wait_while_stopped()
                    continue
                if not await self._sleep_until_wake():
                    continue  # paused, cancelled or stopped while asleep
                await self._wake()
        except asyncio.CancelledError:
            # The workflow's own cancellation (Temporal's cancel): record it, cancel the session, end Canceled.
            await self._end_cancelled(TaskControlInput(principal="temporal", reason="workflow cancelled"))
            raise
        if self._cancel is not None:
            await self._end_cancelled(self._cancel)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return parts.result(self._config, self._state, workflow.now())

    async def _wake(self) -> None:
        """One wake: decide, then run a session (or schedule the next wake)."""
        source = "nudge" if self._nudged is not None else "continuation" if self._state.continue_now else "schedule"
        self._nudged = None
        self._state.continue_now = False
        self._state.dismissed = False
        verdict = TriggerVerdict(decision="execute", reason=f"{source}")
        if self._config.schedule.trigger_command and source != "continuation":
            verdict = await self._checks.trigger()
            source = "trigger"
        if verdict.decision == "defer":
            # A trigger (whose output a session may have written) cannot make the task spin.
            verdict.seconds = min(max(verdict.seconds or 0.0, MIN_DEFER_SECONDS), MAX_TASK_INTERVAL_SECONDS)
        # ignore-dismisses-v1: with no clock, an ignored run is dismissed for good (no wake until a nudge);
        # before it, the task asked the trigger again an hour later, and every hour after.
        dismissed = verdict.decision == "ignore" and parts.clockless(self._config) and self._patches.has(parts.DISMISS_PATCH)
        self._emit(AutonomyDecision(decision=verdict.decision, source=source, seconds=verdict.seconds, reason=verdict.reason, dismissed=dismissed))
        if dismissed:
            self._state.dismissed, self._state.next_wake = True, None
            return
        if verdict.decision == "defer":
            assert verdict.seconds is not None  # set just above
            self._state.next_wake = workflow.now() + timedelta(seconds=verdict.seconds)
            self._emit(AutonomousTaskWaiting(until=self._state.next_wake, why="trigger said defer"))
            return
        if verdict.decision == "ignore":
            await self._checks.schedule_next(ignored=True)
            return
        if self._budget_crossed():
            return
        if self._state.sessions_started >= self._state.max_sessions:
            self._emit(parts.out_of_sessions(self._state))
            await self._flush()
            return
        if self._hold.holds():
            return  # paused while it woke (pause-v1): no session starts; the next wake after resume asks again
        await self._run_session()

    # ---------------------------------------------------------------- waiting

    async def _sleep_until_wake(self) -> bool:
        """Sleep on a durable timer until ``next_wake``; False when woken by a pause, cancel or stop."""
        while True:
            if self._cancel is not None or self._state.status != "waiting":
                return False
            if self._nudged is not None:
                return True
            if self._next_run.due():
                return False  # continue as new first (updates during a long sleep grow the history; a new build)
            wake = None if self._state.dismissed else self._state.next_wake  # dismissed: no wake until a nudge
            now = workflow.now()
            if not self._state.dismissed and (wake is None or wake <= now):
                return True
            self._set_status("waiting")
            await self._flush()
            delay = wake - now if wake is not None else None
            summary = f"task {self._config.task_id}: next wake at {wake:%Y-%m-%d %H:%M:%S} UTC (in {format_seconds(delay.total_seconds())})" if wake and delay else None
            try:
                await workflow.wait_condition(
                    lambda: self._cancel is not None
                    or self._nudged is not None
                    or self._state.status != "waiting"
                    or bool(self._state.unflushed_events)
                    or self._next_run.new_build(),
                    timeout=delay,
                    timeout_summary=summary,
                )
            except asyncio.TimeoutError:
                return True

    async def _wait_while_stopped(self) -> None:
        """Paused or over budget: wait for ``resume`` / ``raise_budget`` / ``cancel``, writing what happens meanwhile."""
        self._set_status(self._state.status)
        await self._flush()
        stopped = self._state.status
        await workflow.wait_condition(
            lambda: self._cancel is not None
            or self._state.status != stopped
            or bool(self._state.unflushed_events)
            or self._next_run.due()
        )
        await self._flush()

    # ---------------------------------------------------------------- one session

    async def _run_session(self) -> None:
        commit = None
        if self._patches.has(parts.WORKSPACE_COMMIT_PATCH):  # workspace-commit-v1: for the orientation prompt
            commit = await self._checks.workspace_commit()
            if self._cancel is not None or self._hold.holds():
                return  # cancelled or paused while it was read: no session starts
        number = self._state.sessions_started + 1
        session_id = task_session_id(self._config.task_id, number, workflow.uuid4().hex[:8])
        self._state.sessions_started = number
        self._state.running_session = session_id
        remaining = self._state.budget.remaining(self._spend_now())
        session_config = child_config(
            self._config.template(),
            session_id=session_id,
            owner=self._config.owner,
            workspace=self._config.workspace,
            max_rounds_per_turn=self._config.max_rounds_per_session,
            interactive=False,
            title=f"task {self._config.task_id} · session {number}",
            budget=None if self._state.budget.is_unbounded() else remaining,
            prompt=parts.orientation_prompt(self._config, self._state, number, commit),
            ends_after_turn=True,
            parent=SessionParent(id=self._config.task_id, number=number),
        )
        self._emit(AutonomousTaskSessionStarted(session_id=session_id, number=number))
        self._set_status("running")
        await self._flush()
        try:
            handle = await self._children.start(
                session_config,
                summary=f"task {self._config.task_id} · session {number} of {self._state.max_sessions}",
                details=f"goal: {code_span(self._state.goal, 300)}",
            )
        except WorkflowAlreadyStartedError:
            self._state.running_session = None
            taken = f"a workflow with session id {session_id} already exists"
            await self._session_ended(number, session_id, ChildEnd("failed", None, taken, Spend()))
            return
        # A cancel cancels the session, which ends (Canceled) before the task records its end.
        end = await self._children.wait(session_id, handle, cancel_when=lambda: self._cancel is not None)
        if end.cancelled and self._cancel is not None:
            self._cancelled_session = session_id
        self._state.running_session = None
        await self._session_ended(number, session_id, end)

    async def _session_ended(self, number: int, session_id: str, end: ChildEnd) -> None:
        now = workflow.now()
        status, error = end.status, end.error
        parts.add_receipt(self._state, UsageReceipt(number=number, session_id=session_id, spend=end.spend, at=now), now)
        self._emit(AutonomousTaskSessionEnded(session_id=session_id, number=number, status=status, spend=end.spend, error=error))
        if self._cancel is not None:
            return  # the task is ending: its cancel records the rest
        answer = end.answer or ""
        accepted, remaining = False, ""
        if not await self._hold.wait_for_resume(lambda: self._cancel is not None):
            return  # cancelled while paused: its cancel records the rest
        if status == "completed" or (status in ("round_limit", "failed") and self._config.acceptance.command):
            # A session that stopped early may still have done the work: the command can tell.
            accepted, remaining = await self._checks.acceptance(number, session_id, answer, reviewed=status == "completed")
        elif status == "round_limit":
            remaining = "the session reached its round limit before a final answer; the next session continues"
        elif status == "budget_exceeded":
            remaining = "the budget ran out during this session"
        checkpoint = TaskCheckpoint(
            number=number, session_id=session_id, at=workflow.now(), session_status=status,
            done=parts.cut(answer), remaining=parts.cut(remaining), accepted=accepted, error=error,
            spend=self._spend_now(),
        )
        parts.keep_checkpoint(self._state, checkpoint)
        self._emit(AutonomousTaskCheckpointed(checkpoint=checkpoint))
        self._frame.checkpoint_unwritten = checkpoint
        if accepted:
            self._state.status = "completed"
            self._emit(AutonomousTaskCompleted(sessions=number, spend=self._spend_now()))
        elif status == "cancelled":
            self._emit(self._hold.mark_paused(None, f"session {session_id} was cancelled"))
        elif self._budget_crossed(end.crossing):
            pass
        elif self._state.sessions_started >= self._state.max_sessions:
            self._emit(parts.out_of_sessions(self._state))
        else:
            if self._state.status == "running":
                self._state.status = "waiting"  # a pause that came during the session stays
            self._state.continue_now = status == "round_limit"
            if self._state.continue_now:
                self._state.next_wake = workflow.now()
            else:
                await self._checks.schedule_next()
        await self._flush()

    # ---------------------------------------------------------------- budget, status, ending

    def _spend_now(self) -> Spend:
        return parts.spend_now(self._state, workflow.now())

    def _budget_crossed(self, refused: BudgetCrossing | None = None) -> bool:
        """Stop at ``budget_exceeded`` at a limit the spend reached, or a session's call was ``refused`` at (refused-call-v1)."""
        crossing = self._state.budget.crossed(self._spend_now())
        if crossing is None and refused is not None and self._patches.has(parts.REFUSED_CALL_PATCH):
            crossing = refused
        if crossing is None:
            return False
        self._state.budget_crossing = crossing
        self._state.status = "budget_exceeded"
        self._emit(AutonomousTaskBudgetExceeded(crossing=crossing))
        return True

    async def _end_cancelled(self, request: TaskControlInput) -> None:
        """Cancel the running session (waiting for it to end), record the cancel and write it all."""
        await self._children.end_all()
        if self._state.status != "cancelled":
            self._state.status = "cancelled"
            self._emit(
                AutonomousTaskCancelled(
                    principal=request.principal, reason=request.reason,
                    session_id=self._state.running_session or self._cancelled_session,
                )
            )
        self._state.running_session = None
        await self._flush()

    # ---------------------------------------------------------------- updates

    def _refuse(self, update: str, input: TaskControlInput | AmendGoalInput | RaiseBudgetInput) -> None:
        """An update validator: refuse a principal without standing, then what the task's state does not allow."""
        self._standing.check(input, parts.CONTROL_VERBS[update][0])
        refusal = parts.control_refusal(
            update, self._config, self._state, input, cancelling=self._cancel is not None, waking=self._nudged is not None
        )
        if refusal is not None:
            raise rejected(refusal)

    def _view(self) -> TaskStatusView:
        return parts.status_view(self._config, self._state, workflow.now())

    async def _answer(self) -> TaskStatusView:
        """An update's answer: the status view, once what the update recorded is in the store
        (``regular-activities-v1``; before it, the local store write held back the whole workflow
        task, the answer with it, when the run was waiting)."""
        if not self._local_activities:
            await self._flush()
        return self._view()

    @workflow.update
    async def pause(self, input: TaskControlInput) -> TaskStatusView:
        """Start no session and no check until ``resume``; a running session pauses too (pause-v1). Idempotent."""
        if self._state.status == "paused":
            return self._view()
        self._emit(self._hold.mark_paused(input.principal, input.reason))
        await self._hold.tell_session(input, paused=True)
        return await self._answer()

    @pause.validator
    def _validate_pause(self, input: TaskControlInput) -> None:
        self._refuse("pause", input)

    @workflow.update
    async def resume(self, input: TaskControlInput) -> TaskStatusView:
        """Go on after a pause: a paused session goes on, the next one runs at the scheduled wake (now, if passed)."""
        if self._state.status != "paused":
            return self._view()
        self._emit(self._hold.mark_resumed(input))
        await self._hold.tell_session(input, paused=False)
        return await self._answer()

    @resume.validator
    def _validate_resume(self, input: TaskControlInput) -> None:
        self._refuse("resume", input)

    @workflow.update
    async def nudge(self, input: TaskControlInput) -> TaskStatusView:
        """Wake now instead of at ``next_wake``."""
        self._nudged = input
        self._emit(AutonomousTaskNudged(principal=input.principal, reason=input.reason))
        return await self._answer()

    @nudge.validator
    def _validate_nudge(self, input: TaskControlInput) -> None:
        self._refuse("nudge", input)

    @workflow.update
    async def cancel(self, input: TaskControlInput) -> TaskStatusView:
        """End the task: a running session is cancelled first; answers once the task has ended."""
        self._cancel = input
        await workflow.wait_condition(lambda: self._state.status == "cancelled")
        return self._view()

    @cancel.validator
    def _validate_cancel(self, input: TaskControlInput) -> None:
        self._refuse("cancel", input)

    @workflow.update
    async def amend_goal(self, input: AmendGoalInput) -> TaskStatusView:
        """Change the goal (and criteria, when given) for the next sessions."""
        self._state.goal = input.goal
        if input.criteria is not None:
            self._state.criteria = list(input.criteria)
        self._emit(
            AutonomousTaskGoalAmended(principal=input.principal, goal=input.goal, criteria=list(self._state.criteria), reason=input.reason)
        )
        return await self._answer()

    @amend_goal.validator
    def _validate_amend_goal(self, input: AmendGoalInput) -> None:
        self._refuse("amend_goal", input)

    @workflow.update
    async def raise_budget(self, input: RaiseBudgetInput) -> TaskStatusView:
        """Raise limits; a task stopped at ``budget_exceeded`` goes on when its spend is under them all."""
        self._state.budget = self._state.budget.raised(input.budget)
        if input.max_sessions is not None:
            self._state.max_sessions = input.max_sessions
        self._emit(
            AutonomousTaskBudgetRaised(
                principal=input.principal, budget=self._state.budget, max_sessions=self._state.max_sessions, reason=input.reason
            )
        )
        if self._state.status == "budget_exceeded":
            self._state.budget_crossing = self._state.budget.crossed(self._spend_now())  # None: under every limit now
            if self._state.budget_crossing is None:
                self._state.status = "waiting"
                self._state.next_wake = workflow.now()
        return await self._answer()

    @raise_budget.validator
    def _validate_raise_budget(self, input: RaiseBudgetInput) -> None:
        self._refuse("raise_budget", input)

    @workflow.signal(name=CHILD_SPEND_SIGNAL)
    def child_spend(self, input: ChildSpendReport) -> None:
        self._children.record(input)  # a child session's, as it ends cancelled

    @workflow.signal(name=UPGRADE_SIGNAL)
    def upgrade(self) -> None:
        """A newer build is current (its workers say so): wakes a sleeping run, which continues as new onto it."""

    @workflow.query  # the queries: status and events
    def status(self) -> TaskStatusView:
        return self._view()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return self._journal.page(input.since_seq, input.limit)
