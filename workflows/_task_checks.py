"""What an autonomous task asks outside itself: when its schedule wakes it next (a cron's next
time), the trigger command before a wake, the workspace's git commit before a session, and the acceptance check after a session (a command in
the sandbox, a reviewer model).

``TaskChecks`` runs the activities (``task.next_wake``, ``task.evaluate_trigger``,
``task.workspace_commit``, ``task.check_command``, ``task.review``), records what they find in the task's journal
(``AutonomousTaskWaiting``, ``AutonomousTaskAcceptanceChecked``, ``AutonomousTaskFailed`` for a
cron that never fires) and adds a review's spend to the task's. Workflow code only; held by
``AutonomousTaskWorkflow``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from agentrt.schemas import (
    AutonomousTaskAcceptanceChecked,
    AutonomousTaskWaiting,
    CommandCheckResult,
    Event,
    NextWakeInput,
    ReviewInput,
    ReviewVerdict,
    Spend,
    TaskCommandInput,
    TaskConfig,
    TaskState,
    TriggerVerdict,
    UsageReceipt,
    WorkspaceCommit,
    WorkspaceCommitInput,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _task_parts as parts
from agentrt.workflows._errors import error_text
from agentrt.workflows._journal import Journal

# How soon a lost worker's acceptance check, trigger or review is retried elsewhere (seconds);
# and the bound on one review attempt (seconds).
COMMAND_HEARTBEAT_SECONDS = 10.0
REVIEW_SECONDS = 600.0


class TaskChecks:
    """The trigger and acceptance checks of the task with ``config`` and ``state``; what they
    find is recorded in ``journal``."""

    def __init__(self, config: TaskConfig, state: TaskState, journal: Journal, *, local_activities: bool) -> None:
        self._config = config
        self._state = state
        self._journal = journal
        self._local_activities = local_activities  # the cron lookup: a local activity before regular-activities-v1

    async def schedule_next(self, *, ignored: bool = False) -> None:
        """Set ``next_wake`` from the schedule (now, after an interval, or the cron's next time)."""
        now = workflow.now()
        schedule = self._config.schedule
        if schedule.cron is not None:
            cron_wake = await self.next_cron_time()
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

    async def next_cron_time(self) -> datetime | None:
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
            self._emit(parts.failed(self._state, "invalid_schedule", error_text(err)))
            return None

    async def trigger(self) -> TriggerVerdict:
        """The trigger command's verdict; ``ignore`` (with why) when it could not run."""
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

    async def workspace_commit(self) -> str | None:
        """The git commit the workspace is at (``task.workspace_commit``, where the task's commands
        run); None when it is no git repository, or the read could not run (a session starts anyway)."""
        try:
            found = await workflow.execute_activity(
                options.TASK_WORKSPACE_COMMIT.name,
                WorkspaceCommitInput(task_id=self._config.task_id, workspace=self._config.workspace),
                result_type=WorkspaceCommit,
                task_queue=self._config.tool_task_queue or workflow.info().task_queue,
                **options.TASK_WORKSPACE_COMMIT.options(summary="the workspace's git commit"),
            )
        except ActivityError:
            return None
        return found.commit

    async def acceptance(self, number: int, session_id: str, answer: str, *, reviewed: bool) -> tuple[bool, str]:
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
            ok, detail = await self._review(number, session_id, answer)
            passed = passed and ok
            if not ok:
                remaining.append(detail or "the reviewer did not accept the result")
        return passed, "\n".join(remaining)

    async def _review(self, number: int, session_id: str, answer: str) -> tuple[bool, str]:
        """The reviewer's verdict on ``answer`` (its spend added to the task's): (passed, findings)."""
        acceptance = self._config.acceptance
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
                task_queue=self._config.model_task_queue,
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
        return ok, detail

    def _command_input(self, number: int, command: str, timeout: float) -> TaskCommandInput:
        return TaskCommandInput(
            task_id=self._config.task_id, session_number=number, workspace=self._config.workspace, command=command,
            sandbox=self._config.sandbox, network=self._config.network, timeout_seconds=timeout,
        )

    def _emit(self, event: Event) -> None:
        self._journal.emit(event, workflow.now())
