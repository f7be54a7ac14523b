"""AutonomousTaskWorkflow: a goal pursued across sessions and days, inspectable at every step.

One workflow per task (id ``task-<task_id>``). Its loop:

    wake (timer, nudge) -> trigger (execute | defer | ignore: AutonomyDecision)
    -> child SessionWorkflow ``<task_id>-s<N>-<token>`` with an orientation prompt -> its outcome
    -> acceptance check (a command in the sandbox, a reviewer model) -> checkpoint
    -> durable timer until the next wake

Every session's spend rolls up into the task's (``UsageReceipt``s); a task whose spend reaches
its budget stops at ``budget_exceeded`` until ``raise_budget``. ``pause``, ``resume``,
``nudge``, ``cancel``, ``amend_goal`` and ``raise_budget`` are updates (owner, or an operator
with a reason); ``status`` and ``events`` are queries. The task continues as new between
sessions when Temporal suggests it, carrying one ``TaskState``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

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
    AUTONOMOUS_TASK_WORKFLOW,
    MAX_TASK_INTERVAL_SECONDS,
    MIN_DEFER_SECONDS,
    SESSION_OWNER,
    SESSION_STATUS,
    SESSION_WORKFLOW,
    TERMINAL_TASK_STATUSES,
    AmendGoalInput,
    AutonomousTaskAcceptanceChecked,
    AutonomousTaskBudgetExceeded,
    AutonomousTaskBudgetRaised,
    AutonomousTaskCancelled,
    AutonomousTaskCheckpointed,
    AutonomousTaskCompleted,
    AutonomousTaskCreated,
    AutonomousTaskFailed,
    AutonomousTaskGoalAmended,
    AutonomousTaskInput,
    AutonomousTaskNudged,
    AutonomousTaskPaused,
    AutonomousTaskResult,
    AutonomousTaskResumed,
    AutonomousTaskSessionEnded,
    AutonomousTaskSessionStarted,
    AutonomousTaskWaiting,
    AutonomyDecision,
    CommandCheckResult,
    Event,
    EventsPage,
    EventsQuery,
    NextWakeInput,
    RaiseBudgetInput,
    ReviewInput,
    ReviewVerdict,
    SessionConfig,
    SessionInput,
    SessionParent,
    SessionResult,
    Spend,
    TaskCheckpoint,
    TaskCommandInput,
    TaskControlInput,
    TaskRecordInput,
    TaskState,
    TaskStatus,
    TaskStatusView,
    TriggerVerdict,
    UsageReceipt,
    format_seconds,
    session_workflow_id,
    task_session_id,
    task_workflow_id,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _console as console
from agentrt.workflows import _task_parts as parts
from agentrt.workflows._approvals import standing_refusal
from agentrt.workflows._errors import error_text, rejected

__all__ = ["AutonomousTaskWorkflow"]

# A child session's workflow task timeout, as client-started sessions have (client/_starts.py).
SESSION_TASK_TIMEOUT = timedelta(seconds=4)
# How soon a lost worker's acceptance check, trigger or review is retried elsewhere (seconds);
# and the bound on one review attempt (seconds).
COMMAND_HEARTBEAT_SECONDS = 10.0
REVIEW_SECONDS = 600.0


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
        self._journal = parts.TaskJournal(self._state)
        self._child: workflow.ChildWorkflowHandle | None = None
        self._nudged: TaskControlInput | None = None
        self._cancel: TaskControlInput | None = None
        self._cancelled_session: str | None = None  # the session a cancel ended (for AutonomousTaskCancelled)
        self._checkpoint_unwritten: TaskCheckpoint | None = None
        self._status_written: TaskStatus | None = None
        # console-v1: every search attribute of the task kept current (_set_status), child sessions
        # started with their kind and profile. Asked here, in the run's first workflow task.
        self._console = workflow.patched(console.CONSOLE_PATCH)
        # regular-activities-v1: the task's store writes and cron lookups are regular activities, not
        # local ones (the SDK's local-activity/query race: options.REGULAR_ACTIVITIES_PATCH).
        self._local_activities = not workflow.patched(options.REGULAR_ACTIVITIES_PATCH)
        self._write_lock = asyncio.Lock()  # one store write at a time: the run's and the updates' (_answer)

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: AutonomousTaskInput) -> AutonomousTaskResult:
        expected = task_workflow_id(self._config.task_id)
        if workflow.info().workflow_id != expected:
            raise ApplicationError(
                f"workflow {workflow.info().workflow_id!r} cannot run task {self._config.task_id!r}: "
                f"a task runs as workflow {expected!r}",
                type="TaskIdMismatch",
                non_retryable=True,
            )
        try:
            if not self._carried:
                self._state.started_at = workflow.now()
                self._emit(
                    AutonomousTaskCreated(
                        task_id=self._config.task_id, owner=self._config.owner, goal=self._state.goal,
                        criteria=list(self._state.criteria), max_sessions=self._state.max_sessions,
                        budget=self._state.budget, schedule=self._config.schedule.describe(),
                    )
                )
                self._state.next_wake = workflow.now()
                if self._config.schedule.cron is not None:
                    await self._next_cron_time()  # a cron that never fires fails the task before any session
            await self._flush()
            while self._state.status not in TERMINAL_TASK_STATUSES and self._cancel is None:
                if workflow.info().is_continue_as_new_suggested():
                    await self._continue_as_new()
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
        return self._result()

    async def _wake(self) -> None:
        """One wake: decide, then run a session (or schedule the next wake)."""
        source = "nudge" if self._nudged is not None else "continuation" if self._state.continue_now else "schedule"
        self._nudged = None
        self._state.continue_now = False
        verdict = TriggerVerdict(decision="execute", reason=f"{source}")
        if self._config.schedule.trigger_command and source != "continuation":
            verdict = await self._evaluate_trigger()
            source = "trigger"
        if verdict.decision == "defer":
            # A trigger (whose output a session may have written) cannot make the task spin.
            verdict.seconds = min(max(verdict.seconds or 0.0, MIN_DEFER_SECONDS), MAX_TASK_INTERVAL_SECONDS)
        self._emit(AutonomyDecision(decision=verdict.decision, source=source, seconds=verdict.seconds, reason=verdict.reason))
        if verdict.decision == "defer":
            assert verdict.seconds is not None  # set just above
            self._state.next_wake = workflow.now() + timedelta(seconds=verdict.seconds)
            self._emit(AutonomousTaskWaiting(until=self._state.next_wake, why="trigger said defer"))
            return
        if verdict.decision == "ignore":
            await self._schedule_next(ignored=True)
            return
        if self._budget_crossed():
            return
        if self._state.sessions_started >= self._state.max_sessions:
            self._fail("max_sessions", f"all {self._state.max_sessions} sessions ran and the goal was not accepted")
            await self._flush()
            return
        await self._run_session()

    # ---------------------------------------------------------------- waiting

    async def _sleep_until_wake(self) -> bool:
        """Sleep on a durable timer until ``next_wake``; False when woken by a pause, cancel or stop."""
        while True:
            if self._cancel is not None or self._state.status != "waiting":
                return False
            if self._nudged is not None:
                return True
            if workflow.info().is_continue_as_new_suggested():
                return False  # continue as new first (updates during a long sleep grow the history)
            wake = self._state.next_wake
            now = workflow.now()
            if wake is None or wake <= now:
                return True
            self._set_status("waiting")
            await self._flush()
            delay = wake - now
            summary = f"task {self._config.task_id}: next wake at {wake:%Y-%m-%d %H:%M:%S} UTC (in {format_seconds(delay.total_seconds())})"
            try:
                await workflow.wait_condition(
                    lambda: self._cancel is not None
                    or self._nudged is not None
                    or self._state.status != "waiting"
                    or bool(self._state.unflushed_events),
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
            or workflow.info().is_continue_as_new_suggested()
        )
        await self._flush()

    async def _schedule_next(self, *, ignored: bool = False) -> None:
        """Set ``next_wake`` from the schedule (now, after an interval, or the cron's next time)."""
        now = workflow.now()
        schedule = self._config.schedule
        if schedule.cron is not None:
            cron_wake = await self._next_cron_time()
            if cron_wake is None:
                return
            wake = cron_wake
        elif ignored and schedule.every_seconds is None:
            wake = now + timedelta(seconds=parts.IGNORED_TRIGGER_RETRY_SECONDS)
        else:
            wake = parts.interval_wake(self._config, now) or now
        self._state.next_wake = wake
        if wake > now:
            self._emit(AutonomousTaskWaiting(until=wake, why="trigger said ignore" if ignored else "schedule"))

    async def _next_cron_time(self) -> datetime | None:
        """The cron's next time after now (local activity ``task.next_wake``); None after failing the
        task with reason ``invalid_schedule`` (a malformed cron, or one that never fires)."""
        cron = self._config.schedule.cron or ""
        try:
            arg = NextWakeInput(cron=cron, after=workflow.now())
            summary = f"next time of cron {cron}"
            return await options.TASK_NEXT_WAKE.execute(
                arg, local=self._local_activities, summary=summary, result_type=datetime
            )
        except (ActivityError, ApplicationError) as err:  # a local activity's failure may come bare
            self._fail("invalid_schedule", error_text(err))
            return None

    # ---------------------------------------------------------------- one session

    async def _run_session(self) -> None:
        number = self._state.sessions_started + 1
        session_id = task_session_id(self._config.task_id, number, workflow.uuid4().hex[:8])
        self._state.sessions_started = number
        self._state.running_session = session_id
        remaining = self._state.budget.remaining(self._spend_now())
        session_config = SessionConfig(
            session_id=session_id,
            owner=self._config.owner,
            workspace=self._config.workspace,
            profile=self._config.profile,
            script=self._config.script,
            tools=self._config.tools,
            approval=self._config.approval,
            max_rounds_per_turn=self._config.max_rounds_per_session,
            sandbox=self._config.sandbox,
            network=self._config.network,
            interactive=False,
            operators=list(self._config.operators),
            tool_task_queue=self._config.tool_task_queue,
            mcp_servers=list(self._config.mcp_servers),
            title=f"task {self._config.task_id} · session {number}",
            budget=None if self._state.budget.is_unbounded() else remaining,
            prompt=parts.orientation_prompt(self._config, self._state, number),
            ends_after_turn=True,
            parent=SessionParent(id=self._config.task_id, number=number),
        )
        self._emit(AutonomousTaskSessionStarted(session_id=session_id, number=number))
        self._set_status("running")
        await self._flush()
        result: SessionResult | None = None
        error: str | None = None
        cancelled = False
        try:
            handle = await self._start_session(session_config, number)
        except WorkflowAlreadyStartedError:
            self._state.running_session = None
            await self._session_ended(number, session_id, None, f"a workflow with session id {session_id} already exists", False)
            return
        self._child = handle
        await workflow.wait_condition(lambda: handle.done() or self._cancel is not None)
        if not handle.done():
            handle.cancel()  # cancel: the session ends (Canceled) before the task records its end
            self._cancelled_session = session_id
        try:
            result = await handle
        except ChildWorkflowError as err:
            cancelled = isinstance(err.cause, CancelledError)
            error = error_text(err)
        except asyncio.CancelledError:
            cancelled = True  # the task's own cancellation reached the session first
            error = "cancelled"
        finally:
            self._child = None
            self._state.running_session = None
        await self._session_ended(number, session_id, result, error, cancelled)

    async def _start_session(self, session_config: SessionConfig, number: int) -> workflow.ChildWorkflowHandle:
        """Start session ``number`` as a child workflow; raises ``WorkflowAlreadyStartedError`` when its id is taken."""
        return await workflow.start_child_workflow(
            SESSION_WORKFLOW,
            SessionInput(config=session_config),
            id=session_workflow_id(session_config.session_id),
            result_type=SessionResult,
            task_timeout=SESSION_TASK_TIMEOUT,
            # An ended session is not restarted under its id (as client starts: client/_starts.py).
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"task {self._config.task_id} · session {number} of {self._state.max_sessions}",
            static_details=f"goal: {parts.cut(self._state.goal, 300)}",
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(SESSION_OWNER, self._config.owner), SearchAttributePair(SESSION_STATUS, "idle")]
                + (console.child_session_attributes(session_config.profile) if self._console else [])
            ),
        )

    async def _session_ended(
        self, number: int, session_id: str, result: SessionResult | None, error: str | None, cancelled: bool
    ) -> None:
        now = workflow.now()
        outcome = result.outcome if result is not None else None
        spend = (result.spend or Spend(usage=result.usage)) if result is not None else Spend()
        status = outcome.status if outcome is not None else ("cancelled" if cancelled else "failed")
        if outcome is not None and outcome.error:
            error = outcome.error
        parts.add_receipt(self._state, UsageReceipt(number=number, session_id=session_id, spend=spend, at=now), now)
        self._emit(AutonomousTaskSessionEnded(session_id=session_id, number=number, status=status, spend=spend, error=error))
        if self._cancel is not None:
            return  # the task is ending: its cancel records the rest
        answer = (outcome.answer or "") if outcome is not None else ""
        accepted, remaining = False, ""
        if status == "completed" or (status in ("round_limit", "failed") and self._config.acceptance.command):
            # A session that stopped early may still have done the work: the command can tell.
            accepted, remaining = await self._check_acceptance(number, session_id, answer, reviewed=status == "completed")
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
        self._checkpoint_unwritten = checkpoint
        if accepted:
            self._state.status = "completed"
            self._emit(AutonomousTaskCompleted(sessions=number, spend=self._spend_now()))
        elif status == "cancelled":
            self._pause(None, f"session {session_id} was cancelled")
        elif self._budget_crossed():
            pass
        elif self._state.sessions_started >= self._state.max_sessions:
            self._fail("max_sessions", f"all {self._state.max_sessions} sessions ran and the goal was not accepted")
        else:
            if self._state.status == "running":
                self._state.status = "waiting"  # a pause that came during the session stays
            self._state.continue_now = status == "round_limit"
            if self._state.continue_now:
                self._state.next_wake = workflow.now()
            else:
                await self._schedule_next()
        await self._flush()

    async def _check_acceptance(self, number: int, session_id: str, answer: str, *, reviewed: bool) -> tuple[bool, str]:
        """Run the acceptance command and/or (``reviewed``: the session gave a final answer) the
        reviewer; (accepted, what remains). A check that is due but cannot be asked (a review of a
        session without a final answer) does not pass."""
        acceptance = self._config.acceptance
        passed, remaining = True, []
        if acceptance.command:
            try:
                check = await workflow.execute_activity(
                    options.TASK_CHECK_COMMAND.name,
                    self._command_input(number, acceptance.command, acceptance.timeout_seconds),
                    result_type=CommandCheckResult,
                    task_queue=self._config.tool_task_queue or workflow.info().task_queue,
                    **options.TASK_CHECK_COMMAND.options(
                        summary=f"acceptance: {parts.cut(acceptance.command, 80)}",
                        start_to_close=acceptance.timeout_seconds + 30,
                        heartbeat_timeout=COMMAND_HEARTBEAT_SECONDS,
                    ),
                )
                detail = f"exit {check.exit_code}" if check.exit_code is not None else "timed out" if check.timed_out else "did not run"
                detail += f": {parts.cut(check.output, 1000)}" if check.output else ""
                ok = check.passed
            except ActivityError as err:
                ok, detail = False, f"the check could not run: {error_text(err)}"
            self._emit(AutonomousTaskAcceptanceChecked(number=number, kind="command", passed=ok, detail=detail))
            passed = passed and ok
            if not ok:
                remaining.append(f"`{acceptance.command}` did not pass ({detail})")
        if (acceptance.review or not acceptance.command) and not reviewed:
            passed = False
            remaining.append("no final answer for the reviewer to judge")
        elif acceptance.review or not acceptance.command:
            criteria = list(self._state.criteria) + ([acceptance.review] if acceptance.review else [])
            index = self._state.reviews
            self._state.reviews += 1
            try:
                verdict = await workflow.execute_activity(
                    options.TASK_REVIEW.name,
                    ReviewInput(
                        task_id=self._config.task_id, session_id=session_id,
                        profile=self._config.reviewer_profile or self._config.profile, script=self._config.script,
                        goal=self._state.goal, criteria=criteria, answer=answer, review_index=index,
                    ),
                    result_type=ReviewVerdict,
                    **options.TASK_REVIEW.options(
                        summary=f"acceptance review of session {number}", start_to_close=REVIEW_SECONDS,
                        heartbeat_timeout=COMMAND_HEARTBEAT_SECONDS,
                    ),
                )
                now = workflow.now()
                parts.add_receipt(
                    self._state,
                    UsageReceipt(
                        number=number, session_id=session_id, kind="review",
                        spend=Spend(usage=verdict.usage, cost_usd=verdict.cost_usd), at=now,
                    ),
                    now,
                )
                ok = verdict.passed
                detail = "; ".join([verdict.summary, *verdict.findings]).strip("; ")
            except ActivityError as err:
                ok, detail = False, f"the review could not run: {error_text(err)}"
            self._emit(AutonomousTaskAcceptanceChecked(number=number, kind="review", passed=ok, detail=parts.cut(detail, 2000)))
            passed = passed and ok
            if not ok:
                remaining.append(detail or "the reviewer did not accept the result")
        return passed, "\n".join(remaining)

    async def _evaluate_trigger(self) -> TriggerVerdict:
        command = self._config.schedule.trigger_command or ""
        try:
            return await workflow.execute_activity(
                options.TASK_EVALUATE_TRIGGER.name,
                self._command_input(self._state.sessions_started + 1, command, 120.0),
                result_type=TriggerVerdict,
                task_queue=self._config.tool_task_queue or workflow.info().task_queue,
                **options.TASK_EVALUATE_TRIGGER.options(summary=f"trigger: {parts.cut(command, 80)}", start_to_close=150.0, heartbeat_timeout=COMMAND_HEARTBEAT_SECONDS
                ),
            )
        except ActivityError as err:
            return TriggerVerdict(decision="ignore", reason=f"the trigger could not run: {error_text(err)}")

    def _command_input(self, number: int, command: str, timeout: float) -> TaskCommandInput:
        return TaskCommandInput(
            task_id=self._config.task_id, session_number=number, workspace=self._config.workspace, command=command,
            sandbox=self._config.sandbox, network=self._config.network, timeout_seconds=timeout,
        )

    # ---------------------------------------------------------------- budget, status, ending

    def _spend_now(self) -> Spend:
        return parts.spend_now(self._state, workflow.now())

    def _budget_crossed(self) -> bool:
        """Stop at ``budget_exceeded`` when the task's spend has reached a limit."""
        crossing = self._state.budget.crossed(self._spend_now())
        if crossing is None:
            return False
        self._state.budget_crossing = crossing
        self._state.status = "budget_exceeded"
        self._emit(AutonomousTaskBudgetExceeded(crossing=crossing))
        return True

    def _fail(self, reason: str, error: str) -> None:
        self._state.status = "failed"
        self._state.failure_reason = reason
        self._state.failure = error
        self._emit(AutonomousTaskFailed(reason=reason, error=error, sessions=self._state.sessions_started))

    def _pause(self, principal: str | None, reason: str | None) -> None:
        self._state.status = "paused"
        self._state.paused_by = principal or "session cancelled"
        self._emit(AutonomousTaskPaused(principal=principal, reason=reason))

    async def _end_cancelled(self, request: TaskControlInput) -> None:
        """Cancel the running session (waiting for it to end), record the cancel and write it all."""
        child = self._child
        if child is not None and not child.done():
            child.cancel()
            try:
                await child
            except (ChildWorkflowError, asyncio.CancelledError):
                pass
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

    def _result(self) -> AutonomousTaskResult:
        return AutonomousTaskResult(
            task_id=self._config.task_id, status=self._state.status, sessions=self._state.sessions_started,
            spend=self._spend_now(), checkpoint=self._state.checkpoints[-1] if self._state.checkpoints else None,
            failure=self._state.failure, failure_reason=self._state.failure_reason,
        )

    def _emit(self, event: Event) -> None:
        self._journal.emit(event, workflow.now())

    def _set_status(self, status: TaskStatus) -> None:
        """Record ``status``, show the current details and write the search attributes that changed
        (``console-v1``: all of the task's; before it, ``AgentSessionStatus`` alone)."""
        self._state.status = status
        workflow.set_current_details(parts.current_details(self._config, self._state, workflow.now()))
        if self._console:
            listing = console.Listing(
                kind="task", owner=self._config.owner, status=status, profile=self._config.profile,
                spend_usd=console.spend_or_none(self._state.spend.cost_usd),
            )
            updates = console.changed(listing, workflow.info().typed_search_attributes)
            if updates:
                workflow.upsert_search_attributes(updates)
        elif status != self._status_written:
            self._status_written = status
            workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])

    async def _flush(self) -> None:
        """Write staged events, the latest checkpoint and the task's row to the store (activity
        ``task.record``; a local one in runs from before ``regular-activities-v1``)."""
        async with self._write_lock:
            await self._write()

    async def _write(self) -> None:
        self._set_status(self._state.status)
        events = self._journal.take()
        checkpoint = self._checkpoint_unwritten
        record = TaskRecordInput(
            task_id=self._config.task_id, owner=self._config.owner, goal=self._state.goal, status=self._state.status,
            workspace=self._config.workspace, spend=self._spend_now(), events=events, checkpoint=checkpoint,
        )
        summary = f"store {len(events)} task events"
        await options.TASK_RECORD.execute(record, local=self._local_activities, summary=summary)
        self._journal.written(events)
        if self._checkpoint_unwritten is checkpoint:
            self._checkpoint_unwritten = None

    async def _continue_as_new(self) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._flush()
        self._state.run += 1
        workflow.continue_as_new(AutonomousTaskInput(config=self._config, state=self._state))

    # ---------------------------------------------------------------- updates

    def _check_principal(self, principal: str, reason: str | None, verb: str) -> None:
        refusal = standing_refusal(self._config.owner, self._config.operators, principal, reason, verb, f"task {self._config.task_id}")
        if refusal is not None:
            raise rejected(refusal)

    def _check_open(self, verb: str) -> None:
        if self._state.status in TERMINAL_TASK_STATUSES:
            raise rejected(f"task {self._config.task_id} has ended ({self._state.status}): it cannot {verb}")
        if self._cancel is not None:
            raise rejected(f"task {self._config.task_id} is being cancelled")

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
        """Start no further session (a running one finishes and checkpoints) until ``resume``."""
        self._pause(input.principal, input.reason)
        return await self._answer()

    @pause.validator
    def _validate_pause(self, input: TaskControlInput) -> None:
        self._check_principal(input.principal, input.reason, "pause")
        self._check_open("be paused")
        if self._state.status == "paused":
            raise rejected(f"task {self._config.task_id} is already paused")

    @workflow.update
    async def resume(self, input: TaskControlInput) -> TaskStatusView:
        """Go on after a pause: the next session runs at the scheduled wake (now, if that has passed)."""
        self._state.status = "waiting"
        self._state.paused_by = None
        self._emit(AutonomousTaskResumed(principal=input.principal, reason=input.reason))
        return await self._answer()

    @resume.validator
    def _validate_resume(self, input: TaskControlInput) -> None:
        self._check_principal(input.principal, input.reason, "resume")
        self._check_open("be resumed")
        if self._state.status != "paused":
            raise rejected(f"task {self._config.task_id} is not paused (it is {self._state.status})")

    @workflow.update
    async def nudge(self, input: TaskControlInput) -> TaskStatusView:
        """Wake now instead of at ``next_wake``."""
        self._nudged = input
        self._emit(AutonomousTaskNudged(principal=input.principal, reason=input.reason))
        return await self._answer()

    @nudge.validator
    def _validate_nudge(self, input: TaskControlInput) -> None:
        self._check_principal(input.principal, input.reason, "nudge")
        self._check_open("be nudged")
        if self._state.status != "waiting":
            raise rejected(f"task {self._config.task_id} is {self._state.status}: only a waiting task can be nudged")
        if self._nudged is not None:
            raise rejected(f"task {self._config.task_id} is already waking")

    @workflow.update
    async def cancel(self, input: TaskControlInput) -> TaskStatusView:
        """End the task: a running session is cancelled first; answers once the task has ended."""
        self._cancel = input
        await workflow.wait_condition(lambda: self._state.status == "cancelled")
        return self._view()

    @cancel.validator
    def _validate_cancel(self, input: TaskControlInput) -> None:
        self._check_principal(input.principal, input.reason, "cancel")
        self._check_open("be cancelled")

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
        self._check_principal(input.principal, input.reason, "amend the goal of")
        self._check_open("be amended")
        if not input.goal.strip():
            raise rejected("goal is empty")

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
        self._check_principal(input.principal, input.reason, "raise the budget of")
        self._check_open("have its budget raised")
        lowered = self._state.budget.lowered_by(input.budget)
        if lowered:
            raise rejected(f"raise_budget cannot lower a limit of task {self._config.task_id}: {', '.join(lowered)}")
        if input.max_sessions is not None and input.max_sessions < self._state.max_sessions:
            raise rejected(
                f"raise_budget cannot lower max_sessions of task {self._config.task_id} "
                f"({self._state.max_sessions} -> {input.max_sessions})"
            )
        if input.max_sessions is not None and input.max_sessions < self._state.sessions_started:
            raise rejected(
                f"max_sessions {input.max_sessions} is below the {self._state.sessions_started} sessions task "
                f"{self._config.task_id} already ran"
            )

    # ---------------------------------------------------------------- queries

    @workflow.query
    def status(self) -> TaskStatusView:
        return self._view()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return self._journal.page(input.since_seq, input.limit)
