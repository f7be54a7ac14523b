"""One turn of a session: its per-turn fields (``Turn``) and its rounds (``TurnLoop``).

A ``Turn`` is built when a queued message starts and dropped when its end is recorded, so a
new turn starts from fresh fields by construction. ``TurnLoop`` runs it: the user message,
the budget check, the MCP listing, then rounds of one model call and the tool calls it asked
for, until an answer, the round limit, a spent budget, an advisor's rejection or a cancel.
Workflow code only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

from agentrt.schemas import (
    AssistantMessageCompleted,
    BudgetCrossing,
    BudgetExceededEvent,
    CancelTurnInput,
    Message,
    ModelCallInput,
    ModelCallResult,
    OutputSpec,
    OutputValidationFailed,
    QueuedOperation,
    SessionCancelled,
    ToolCall,
    ToolInvocationFailed,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
    UserMessageAdded,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import context
from agentrt.workflows._errors import (
    CallRefused, ModelCallFailed, TurnCancelled, call_refusal, context_overflow, error_code, error_text,
)
from agentrt.workflows._fused_rounds import FusedRounds, context_assembled, request_started
from agentrt.workflows._mcp_steps import Mcp
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_steps import ToolCalls
from agentrt.workflows._trajectory import TrajectoryRecorder

# A trajectory step under way (an advisor review, approval waits): (round, action, input, started, call id).
StepInFlight = tuple[int, str, dict[str, Any], Any, "str | None"]


class Turn:
    """The fields of one running turn, and the records it adds to its own trajectory."""

    def __init__(self, run: SessionRun, queued: QueuedOperation) -> None:
        self.run = run
        self.id = queued.op_id
        self.principal = queued.principal
        self.request = queued.text  # the user message (the advisor sees its start)
        self.task: asyncio.Task[TurnOutcome] | None = None  # the task that runs the turn, until it has ended
        self.cancel_request: CancelTurnInput | None = None
        self.cancel_announced = False  # a CancelRequested event was emitted for this turn
        self.round = 0
        self.usage = Usage()  # tokens of the turn's model calls so far (a cancelled turn's outcome reports them)
        self.tool_calls = 0  # tool calls its replies asked for so far
        # Trajectory steps under way; a cancel records them as cancelled.
        self.steps_in_flight: list[StepInFlight] = []
        self.tool_listing: str | None = None  # the digest of the turn's MCP tool specs (mcp.list_tools)
        self.mcp_failures: dict[str, str] = {}  # the servers the turn could not list, and why
        self.mcp_tokens = 0  # estimated tokens of the turn's MCP tool specs (each model call carries them)
        self.advisor_usage = Usage()  # tokens of the turn's advisor reviews
        self.trajectory = TrajectoryRecorder()
        # The turn's output spec (its message's, else the session's; structured-output-v1) and the
        # invalid answers it has had.
        spec = queued.output or run.config.output
        self.output: OutputSpec | None = spec if spec is not None and run.gen.structured_output() else None
        self.invalid_answers = 0

    def fail_call(
        self, call: ToolCall, reason: Any, error: str, position: int | None = None, *, started: Any = None
    ) -> None:
        """Record a call that did not run (or failed) and give the model the error as the call's result."""
        run = self.run
        if position is None:
            position = run.journal.take_position()
        message = Message(role="tool", tool_call_id=call.id, name=call.name, text=f"error: {error}", is_error=True)
        run.stage_message(position, self.id, message)
        run.emit(ToolInvocationFailed(turn_id=self.id, call_id=call.id, tool=call.name, reason=reason, error=error, position=position))
        arguments = call.arguments if call.arguments is not None else {"arguments_raw": call.arguments_raw}
        self.record_step(self.round, call.name, arguments, reason, error, started, call_id=call.id)

    def record_step(
        self,
        round_number: int,
        action: str,
        action_input: dict[str, Any] | None,
        outcome: str,
        text: str,
        started: Any,
        *,
        call_id: str | None = None,
    ) -> None:
        """Add a step to the turn's trajectory (``trajectory-v1``); ``started`` (a
        ``workflow.now()``) gives its duration, None a step that took no time."""
        event = self.trajectory.step(self.id, round_number, action, action_input, outcome, text, started, workflow.now(), call_id=call_id)
        if event is not None:
            self.run.emit(event)

    def say(self, round_number: int, text: str) -> None:
        """Add an assistant message of the runtime's own (no model call) to the turn's transcript."""
        position = self.run.journal.take_position()
        self.run.stage_message(position, self.id, Message(role="assistant", text=text))
        self.run.emit(
            AssistantMessageCompleted(turn_id=self.id, round=round_number, text=text, tool_calls=0, usage=Usage(), position=position)
        )


class TurnLoop:
    """Runs a session's turns over its run, its tool calls and its MCP steps."""

    def __init__(self, run: SessionRun, tool_calls: ToolCalls, mcp: Mcp) -> None:
        self.run = run
        self.tool_calls = tool_calls
        self.mcp = mcp
        self.fused = FusedRounds(run)

    async def play(self, queued: QueuedOperation) -> TurnOutcome:
        """Run the queued message's turn to its outcome; a cancelled turn's outcome is ``cancelled``."""
        run = self.run
        turn = run.turn = Turn(run, queued)
        turn.task = asyncio.create_task(self._run(turn))
        watcher = asyncio.create_task(self._cancel_when_requested(turn.task))
        try:
            return await turn.task
        except (asyncio.CancelledError, TurnCancelled, ActivityError):
            # A cancelled turn surfaces as CancelledError, TurnCancelled or the ActivityError
            # of whatever activity it was awaiting; anything else is the workflow's own cancellation.
            if not run.cancel_requested():
                raise
            run.announce_workflow_cancel()
            return self.cancelled_outcome(turn)
        finally:
            watcher.cancel()
            turn.task = None
            self.mcp.end_turn()

    async def _cancel_when_requested(self, task: asyncio.Task[TurnOutcome]) -> None:
        """Cancel the turn once ``cancel_turn`` or ``archive`` asked for it.

        Handlers only set a flag: it is acted on here, when conditions are checked after all
        of a workflow task's jobs are applied, so the turn stops at the same step whatever
        order the signal and an activity result arrived in (replay-safe).
        """
        await workflow.wait_condition(self.run.cancel_requested)
        self.run.announce_workflow_cancel()
        if not task.done():
            task.cancel()

    def cancelled_outcome(self, turn: Turn) -> TurnOutcome:
        run = self.run
        principal, reason = run.cancel_reason()
        for round_number, action, action_input, started, call_id in turn.steps_in_flight:
            turn.record_step(round_number, action, action_input, "cancelled", "the turn was cancelled", started, call_id=call_id)
        turn.steps_in_flight = []
        answered = run.approvals.close_turn(turn.id)
        if run.gen.turn_control:
            self.tool_calls.owe_reconciles(answered)
        for call in run.journal.unanswered_calls(turn.id):
            turn.fail_call(call, "cancelled", "the turn was cancelled before this call finished")
        run.emit(SessionCancelled(turn_id=turn.id, principal=principal, reason=reason))
        return TurnOutcome(
            turn_id=turn.id,
            status="cancelled",
            error=f"cancelled{' by ' + principal if principal else ''}" + (f": {reason}" if reason else ""),
            rounds=turn.round, tool_calls=turn.tool_calls, usage=turn.usage,
        )

    def finish(self, turn: Turn, outcome: TurnOutcome) -> None:
        """Record the turn's end (its trajectory's too); the session is idle again."""
        assert outcome.status != "pending"
        run = self.run
        if turn.advisor_usage != Usage():
            outcome.usage = outcome.usage + turn.advisor_usage  # the turn's usage counts its advisor reviews
        completed = turn.trajectory.complete(outcome)
        if completed is not None:
            run.emit(completed)
        run.emit(
            TurnEnded(
                turn_id=outcome.turn_id, status=outcome.status, rounds=outcome.rounds, error=outcome.error,
                usage=outcome.usage, error_type=outcome.error_type, output=outcome.output,
            )
        )
        run.state.turns_completed += 1
        run.turn, run.last_round = None, turn.round
        run.set_status("idle")

    # ---------------------------------------------------------------- the rounds

    async def _run(self, turn: Turn) -> TurnOutcome:
        run, turn_id = self.run, turn.id
        await run.hold_while_paused()  # paused: the turn starts on resume (a cancel still ends it)
        run.set_status("running")
        run.emit(TurnStarted(turn_id=turn_id))
        if run.gen.trajectories:
            run.emit(turn.trajectory.start(turn_id))
        position = run.journal.take_position()
        run.emit(UserMessageAdded(turn_id=turn_id, principal=turn.principal, text=turn.request, position=position))
        run.stage_message(position, turn_id, Message(role="user", text=turn.request))
        usage, calls = Usage(), 0
        crossing = run.budget_crossing()
        if crossing is not None:
            return self._budget_exceeded(turn, 0, crossing, calls, usage)  # no model call while it is spent
        if run.config.mcp_servers:
            await self.mcp.list_tools(turn)
        round_number = 0
        while round_number < run.config.max_rounds_per_turn:
            round_number += 1
            turn.round = round_number
            await run.before_call()
            try:
                reply = await self._call_model(turn, round_number)
            except CallRefused as refused:  # not sent: its prompt would pass the budget, or a quota is spent
                return self._budget_exceeded(turn, round_number, refused.crossing, calls, usage, refused=refused)
            except ModelCallFailed as failure:
                return TurnOutcome(
                    turn_id=turn_id, status="failed", error=failure.error, error_type=failure.error_type,
                    rounds=round_number, tool_calls=calls, usage=usage,
                )
            if reply.fused or reply.call_again:  # rounds the call ran itself (fused-rounds-v1)
                accepted = self.fused.accept(turn, round_number, reply)
                usage, calls = usage + accepted.usage, calls + accepted.calls
                if accepted.reply is None:
                    round_number = turn.round = accepted.round_number - 1
                    continue
                reply, round_number = accepted.reply, accepted.round_number
                turn.round = round_number
            usage = turn.usage = usage + reply.usage
            run.add_usage(reply.usage)
            assistant = Message(role="assistant", text=reply.text, tool_calls=reply.tool_calls)
            run.stage_message(reply.position, turn_id, assistant)
            run.emit(
                AssistantMessageCompleted(
                    turn_id=turn_id, round=round_number, text=reply.text, tool_calls=len(reply.tool_calls),
                    usage=reply.usage, position=reply.position, reasoning_chars=reply.reasoning_chars,
                )
            )
            turn.tool_calls += len(reply.tool_calls)  # asked for: a cancelled turn reports them too
            if reply.tool_calls and run.stop_after_step():
                for call in reply.tool_calls:
                    turn.fail_call(call, "cancelled", "the turn was cancelled before this call ran")
                raise TurnCancelled()
            if not reply.tool_calls and turn.output is not None:
                checked = self._checked_answer(turn, round_number, reply, calls, usage)
                if checked is None:
                    continue  # the errors went back to the model: another round
                return checked
            if not reply.tool_calls:
                return TurnOutcome(
                    turn_id=turn_id, status="completed", answer=reply.text, rounds=round_number, tool_calls=calls, usage=usage
                )
            calls += len(reply.tool_calls)
            run.count_tool_calls(len(reply.tool_calls))
            crossing = run.budget_crossing()
            if crossing is not None:
                return self._budget_exceeded(turn, round_number, crossing, calls, usage, reply.tool_calls)
            rejection = await self.tool_calls.handle(turn, round_number, reply.tool_calls)
            if rejection is not None:
                return self._advisor_blocked(turn, round_number, rejection, calls, usage)
            crossing = run.budget_crossing()
            if crossing is not None:
                return self._budget_exceeded(turn, round_number, crossing, calls, usage)
        limit = run.config.max_rounds_per_turn
        if run.gen.round_limit_message():
            # The transcript says why the turn stopped, so the next turn (and a reader) knows.
            turn.say(
                limit,
                f"I stopped here: this turn reached its limit of {limit} model calls "
                "(max_rounds_per_turn) before I could give a final answer. Send a message to let me continue.",
            )
        return TurnOutcome(
            turn_id=turn_id, status="round_limit", error=f"no final answer after {limit} rounds", rounds=limit,
            tool_calls=calls, usage=usage,
        )

    def _checked_answer(
        self, turn: Turn, round_number: int, reply: ModelCallResult, calls: int, usage: Usage
    ) -> TurnOutcome | None:
        """A structured turn's final answer, as the model activity checked it: the completed outcome
        with its object; or, for an invalid answer, ``OutputValidationFailed`` and either the errors
        staged as a user message for another try (None) or, at the spec's ``max_attempts``, the
        ``output_invalid`` outcome that keeps the answer."""
        assert turn.output is not None
        if reply.output is not None and not reply.output_problems:
            return TurnOutcome(
                turn_id=turn.id, status="completed", answer=reply.text, output=reply.output, rounds=round_number,
                tool_calls=calls, usage=usage,
            )
        run, spec = self.run, turn.output
        errors = reply.output_problems or ["(answer): the worker did not check it"]
        turn.invalid_answers += 1
        last = turn.invalid_answers >= spec.max_attempts
        position = None if last else run.journal.take_position()
        run.emit(
            OutputValidationFailed(
                turn_id=turn.id, round=round_number, attempt=turn.invalid_answers, max_attempts=spec.max_attempts,
                errors=errors, position=position,
            )
        )
        turn.record_step(round_number, "output_validation", {"attempt": turn.invalid_answers}, "invalid", "; ".join(errors), None)
        if position is None:
            return TurnOutcome(
                turn_id=turn.id, status="output_invalid", answer=reply.text, error_type="OutputInvalid",
                error=f"the answer did not match the output schema after {turn.invalid_answers} attempts: " + "; ".join(errors),
                rounds=round_number, tool_calls=calls, usage=usage,
            )
        run.stage_message(position, turn.id, Message(role="user", text=output_feedback(errors)))
        return None

    def _budget_exceeded(
        self, turn: Turn, round_number: int, crossing: BudgetCrossing, calls: int, usage: Usage, unrun: list[ToolCall] | None = None,
        *, refused: CallRefused | None = None,
    ) -> TurnOutcome:
        """End the turn at a crossed budget limit: the reply's calls that will not run are recorded
        as cancelled (their results say why), ``BudgetExceeded`` is emitted, and an assistant
        message tells the transcript why the turn stopped (the next turn's model reads it).
        ``refused``: the model call was refused before it was sent, by the session's budget or
        (``error_type`` ``QuotaExceeded``) by its tenant's quota."""
        for call in unrun or []:
            turn.fail_call(call, "cancelled", f"not run: the session's budget is spent ({crossing.text()})")
        self.run.emit(BudgetExceededEvent(turn_id=turn.id, crossing=crossing))
        error, error_type = crossing.text(), "BudgetExceeded"
        if refused is not None and refused.error_type == "QuotaExceeded":
            error, error_type = refused.text, refused.error_type
            turn.say(round_number, f"I stopped here: {error}.")
        else:
            spent = "would be passed by my next model call" if crossing.estimated is not None else "is spent"
            turn.say(
                round_number,
                f"I stopped here: the session's budget {spent} ({crossing.text()}). "
                "The budget must be raised (raise_budget) before I can continue.",
            )
        return TurnOutcome(
            turn_id=turn.id, status="budget_exceeded", error=error, error_type=error_type,
            rounds=round_number, tool_calls=calls, usage=usage, crossing=crossing if refused is not None else None,
        )

    def _advisor_blocked(self, turn: Turn, round_number: int, reason: str, calls: int, usage: Usage) -> TurnOutcome:
        """End the turn after the advisor rejected a batch: an assistant message says why (the
        next turn's model reads it too), and the caller gets a completed turn, not an error."""
        text = (
            f"I did not run the tool calls I proposed: an advisor review rejected them ({reason}). "
            "Tell me how you want to proceed."
        )
        turn.say(round_number, text)
        turn.trajectory.failure = f"advisor rejected: {reason}"
        return TurnOutcome(turn_id=turn.id, status="completed", answer=text, rounds=round_number, tool_calls=calls, usage=usage)

    async def _call_model(self, turn: Turn, round_number: int) -> ModelCallResult:
        """One model activity; raises ``ModelCallFailed`` once its retries are spent."""
        run, turn_id = self.run, turn.id
        config, state = run.config, run.state
        reply_position = run.journal.take_position()
        plan = request_started(run, turn, round_number, reply_position)
        fuse = self.fused.spec(round_number)
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · waiting for model `{config.profile}`")
        writes = run.writes_for_call()
        try:
            reply = await workflow.execute_activity(
                options.MODEL_CALL.name,
                ModelCallInput(
                    session_id=config.session_id,
                    turn_id=turn_id,
                    round=round_number,
                    profile=config.profile,
                    script=config.script,
                    system_prompt=config.system_prompt,
                    system_prompt_mode=config.system_prompt_mode,
                    tool_names=sorted(self.mcp.builtin_tools()),  # a turn's MCP tools travel by tool_listing
                    upto_position=reply_position,
                    reply_position=reply_position,
                    plan=plan,
                    reply_index=state.assistant_messages if run.gen.context else None,
                    store_writes=writes,
                    tool_listing=turn.tool_listing,
                    skills=state.skills,
                    budget_note=run.budget_note(),
                    output=turn.output,
                    budget=config.budget,
                    spend=run.spend() if config.budget is not None else None,
                    script_session=config.parent.number if config.parent is not None else None,
                    script_node=config.parent.node if config.parent is not None else None,
                    fuse=fuse,
                ),
                result_type=ModelCallResult,
                task_queue=config.model_task_queue,
                **options.MODEL_CALL.options(
                    summary=f"model {config.profile} · {turn_id} · round {round_number}",
                    start_to_close=config.model_timeout_seconds,
                    heartbeat_timeout=config.heartbeat_timeout_seconds,
                ),
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) or run.stop_after_step():
                raise TurnCancelled() from err
            refused = call_refusal(err)
            if refused is not None:
                raise refused from err
            context_assembled(run, turn, round_number, context_overflow(err), overflow=True)
            raise ModelCallFailed(error_text(err), error_code(err)) from err
        run.call_wrote(writes)
        context_assembled(run, turn, round_number, reply.fused[0].context if reply.fused else reply.context)
        state.assistant_messages += 1
        if plan is not None:
            first = reply.fused[0].usage if reply.fused else reply.usage
            context.observe(state.context, plan.raw_tokens, first.input_tokens)
        return reply


def output_feedback(errors: list[str]) -> str:
    """The user message that gives an invalid structured answer's errors back to the model."""
    listed = "\n".join(f"- {error}" for error in errors)
    return (
        "Your final answer does not match the required output schema:\n"
        f"{listed}\n"
        "Give your final answer again: only a JSON object that matches the schema, with these errors fixed."
    )
