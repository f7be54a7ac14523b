"""SessionWorkflow: a durable conversation whose turn loop survives worker and server crashes.

One workflow per session (id ``session-<session_id>``). Messages arrive through the
``send_message`` update and queue in an inbox; one turn runs at a time:

    model activity -> tool calls -> policy decision -> approval wait (signal)
    -> tool activities -> results back to the model -> ... -> final answer

The workflow holds one ``SessionState`` and continues as new with it as it is. Its pure
bookkeeping lives in plain classes over that state (``_inbox``, ``_approvals``,
``_journal``, ``_compaction``, ``_tool_calls``); this module keeps the run loop, the turn
loop, the handlers and continue-as-new. Content (messages, tool results) lives in the
store; activities get references (positions), so history grows with each round's new
content only.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from agentrt.schemas import (
    SEARCH_ATTRIBUTE_KEYS,
    SESSION_WORKFLOW,
    ArchiveInput,
    AssistantMessageCompleted,
    Budget,
    BudgetCrossing,
    BudgetExceededEvent,
    BudgetRaised,
    CancelIgnored,
    CancelRequested,
    CancelTurnInput,
    CompactOutcome,
    CompactRequest,
    ElicitationAnswer,
    Event,
    EventsPage,
    EventsQuery,
    MemoryAccepted,
    MemoryDecideInput,
    MemoryDecision,
    MemoryRejected,
    Message,
    ModelCallInput,
    ModelCallResult,
    ModelRequestStarted,
    OperatorActed,
    PermissionDecision,
    PermissionDecisionIgnored,
    ProfileInfo,
    QueuedOperation,
    RaiseBudgetInput,
    ReconcileDecision,
    SendMessageInput,
    SendMessageResult,
    SessionContinuedAsNew,
    SessionInput,
    SessionResult,
    SessionState,
    SessionStateView,
    SessionStatus,
    StoreAppendInput,
    SwitchModelInput,
    SwitchModelResult,
    ToolCall,
    TurnOutcome,
    TurnStarted,
    Usage,
    UserMessageAdded,
    WaitTurnInput,
    argument_problems,
    session_workflow_id,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _compaction as compaction
from agentrt.workflows import context
from agentrt.workflows._approvals import ApprovalBook, ignored_text
from agentrt.workflows._context_steps import ContextSteps
from agentrt.workflows._errors import (
    ModelCallFailed,
    TurnCancelled,
    error_code,
    error_text,
    rejected,
)
from agentrt.workflows._idempotency import SentKeys
from agentrt.workflows._inbox import FORGOTTEN_TURN, RECENT_OUTCOMES, Inbox
from agentrt.workflows._journal import EventJournal
from agentrt.workflows._tool_steps import ToolCallSteps
from agentrt.workflows._trajectory import TrajectoryRecorder
from agentrt.workflows.policy import PolicyEngine

# Patch ids. Histories recorded before a patch replay without the commands it added.
# context-window-v1: context planning, compaction, model switching and continue-as-new.
CONTEXT_PATCH = "context-window-v1"
# turn-control-v1: a cancel is re-checked after every model and tool call and ends the turn
# even when the call finished or failed meanwhile; a workflow cancellation cancels the turn
# and the queued ones; continue-as-new answers waiting ``wait_turn`` calls instead of waiting
# for them; a tool listing that keeps failing fails the session instead of retrying forever.
TURN_CONTROL_PATCH = "turn-control-v1"
# lean-rounds-v1: a round costs two activities and two workflow tasks, as bare Temporal does.
# Staged events and messages travel in the next model or tool call's input instead of a
# store.append activity of their own; the remaining store writes, tools.list,
# profiles.describe, effects.reconcile and fast read-only tools (``local_tools``) run as
# local activities; search attributes are written only when they change.
LEAN_ROUNDS_PATCH = "lean-rounds-v1"
# lean-start-v1: implies the three above, under one marker (each patch adds a marker and a
# TemporalChangeVersion upsert to every new session); tools and profile come from one
# session.prepare local activity; a session started with a message writes its config and
# first events with the first model call, and its owner with its first status; a workflow
# whose id is not session-<config.session_id> fails before it writes anything.
LEAN_START_PATCH = "lean-start-v1"
# trajectory-v1: each turn records its trajectory (TrajectoryStarted, a TrajectoryStepRecorded per
# tool invocation, advisor review and approval wait, TrajectoryCompleted). Asked when a run
# starts; runs recorded before it replay without these events, so their sequence numbers hold.
TRAJECTORY_PATCH = "trajectory-v1"
# A turn that reaches max_rounds_per_turn ends with an assistant message saying so.
ROUND_LIMIT_MESSAGE_PATCH = "round-limit-message-v1"
# regular-activities-v1: every activity of a run is a regular one (see _activity_options).
REGULAR_ACTIVITIES_PATCH = options.REGULAR_ACTIVITIES_PATCH
# Limits assumed for a session whose history predates CONTEXT_PATCH (tokens).
DEFAULT_PROFILE_LIMITS = (128_000, 4_096)
# The longest ``wait_turn`` timeout (seconds, ten years): a longer one fits no timer.
MAX_WAIT_TURN_SECONDS = 10 * 365 * 24 * 3600
# The reason of the SessionArchived that ends an ``ends_after_turn`` session after its turn.
ENDED_AFTER_TURN = "ended after its turn"

__all__ = ["FORGOTTEN_TURN", "RECENT_OUTCOMES", "SEARCH_ATTRIBUTE_KEYS", "SessionWorkflow", "workflow_id_for"]

workflow_id_for = session_workflow_id


# principal-required-v1: a cancel_turn signal without a principal is ignored (CancelIgnored,
# why "no_principal") like a stranger's; runs recorded before it applied such a cancel.
PRINCIPAL_PATCH = "principal-required-v1"
# stranger-limit-v1: a stranger's ignored decisions and cancels beyond the first
# MAX_RECORDED_STRANGER_EVENTS of a run are counted, not recorded as events.
STRANGER_LIMIT_PATCH = "stranger-limit-v1"
MAX_RECORDED_STRANGER_EVENTS = 20

# Not sandboxed: the sandbox re-imports a workflow's modules for every run and routes every
# activation and payload through its proxies, about half of a round's worker CPU. What it
# guards, the session's modules keep by construction (they import only temporalio,
# agentrt.schemas, each other and pure standard-library names; tests/workflows/test_determinism.py
# reads them for that), and replaying the committed histories checks the rest.
@workflow.defn(name=SESSION_WORKFLOW, sandboxed=False)
class SessionWorkflow(ToolCallSteps, ContextSteps):
    @workflow.init
    def __init__(self, input: SessionInput) -> None:
        self._carried = input.state is not None
        self._state: SessionState = input.state or SessionState()
        self._config = input.config
        config = input.config
        self._policy = PolicyEngine(
            config.approval,
            config.sandbox,
            network=config.network,
            interactive=config.interactive,
            workspace=config.workspace,
            version=1,  # until the first tool call asks POLICY_PATCH (ToolCallSteps)
        )
        self._journal = EventJournal(self._state)
        self._inbox = Inbox(self._state, input.config.session_id)
        self._sent_keys = SentKeys(self._state)
        self._approvals = ApprovalBook(
            self._state, input.config.owner, check_edit=self._edit_problems, operators=tuple(input.config.operators)
        )
        self._tools = {t.name: t for t in self._state.tools}
        self._active_turn: str | None = None
        self._turn_task: asyncio.Task[TurnOutcome] | None = None
        self._cancel_request: CancelTurnInput | None = None
        self._cancel_announced = False  # a CancelRequested event was emitted for the active turn
        self._archive_request: ArchiveInput | None = None
        self._draining = False  # continue-as-new is due: wait_turn calls answer "ask again"
        self._initialized = self._carried  # SessionInitialized emitted (a continued run has it)
        self._early_cancels: list[CancelTurnInput] = []
        self._owed_reconciles = []  # reconcile answers whose ledger write a cancel cut short
        self._round = 0
        self._trajectory = TrajectoryRecorder()
        self._advisor_usage = Usage()
        self._steps_in_flight = []
        self._turn_request = ""
        self._tool_listing = None
        self._mcp_failures = {}
        self._mcp_tokens = 0
        self._status: SessionStatus = "idle"
        if self._state.profile is None:
            window, max_output = DEFAULT_PROFILE_LIMITS
            self._state.profile = ProfileInfo(
                name=input.config.profile, provider="", context_window=window, max_output_tokens=max_output
            )
        # Decided here, not in run(): update validators of the first activation run before run()
        # does. A continued run always has context-window-v1; a history from before it never does.
        self._lean_start = workflow.patched(LEAN_START_PATCH)
        if self._lean_start:
            self._context_enabled = self._turn_control = self._lean_rounds = True
        else:
            self._context_enabled = self._carried or workflow.patched(CONTEXT_PATCH)
            self._turn_control = workflow.patched(TURN_CONTROL_PATCH)
            self._lean_rounds = workflow.patched(LEAN_ROUNDS_PATCH)
        # Asked here, at the run's first workflow task (as lean-start-v1 is): asked at a turn's start,
        # which may come in the same task as a local activity's result, replay would ask it in a
        # task before the one holding its marker.
        self._trajectories = workflow.patched(TRAJECTORY_PATCH)
        self._local_activities = not workflow.patched(REGULAR_ACTIVITIES_PATCH)
        self._config_unwritten = False  # lean-start-v1: the config travels with the first write
        self._end_written = False  # _close wrote the session's end (archive answers then)
        self._owner_unwritten = False  # lean-start-v1: AgentOwner goes with the first status
        self._fixed_tokens = 0
        self._turn_outcome = None
        self._delegated = {}
        self._reserved = {}
        self._background = {}
        # The start of this run: of the session for a new one (where its spend's wall time counts from).
        self._run_started = workflow.now()
        if not self._carried:
            # Sessions with these fields are newer than every recorded history: nothing here changes
            # an older session's commands.
            if config.budget is not None or config.ends_after_turn:
                self._state.started_at = self._run_started
            if config.prompt is not None and config.prompt.strip():
                self._inbox.add_message(config.owner, config.prompt)  # as if the owner sent it first

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: SessionInput) -> SessionResult:
        expected = session_workflow_id(input.config.session_id)
        if self._lean_start and workflow.info().workflow_id != expected:
            # Every write names config.session_id: a workflow of another id would write into that
            # session's rows (its transcript, its events, turn outcomes its clients read).
            # lean-start-v1 histories only: some older recorded ones ran under other ids.
            raise ApplicationError(
                f"workflow {workflow.info().workflow_id!r} cannot run session {input.config.session_id!r}: "
                f"a session runs as workflow {expected!r}",
                type="SessionIdMismatch",
                non_retryable=True,
            )
        try:
            await self._initialize()
            while True:
                await workflow.wait_condition(
                    lambda: bool(self._inbox) or self._ending() or self._may_continue_as_new()
                )
                if self._ending():
                    break
                if self._may_continue_as_new():
                    if await self._drain_handlers():
                        self._continue_as_new()
                    elif self._inbox and not self._ending():
                        # A model switch or compaction waits behind this message: it runs first.
                        await self._run_operation(self._inbox.pop())
                    continue
                await self._run_operation(self._inbox.pop())
        except (asyncio.CancelledError, ActivityError) as err:
            # The workflow's cancellation surfaces where the run awaited: a condition, or the
            # ActivityError of the call in flight (a store write, a compaction, a tool listing).
            if not self._ending() or not (isinstance(err, asyncio.CancelledError) or self._cancelled_call(err)):
                raise
        await self._end_delegations()
        result = await self._close()
        if self._archive_request is None:
            raise asyncio.CancelledError(self._cancel_reason()[1])  # the workflow ends Canceled, as asked
        return result

    async def _run_operation(self, operation: QueuedOperation) -> None:
        if operation.kind == "message":
            await self._run_message(operation)
            return
        result: SwitchModelResult | CompactOutcome | str = "the session ended first"
        try:
            result = await (self._compact("requested") if operation.kind == "compact" else self._switch_model(operation))
        finally:
            self._inbox.finish(operation.op_id, result)  # the caller's update must never wait forever
        self._set_status("idle")

    async def _run_message(self, operation: QueuedOperation) -> None:
        outcome = await self._run_turn_task(operation)
        self._finish_turn(outcome)
        try:
            await self._settle_owed_reconciles()
            await self._flush()
        finally:
            # Published only now, so a client that saw the outcome finds the whole turn in the store.
            self._inbox.record(outcome)
        if self._config.ends_after_turn and self._turn_outcome is None:
            self._turn_outcome = outcome
            if not self._ending():  # an archive or a workflow cancellation meanwhile ends it their way
                self._archive_request = ArchiveInput(principal=self._config.owner, reason=ENDED_AFTER_TURN)
            return
        if not self._context_enabled or (self._turn_control and self._ending()):
            return  # an ending session summarises nothing more
        compact, self._state.auto_compaction_pause = compaction.needs_auto_compaction(
            self._state.context, self._state.auto_compaction_pause, fixed_tokens=self._fixed_tokens, profile=self._profile
        )
        if compact:
            if (await self._compact("threshold")).error is not None:
                self._state.auto_compaction_pause = compaction.AUTO_COMPACTION_PAUSE_TURNS
            self._set_status("idle")

    # ---------------------------------------------------------------- continue-as-new

    def _may_continue_as_new(self) -> bool:
        """Temporal suggests continue-as-new and nothing holds it back (handlers are drained first;
        a delegated session still running keeps this run: its handle cannot travel to the next)."""
        return (
            self._context_enabled
            and self._archive_request is None
            and workflow.info().is_continue_as_new_suggested()
            and (self._turn_control or workflow.all_handlers_finished())
            and not self._delegation_running()
        )

    async def _drain_handlers(self) -> bool:
        """Let every update handler finish before continue-as-new; False if the session was archived
        meanwhile, or if a queued model switch or compaction waits behind a message.

        Model switches and compactions at the head of the queue run (their callers wait for
        them); one behind a message keeps its place, so that message runs first, in this run
        (the caller runs it when this returns False); queued messages with no operation behind
        them travel to the next run. Only then, with continue-as-new at hand, do waiting
        ``wait_turn`` calls answer ``pending`` with ``ask_again`` (a client asks again at once).
        """
        try:
            while not workflow.all_handlers_finished() and not self._ending():
                operation = self._inbox.pop_leading_operation()
                if operation is not None:
                    self._draining = False
                    await self._run_operation(operation)
                    continue
                if self._inbox.has_operation():
                    return False  # behind a message: the turn runs first, in arrival order
                self._draining = True
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() or self._inbox.has_operation() or self._ending()
                )
        finally:
            self._draining = False
        return not self._ending()

    def _continue_as_new(self) -> None:
        """Continue as a new run carrying ``SessionState`` as it is.

        Synchronous on purpose: between the check that no handler runs and the
        continue-as-new there is no await, so no update or signal can arrive in between and
        be left behind. Events not yet in the store travel in the state; the new run writes
        them first.
        """
        info = workflow.info()
        self._emit(
            SessionContinuedAsNew(
                run=self._state.run + 1,
                history_events=info.get_current_history_length(),
                history_bytes=info.get_current_history_size(),
            )
        )
        self._state.run += 1
        workflow.continue_as_new(SessionInput(config=self._config, state=self._state))

    # ---------------------------------------------------------------- one turn

    async def _run_turn_task(self, queued: QueuedOperation) -> TurnOutcome:
        self._active_turn = queued.op_id
        self._cancel_request = None
        self._cancel_announced = False
        self._round = 0
        self._turn_task = asyncio.create_task(self._run_turn(queued))
        watcher = asyncio.create_task(self._cancel_when_requested(self._turn_task))
        try:
            return await self._turn_task
        except (asyncio.CancelledError, TurnCancelled, ActivityError):
            # A cancelled turn surfaces as CancelledError, TurnCancelled or the ActivityError
            # of whatever activity it was awaiting; anything else is the workflow's own cancellation.
            if not self._cancel_requested():
                raise
            self._announce_workflow_cancel()
            return self._cancelled_outcome(queued.op_id)
        finally:
            watcher.cancel()
            self._turn_task = None
            self._end_mcp_turn()

    async def _cancel_when_requested(self, turn: asyncio.Task[TurnOutcome]) -> None:
        """Cancel the turn once ``cancel_turn`` or ``archive`` asked for it.

        Handlers only set a flag: it is acted on here, when conditions are checked after all
        of a workflow task's jobs are applied, so the turn stops at the same step whatever
        order the signal and an activity result arrived in (replay-safe).
        """
        await workflow.wait_condition(self._cancel_requested)
        self._announce_workflow_cancel()
        if not turn.done():
            turn.cancel()

    async def _run_turn(self, queued: QueuedOperation) -> TurnOutcome:
        turn_id = queued.op_id
        self._set_status("running")
        self._emit(TurnStarted(turn_id=turn_id))
        if self._trajectories:
            self._emit(self._trajectory.start(turn_id))
        self._turn_request = queued.text
        position = self._journal.take_position()
        self._emit(UserMessageAdded(turn_id=turn_id, principal=queued.principal, text=queued.text, position=position))
        self._stage_message(position, turn_id, Message(role="user", text=queued.text))
        usage, calls = Usage(), 0
        crossing = self._budget_crossing()
        if crossing is not None:
            return self._budget_exceeded(turn_id, 0, crossing, calls, usage)  # no model call while it is spent
        if self._config.mcp_servers:
            await self._list_mcp_tools(turn_id)
        for round_number in range(1, self._config.max_rounds_per_turn + 1):
            self._round = round_number
            await self._before_call()
            try:
                reply = await self._call_model(turn_id, round_number)
            except ModelCallFailed as failure:
                return TurnOutcome(
                    turn_id=turn_id,
                    status="failed",
                    error=failure.error,
                    error_type=failure.error_type,
                    rounds=round_number,
                    tool_calls=calls,
                    usage=usage,
                )
            usage = usage + reply.usage
            self._add_usage(reply.usage)
            assistant = Message(role="assistant", text=reply.text, tool_calls=reply.tool_calls)
            self._stage_message(reply.position, turn_id, assistant)
            self._emit(
                AssistantMessageCompleted(
                    turn_id=turn_id,
                    round=round_number,
                    text=reply.text,
                    tool_calls=len(reply.tool_calls),
                    usage=reply.usage,
                    position=reply.position,
                    reasoning_chars=reply.reasoning_chars,
                )
            )
            if reply.tool_calls and self._stop_after_step():
                for call in reply.tool_calls:
                    self._fail_call(turn_id, call, "cancelled", "the turn was cancelled before this call ran")
                raise TurnCancelled()
            if not reply.tool_calls:
                return TurnOutcome(
                    turn_id=turn_id, status="completed", answer=reply.text, rounds=round_number, tool_calls=calls, usage=usage
                )
            calls += len(reply.tool_calls)
            self._count_tool_calls(len(reply.tool_calls))
            crossing = self._budget_crossing()
            if crossing is not None:
                return self._budget_exceeded(turn_id, round_number, crossing, calls, usage, reply.tool_calls)
            rejection = await self._handle_tool_calls(turn_id, round_number, reply.tool_calls)
            if rejection is not None:
                return self._advisor_blocked(turn_id, round_number, rejection, calls, usage)
            crossing = self._budget_crossing()
            if crossing is not None:
                return self._budget_exceeded(turn_id, round_number, crossing, calls, usage)
        limit_text = f"no final answer after {self._config.max_rounds_per_turn} rounds"
        if workflow.patched(ROUND_LIMIT_MESSAGE_PATCH):
            # The transcript says why the turn stopped, so the next turn (and a reader) knows.
            self._say(
                turn_id,
                self._config.max_rounds_per_turn,
                f"I stopped here: this turn reached its limit of {self._config.max_rounds_per_turn} model calls "
                "(max_rounds_per_turn) before I could give a final answer. Send a message to let me continue.",
            )
        return TurnOutcome(
            turn_id=turn_id,
            status="round_limit",
            error=limit_text,
            rounds=self._config.max_rounds_per_turn,
            tool_calls=calls,
            usage=usage,
        )

    def _say(self, turn_id: str, round_number: int, text: str) -> None:
        """Add an assistant message of the runtime's own (no model call) to the turn's transcript."""
        position = self._journal.take_position()
        self._stage_message(position, turn_id, Message(role="assistant", text=text))
        self._emit(
            AssistantMessageCompleted(
                turn_id=turn_id, round=round_number, text=text, tool_calls=0, usage=Usage(), position=position
            )
        )

    def _budget_exceeded(
        self,
        turn_id: str,
        round_number: int,
        crossing: BudgetCrossing,
        calls: int,
        usage: Usage,
        unrun: list[ToolCall] | None = None,
    ) -> TurnOutcome:
        """End the turn at a crossed budget limit: the reply's calls that will not run are recorded
        as cancelled (their results say why), ``BudgetExceeded`` is emitted, and an assistant
        message tells the transcript why the turn stopped (the next turn's model reads it)."""
        for call in unrun or []:
            self._fail_call(turn_id, call, "cancelled", f"not run: the session's budget is spent ({crossing.text()})")
        self._emit(BudgetExceededEvent(turn_id=turn_id, crossing=crossing))
        self._say(
            turn_id,
            round_number,
            f"I stopped here: the session's budget is spent ({crossing.text()}). "
            "The budget must be raised (raise_budget) before I can continue.",
        )
        return TurnOutcome(
            turn_id=turn_id,
            status="budget_exceeded",
            error=crossing.text(),
            error_type="BudgetExceeded",
            rounds=round_number,
            tool_calls=calls,
            usage=usage,
        )

    def _advisor_blocked(self, turn_id: str, round_number: int, reason: str, calls: int, usage: Usage) -> TurnOutcome:
        """End the turn after the advisor rejected a batch: an assistant message says why (the
        next turn's model reads it too), and the caller gets a completed turn, not an error."""
        text = (
            f"I did not run the tool calls I proposed: an advisor review rejected them ({reason}). "
            "Tell me how you want to proceed."
        )
        self._say(turn_id, round_number, text)
        self._trajectory.failure = f"advisor rejected: {reason}"
        return TurnOutcome(
            turn_id=turn_id, status="completed", answer=text, rounds=round_number, tool_calls=calls, usage=usage
        )

    async def _call_model(self, turn_id: str, round_number: int) -> ModelCallResult:
        """One model activity; raises ``ModelCallFailed`` once its retries are spent."""
        reply_position = self._journal.take_position()
        plan = None
        if self._context_enabled:
            plan = context.plan_context(
                self._state.context,
                context_window=self._profile.context_window,
                max_output_tokens=self._profile.max_output_tokens,
                fixed_tokens=self._fixed_tokens + self._mcp_tokens,
                upto_position=reply_position,
            )
        self._emit(
            ModelRequestStarted(
                turn_id=turn_id,
                round=round_number,
                profile=self._config.profile,
                context_tokens=plan.estimated_tokens if plan else None,
                context_messages=plan.messages if plan else None,
                omitted_messages=plan.omitted if plan else 0,
                summary_id=plan.summary_id if plan else None,
                history_bytes=workflow.info().get_current_history_size(),
            )
        )
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · waiting for model `{self._config.profile}`")
        writes = self._writes_for_call()
        try:
            reply = await workflow.execute_activity(
                options.MODEL_CALL.name,
                ModelCallInput(
                    session_id=self._config.session_id,
                    turn_id=turn_id,
                    round=round_number,
                    profile=self._config.profile,
                    script=self._config.script,
                    system_prompt=self._config.system_prompt,
                    system_prompt_mode=self._config.system_prompt_mode,
                    tool_names=sorted(self._builtin_tools()),  # a turn's MCP tools travel by tool_listing
                    upto_position=reply_position,
                    reply_position=reply_position,
                    plan=plan,
                    reply_index=self._state.assistant_messages if self._context_enabled else None,
                    store_writes=writes,
                    tool_listing=self._tool_listing,
                    skills=self._state.skills,
                    budget_note=self._budget_note(),
                    script_session=self._config.parent.number if self._config.parent is not None else None,
                    script_node=self._config.parent.node if self._config.parent is not None else None,
                ),
                result_type=ModelCallResult,
                **options.MODEL_CALL.options(
                    summary=f"model {self._config.profile} · {turn_id} · round {round_number}",
                    start_to_close=self._config.model_timeout_seconds,
                    heartbeat_timeout=self._config.heartbeat_timeout_seconds,
                ),
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) or self._stop_after_step():
                raise TurnCancelled() from err
            raise ModelCallFailed(error_text(err), error_code(err)) from err
        self._call_wrote(writes)
        self._state.assistant_messages += 1
        if plan is not None:
            context.observe(self._state.context, plan.raw_tokens, reply.usage.input_tokens)
        return reply
    # ---------------------------------------------------------------- updates

    @workflow.update
    def send_message(self, input: SendMessageInput) -> SendMessageResult:
        """Queue a message; answers its turn id and how much runs before it. A message sent again
        with its ``idempotency_key`` is not queued again: the answer names the first one's turn
        (``queued_behind`` as it stands now)."""
        turn_id = self._queue_message(input)
        ahead = self._inbox.queued_ahead(turn_id, self._active_turn is not None)
        return SendMessageResult(turn_id=turn_id, queued_behind=ahead)

    @send_message.validator
    def _validate_send_message(self, input: SendMessageInput) -> None:
        if not input.text.strip():
            raise rejected("message text is empty")
        self._validate_operation(input.principal, "send to")
        if self._config.ends_after_turn:
            parent = self._config.parent
            steer = ""
            if parent is not None and parent.kind == "task":
                steer = f"; steer task {parent.id} instead (agentrt task amend)"
            elif parent is not None and parent.kind == "session":
                steer = f"; its answer goes to session {parent.id}, which delegated to it"
            raise rejected(f"session {self._config.session_id} runs one turn and ends: it takes no messages{steer}")
        self._check_idempotency_key(input)

    @workflow.update
    async def send_and_wait(self, input: SendMessageInput) -> TurnOutcome:
        """Queue a message and answer with its turn's outcome once the turn ends: ``send_message``
        and ``wait_turn`` in one update (with update-with-start, a session's start, first message
        and outcome in one call). ``pending`` with ``ask_again`` when the session continues as
        new before the turn ends: wait for ``turn_id`` with ``wait_turn``. A message sent again with
        its ``idempotency_key`` is not queued again: this answers for the first one's turn
        (``pending`` with ``ask_again`` when its outcome is no longer held: it is in the store)."""
        turn_id = self._queue_message(input)
        if input.idempotency_key is not None and (
            self._inbox.outcome(turn_id) is None and self._inbox.is_forgotten_turn(turn_id)
        ):
            return TurnOutcome(turn_id=turn_id, status="pending", ask_again=True)
        await workflow.wait_condition(lambda: self._inbox.outcome(turn_id) is not None or self._draining)
        return self._inbox.outcome(turn_id) or TurnOutcome(turn_id=turn_id, status="pending", ask_again=True)

    @send_and_wait.validator
    def _validate_send_and_wait(self, input: SendMessageInput) -> None:
        self._validate_send_message(input)

    @workflow.update
    async def wait_turn(self, input: WaitTurnInput) -> TurnOutcome:
        """The turn's outcome once it ends; ``pending`` when ``timeout_seconds`` passed first, or
        with ``ask_again`` when the session continues as new meanwhile (wait again)."""
        ended = self._inbox.outcome(input.turn_id)
        if ended is not None:
            return ended  # answered before waiting: a zero timeout expires before a condition is checked
        timeout = timedelta(seconds=input.timeout_seconds) if input.timeout_seconds is not None else None
        try:
            await workflow.wait_condition(
                lambda: self._inbox.outcome(input.turn_id) is not None or self._draining,
                timeout=timeout,
                timeout_summary=f"wait for {input.turn_id} (at most {input.timeout_seconds or 0:g} s)" if timeout else None,
            )
        except asyncio.TimeoutError:
            return TurnOutcome(turn_id=input.turn_id, status="pending")
        outcome = self._inbox.outcome(input.turn_id)
        return outcome or TurnOutcome(turn_id=input.turn_id, status="pending", ask_again=True)

    @wait_turn.validator
    def _validate_wait_turn(self, input: WaitTurnInput) -> None:
        if input.timeout_seconds is not None and input.timeout_seconds < 0:
            raise rejected(f"timeout_seconds must be >= 0, got {input.timeout_seconds:g}")
        if input.timeout_seconds is not None and input.timeout_seconds > MAX_WAIT_TURN_SECONDS:
            raise rejected(
                f"timeout_seconds must be at most {MAX_WAIT_TURN_SECONDS} (ten years), got {input.timeout_seconds:g}; "
                "leave it out to wait without a bound"
            )
        why = self._inbox.unknown_or_forgotten(input.turn_id)
        if why is not None:
            raise rejected(why)

    @workflow.update
    async def archive(self, input: ArchiveInput) -> SessionStateView:
        """End the session: the running turn is cancelled, queued ones too. An idle session answers
        once its end is in the store and its workflow ends with the answer (``regular-activities-v1``;
        before it, a local store write held the answer back as long); a busy one answers at once."""
        if input.principal != self._config.owner:
            self._emit(OperatorActed(principal=input.principal, action="archive", reason=input.reason or ""))
        if self._active_turn is not None and self._turn_control:
            self._emit(CancelRequested(turn_id=self._active_turn, principal=input.principal, reason="session archived"))
            self._cancel_announced = True
        self._archive_request = input
        view = self._view()
        view.status = "archived"
        if not self._local_activities and self._active_turn is None:
            await workflow.wait_condition(lambda: self._end_written)
        return view

    @archive.validator
    def _validate_archive(self, input: ArchiveInput) -> None:
        if self._archive_request is not None:
            raise rejected(f"session {self._config.session_id} is already archived")
        if self._ending():
            raise rejected(f"session {self._config.session_id} is ending: its workflow was cancelled")
        self._check_owner_or_operator(input.principal, input.reason, "archive")

    @workflow.update
    async def raise_budget(self, input: RaiseBudgetInput) -> SessionStateView:
        """Raise the session's budget: every limit ``input.budget`` sets replaces the current one (a
        session without a budget gets one). ``BudgetRaised`` is written to the store before this
        answers; a turn that ended ``budget_exceeded`` can be followed by one that runs."""
        if self._standing(input.principal, input.reason) == "operator":
            self._emit(OperatorActed(principal=input.principal, action="raise_budget", reason=input.reason or ""))
        budget = (self._config.budget or Budget()).raised(input.budget)
        # A new config object: staged events (SessionInitialized) keep the one they were made with.
        self._config = self._config.model_copy(update={"budget": budget})
        if self._state.started_at is None:
            self._state.started_at = self._run_started
        self._emit(BudgetRaised(principal=input.principal, budget=budget, reason=input.reason))
        # Everything staged, written now so readers see it in order; it stays staged (the turn's next
        # write repeats it, idempotent by seq and position), as a turn may be writing beside this.
        events, messages = self._journal.unflushed()
        await self._execute(
            options.STORE_WRITE,
            StoreAppendInput(session_id=self._config.session_id, config=self._config, messages=messages, events=events),
            local=True,
            summary="store budget raised",
        )
        return self._view()

    @raise_budget.validator
    def _validate_raise_budget(self, input: RaiseBudgetInput) -> None:
        session = self._config.session_id
        if self._archive_request is not None:
            raise rejected(f"session {session} is archived")
        if self._ending():
            raise rejected(f"session {session} is ending: its workflow was cancelled")
        self._check_owner_or_operator(input.principal, input.reason, "raise the budget of")
        if input.budget.is_unbounded():
            raise rejected(f"raise_budget of session {session} needs a budget limit (max_sessions is for tasks)")
        lowered = (self._config.budget or Budget()).lowered_by(input.budget)
        if lowered:
            raise rejected(f"raise_budget cannot lower a limit of session {session}: {', '.join(lowered)}")

    @workflow.update
    async def switch_model(self, input: SwitchModelInput) -> SwitchModelResult:
        """Queue a switch to ``input.profile`` behind the active turn and wait until it is done.

        Compacts first when the conversation does not fit the new window. Fails with
        ``ApplicationError(type="ModelSwitchFailed")`` for an unknown profile.
        """
        result = await self._queue_operation("switch_model", input.principal, input.profile)
        if isinstance(result, str):
            raise ApplicationError(result, type="ModelSwitchFailed", non_retryable=True)
        assert isinstance(result, SwitchModelResult)
        return result

    @switch_model.validator
    def _validate_switch_model(self, input: SwitchModelInput) -> None:
        self._validate_operation(input.principal, "switch the model of")
        if not input.profile.strip():
            raise rejected("profile name is empty")
        if not self._context_enabled:
            raise rejected(f"session {self._config.session_id} predates model switching; start a new session")

    @workflow.update
    async def compact(self, input: CompactRequest) -> CompactOutcome:
        """Compact the context now (behind the active turn); joins a compaction already queued."""
        result = await self._queue_operation("compact", input.principal)
        if isinstance(result, str):
            raise ApplicationError(result, type="CompactionFailed", non_retryable=True)
        assert isinstance(result, CompactOutcome)
        return result

    @compact.validator
    def _validate_compact(self, input: CompactRequest) -> None:
        self._validate_operation(input.principal, "compact")
        if not self._context_enabled:
            raise rejected(f"session {self._config.session_id} predates compaction; start a new session")

    @workflow.update
    def decide(self, input: PermissionDecision) -> None:
        """Like signal ``permission_decision``, but a decision that would be ignored is rejected with the reason."""
        self.permission_decision(input)

    @decide.validator
    def _validate_decide(self, input: PermissionDecision) -> None:
        why = self._approvals.why_ignored(
            input.request_id, input.principal, "tool_call", input.call_id, input.arguments_sha256, input.arguments,
            input.decision, input.reason,
        )
        if why is not None:
            text = ignored_text(why, input.request_id, input.principal)
            pending = next((r for r in self._approvals.undecided() if r.request_id == input.request_id), None)
            if why == "invalid_edit" and pending is not None and input.arguments is not None:
                text += ": " + ("; ".join(self._edit_problems(pending.tool, input.arguments)) or "a deny cannot edit")
            raise rejected(text)

    def _edit_problems(self, tool: str, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with edited ``arguments`` for ``tool`` (the model's calls' schema check)."""
        spec = self._tools.get(tool)
        return argument_problems(spec, arguments) if spec is not None else [f"unknown tool {tool!r}"]

    @workflow.update
    def answer_elicitation(self, input: ElicitationAnswer) -> None:
        """Answer what an MCP server asked in the middle of a call (a ``PermissionRequested`` of kind
        ``elicitation``): ``accept`` with content matching its schema, ``decline`` or ``cancel``.
        The call runs again with the answer (``ElicitationAnswered``). An answer that would be
        ignored (a stranger's, a second one, content off the schema) is rejected with the reason."""
        self._apply_decision(input, "answer", input.reason)

    @answer_elicitation.validator
    def _validate_answer_elicitation(self, input: ElicitationAnswer) -> None:
        why = self._approvals.why_ignored(input.request_id, input.principal, "elicitation", reason=input.reason)
        if why is not None:
            raise rejected(ignored_text(why, input.request_id, input.principal))
        problems = self._approvals.answer_problems(input)
        if problems:
            raise rejected(ignored_text("invalid_answer", input.request_id, input.principal) + ": " + "; ".join(problems))

    @workflow.update
    def decide_reconcile(self, input: ReconcileDecision) -> None:
        """Like signal ``reconcile``, but an answer that would be ignored is rejected with the reason."""
        self.reconcile(input)

    @decide_reconcile.validator
    def _validate_decide_reconcile(self, input: ReconcileDecision) -> None:
        why = self._approvals.why_ignored(input.request_id, input.principal, "reconcile", reason=input.note)
        if why is not None:
            raise rejected(ignored_text(why, input.request_id, input.principal))

    @workflow.update
    async def decide_memory(self, input: MemoryDecision) -> None:
        """The owner accepts or rejects a memory this session proposed (``memory.write`` with scope
        ``workspace`` or ``user``): the store records it (activity ``memory.decide``), then
        ``MemoryAccepted`` or ``MemoryRejected``. Only accepted memories reach a context.
        Fails with ``ApplicationError`` (the store's error type) when the store refuses it."""
        proposal = next((p for p in self._state.memory_proposals if p.memory_id == input.memory_id), None)
        if proposal is None:  # a second decision that passed its validator beside the first
            raise ApplicationError(f"memory {input.memory_id} is already decided", type="MemoryAlreadyDecided", non_retryable=True)
        self._state.memory_proposals.remove(proposal)
        try:
            await self._execute(
                options.DECIDE_MEMORY,
                MemoryDecideInput(
                    session_id=self._config.session_id, memory_id=input.memory_id, decision=input.decision,
                    principal=input.principal, reason=input.reason,
                ),
                local=True,
                summary=f"memory {input.decision} {proposal.scope}:{proposal.key}",
            )
        except ActivityError as err:
            self._state.memory_proposals.append(proposal)
            raise ApplicationError(error_text(err), type="MemoryDecisionFailed", non_retryable=True) from err
        fields: dict[str, Any] = {
            "turn_id": proposal.turn_id, "memory_id": proposal.memory_id, "scope": proposal.scope, "key": proposal.key
        }
        if input.decision == "accept":
            event = self._journal.emit(MemoryAccepted(principal=input.principal, **fields), workflow.now())
        else:
            event = self._journal.emit(MemoryRejected(principal=input.principal, reason=input.reason, **fields), workflow.now())
        # Written now so readers see it; it stays staged too (the next write repeats it, idempotent by seq).
        await self._execute(
            options.STORE_WRITE, StoreAppendInput(session_id=self._config.session_id, events=[event]),
            local=True, summary=f"store memory {input.decision}",
        )

    @decide_memory.validator
    def _validate_decide_memory(self, input: MemoryDecision) -> None:
        session = self._config.session_id
        if input.principal != self._config.owner:
            raise rejected(
                f"principal {input.principal!r} may not decide memories of session {session} (owner is {self._config.owner!r})"
            )
        if all(p.memory_id != input.memory_id for p in self._state.memory_proposals):
            raise rejected(f"memory {input.memory_id!r} is not a proposal of session {session} waiting for a decision")

    # ---------------------------------------------------------------- signals

    def _emit_ignored(self, event: Event, stranger: bool) -> None:
        """Record an ignored decision or cancel; a stranger's only up to ``MAX_RECORDED_STRANGER_EVENTS``
        per run (counted beyond that in ``SessionState.strangers_ignored``), so that strangers
        cannot grow the session's events and store at will (``stranger-limit-v1``)."""
        if stranger:
            self._state.strangers_ignored += 1
            if self._state.strangers_ignored > MAX_RECORDED_STRANGER_EVENTS and workflow.patched(STRANGER_LIMIT_PATCH):
                return
        self._emit(event)

    def _apply_decision(
        self, input: PermissionDecision | ReconcileDecision | ElicitationAnswer, action: Any, reason: str | None
    ) -> None:
        """Record a decision (or why it was ignored); an operator's is also ``OperatorActed``."""
        event = self._approvals.decide(input)
        if isinstance(event, PermissionDecisionIgnored):
            return self._emit_ignored(event, event.why == "not_owner")
        self._emit(event)
        if self._standing(input.principal, reason) == "operator":
            self._emit(OperatorActed(principal=input.principal, action=action, target=input.request_id, reason=reason or ""))

    @workflow.signal
    def permission_decision(self, input: PermissionDecision) -> None:
        self._apply_decision(input, input.decision, input.reason)

    @workflow.signal
    def reconcile(self, input: ReconcileDecision) -> None:
        self._apply_decision(input, "reconcile", input.note)

    @workflow.signal
    def elicitation_answer(self, input: ElicitationAnswer) -> None:
        """Like update ``answer_elicitation``, durable while no worker runs; an answer that would
        change nothing is recorded as ``PermissionDecisionIgnored`` with why."""
        self._apply_decision(input, "answer", input.reason)

    @workflow.signal
    def cancel_turn(self, input: CancelTurnInput) -> None:
        if self._turn_control and not self._initialized:
            self._early_cancels.append(input)  # applied once SessionInitialized is the first event
            return
        if input.principal is None and workflow.patched(PRINCIPAL_PATCH):
            self._emit_ignored(CancelIgnored(turn_id=input.turn_id, principal="", why="no_principal"), stranger=True)
            return
        who = self._standing(input.principal, input.reason) if input.principal is not None else "owner"
        # Only a named principal stands otherwise than "owner".
        if who == "not_owner":
            assert input.principal is not None
            self._emit_ignored(CancelIgnored(turn_id=input.turn_id, principal=input.principal, why="not_owner"), stranger=True)
            return
        if who == "no_reason":
            assert input.principal is not None
            self._emit(CancelIgnored(turn_id=input.turn_id, principal=input.principal, why="no_reason"))
            return
        if who == "operator":
            assert input.principal is not None
            self._emit(OperatorActed(principal=input.principal, action="cancel", target=input.turn_id, reason=input.reason or ""))
        if input.include_queued:
            dropped = self._inbox.remove_turns()
        else:
            target = input.turn_id
            if target is None and self._turn_control and self._active_turn is None:
                target = next(iter(self._inbox.queued_turn_ids()), None)  # the turn about to run
            named = self._inbox.remove_turn(target) if target is not None else None
            dropped = [named] if named is not None else []
        for queued in dropped:
            self._cancel_queued(queued, input.principal, input.reason, "cancelled before it started")
        if dropped and not input.include_queued:
            return  # the named turn was queued: the running one goes on
        if self._turn_task is None or self._turn_task.done() or self._cancel_request is not None:
            return
        if input.turn_id is not None and input.turn_id != self._active_turn and not input.include_queued:
            return
        self._cancel_request = input
        if self._turn_control:
            self._emit(CancelRequested(turn_id=self._active_turn, principal=input.principal, reason=input.reason))
            self._cancel_announced = True
            workflow.set_current_details(f"**cancelling** turn `{self._active_turn}`")

    @workflow.update
    def cancel(self, input: CancelTurnInput) -> None:
        """Like signal ``cancel_turn``, but a cancel that would change nothing is rejected with the reason."""
        self.cancel_turn(input)

    @cancel.validator
    def _validate_cancel(self, input: CancelTurnInput) -> None:
        why = self._cancel_refusal(input)
        if why is not None:
            raise rejected(why)

    # ---------------------------------------------------------------- queries

    @workflow.query
    def state(self) -> SessionStateView:
        return self._view()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return self._journal.page(input.since_seq, input.limit)

    @workflow.query
    def turn(self, turn_id: str) -> TurnOutcome | None:
        """The turn's outcome, or None while it is queued or running; fails for an unknown turn."""
        why = self._inbox.unknown_or_forgotten(turn_id)
        if why is not None:
            raise ValueError(why)
        return self._inbox.outcome(turn_id)

