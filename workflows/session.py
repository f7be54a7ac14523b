"""SessionWorkflow: a durable conversation whose turn loop survives worker and server crashes.

One workflow per session (id ``session-<session_id>``). Messages arrive through the
``send_message`` update and queue in an inbox; one turn runs at a time:

    model activity -> tool calls -> policy decision -> approval wait (signal)
    -> tool activities -> results back to the model -> ... -> final answer

Content (messages, tool results) lives in the store; activities get references
(positions), so history grows with each round's new content only.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from agentrt.schemas import (
        ArchiveInput,
        AssistantMessageCompleted,
        CancelIgnored,
        CancelTurnInput,
        CompactInput,
        CompactOutcome,
        CompactRequest,
        CompactResult,
        ContextCompactionCompleted,
        ContextCompactionFailed,
        ContextCompactionStarted,
        ContextPlan,
        DescribeProfileInput,
        EffectReconciled,
        Event,
        EventsPage,
        EventsQuery,
        ListToolsInput,
        ListToolsResult,
        Message,
        ModelCallInput,
        ModelCallResult,
        ModelProfileSwitched,
        ModelProfileSwitchFailed,
        ModelRequestStarted,
        ModelToolCallRequested,
        PermissionDecision,
        PermissionDecisionIgnored,
        PermissionDenied,
        PermissionGranted,
        PermissionRequest,
        PermissionRequested,
        PositionedMessage,
        ProfileInfo,
        ProfileLookup,
        QueuedOperation,
        ReconcileDecision,
        ReconcileEffectInput,
        SendMessageInput,
        SendMessageResult,
        SessionArchived,
        SessionCancelled,
        SessionContinuedAsNew,
        SessionInitialized,
        SessionInput,
        SessionResult,
        SessionState,
        SessionStateView,
        SessionStatus,
        StoreAppendInput,
        SwitchModelInput,
        SwitchModelResult,
        ToolCall,
        ToolExecuteInput,
        ToolExecuteResult,
        ToolInvocationCompleted,
        ToolInvocationFailed,
        ToolInvocationStarted,
        ToolSpec,
        TurnEnded,
        TurnOutcome,
        TurnStarted,
        Usage,
        UserMessageAdded,
        WaitTurnInput,
        argument_problems,
        arguments_sha256,
    )
    from agentrt.workflows import context
    from agentrt.workflows.policy import Allowed, DeniedByPolicy, PolicyEngine

# Stable activity names (see activities/); workflows refer to them by name only.
PROVIDER_COMPLETE = "provider.complete"
TOOL_EXECUTE = "tool.execute"
TOOLS_LIST = "tools.list"
STORE_APPEND = "store.append"
EFFECTS_RECONCILE = "effects.reconcile"
CONTEXT_COMPACT = "context.compact"
PROFILES_DESCRIBE = "profiles.describe"
# Patch id guarding the context window, compaction, model switching and continue-as-new:
# histories recorded before them replay without their commands.
CONTEXT_PATCH = "context-window-v1"
# Limits assumed for a session whose history predates CONTEXT_PATCH (tokens).
DEFAULT_PROFILE_LIMITS = (128_000, 4_096)
# Turns without automatic compaction after one failed (a provider that cannot summarise now).
AUTO_COMPACTION_PAUSE_TURNS = 5
# How the workflow says a turn's outcome is no longer held (clients then read the store).
FORGOTTEN_TURN = "ended in an earlier run of the workflow"
# Turn outcomes the workflow still answers for after continue-as-new; older ones are in the store.
RECENT_OUTCOMES = 200
OUTCOME_UNKNOWN = "EffectOutcomeUnknown"

SESSION_STATUS = SearchAttributeKey.for_keyword("AgentSessionStatus")
SESSION_OWNER = SearchAttributeKey.for_keyword("AgentOwner")
SEARCH_ATTRIBUTES = [SESSION_STATUS, SESSION_OWNER]

# Provider retries: bounded, exponential; configuration mistakes are final.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["ConfigurationError", "UnknownProfileError", "InvalidScriptError"],
)
# Compaction is an optimisation the session can go on without (the plan omits what does not
# fit): a few attempts, so a failing provider delays a switch by seconds, not minutes.
COMPACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=MODEL_RETRY.non_retryable_error_types,
)
# Tool failures come back as results; activity retries cover lost workers only.
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)
# Store writes retry without a bound on purpose: the store is the session's own database and
# a session must not fail because it was briefly down; the retrying activity shows in the UI.
STORE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=0)

PREVIEW_CHARS = 200


def workflow_id_for(session_id: str) -> str:
    """The workflow id of a session: ``session-<session_id>``."""
    return f"session-{session_id}"


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_IGNORED_REASONS = {
    "already_decided": "request {request} was already decided (or its turn ended)",
    "unknown_request": "no pending request {request} in this session",
    "not_owner": "principal {principal!r} is not the owner of this session",
    "wrong_kind": "request {request} is of another kind (approve/deny a tool call, reconcile an effect)",
    "mismatch": "the decision names another call or other arguments than request {request}",
}


class _ModelCallFailed(Exception):
    """The model activity failed for good (retries spent or a non-retryable error)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class _TurnCancelled(Exception):
    """Raised inside a turn when ``cancel_turn`` or ``archive`` asked it to stop."""


class _PendingApproval:
    __slots__ = ("request", "decision")

    def __init__(self, request: PermissionRequest) -> None:
        self.request = request
        self.decision: PermissionDecision | ReconcileDecision | None = None


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, input: SessionInput) -> None:
        carried = input.state or SessionState()
        self._config = input.config
        self._carried = input.state is not None
        self._policy = PolicyEngine(input.config.approval)
        self._tools: dict[str, ToolSpec] = {t.name: t for t in carried.tools}
        # Events the previous run emitted but did not write to the store belong to this run's view.
        self._events: list[Event] = list(carried.unflushed_events)
        self._seq = carried.seq
        self._first_seq = carried.unflushed_events[0].seq if carried.unflushed_events else carried.seq + 1
        self._run_number = carried.run
        self._unflushed_events: list[Event] = list(carried.unflushed_events)
        self._unflushed_messages: list[PositionedMessage] = list(carried.unflushed_messages)
        self._next_position = carried.next_position
        self._inbox: deque[QueuedOperation] = deque(carried.inbox)
        self._turn_counter = carried.turn_counter
        self._request_counter = carried.request_counter
        self._op_counter = carried.op_counter
        self._assistant_messages = carried.assistant_messages
        self._outcomes: dict[str, TurnOutcome] = {o.turn_id: o for o in carried.recent_outcomes}
        # Turns numbered below this ended in an earlier run and their outcomes were not carried.
        self._forgotten_below = min(
            [_turn_number(t) for t in self._outcomes]
            + [_turn_number(q.op_id) for q in carried.inbox if q.kind == "message"]
            + [carried.turn_counter + 1]
        )
        self._op_results: dict[str, SwitchModelResult | CompactOutcome | str] = {}
        self._approvals: dict[str, _PendingApproval] = {r.request_id: _PendingApproval(r) for r in carried.pending_approvals}
        self._decided_requests: set[str] = set()
        self._active_turn: str | None = None
        self._turn_task: asyncio.Task[TurnOutcome] | None = None
        self._cancel_request: CancelTurnInput | None = None
        self._archive_request: ArchiveInput | None = None
        self._usage = carried.usage
        self._turns_completed = carried.turns_completed
        self._round = 0
        self._status: SessionStatus = "idle"
        self._context = carried.context.model_copy(deep=True)
        window, max_output = DEFAULT_PROFILE_LIMITS
        self._profile = carried.profile or ProfileInfo(
            name=input.config.profile, provider="", context_window=window, max_output_tokens=max_output
        )
        # Decided here, not in run(): update validators of the first activation run before run()
        # does. A continued run always has the patch; a history from before it never does.
        self._context_enabled = self._carried or workflow.patched(CONTEXT_PATCH)
        self._auto_compaction_pause = 0
        self._fixed_tokens = 0

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: SessionInput) -> SessionResult:
        await self._initialize()
        while True:
            await workflow.wait_condition(
                lambda: bool(self._inbox) or self._archive_request is not None or self._should_continue_as_new()
            )
            if self._archive_request is not None:
                break
            if self._should_continue_as_new():
                self._continue_as_new()
            operation = self._inbox.popleft()
            if operation.kind == "message":
                await self._run_message(operation)
            elif operation.kind == "compact":
                self._op_results[operation.op_id] = await self._compact("requested")
                self._set_status("idle")
            else:
                self._op_results[operation.op_id] = await self._switch_model(operation)
                self._set_status("idle")
        return await self._close()

    async def _run_message(self, operation: QueuedOperation) -> None:
        outcome = await self._run_turn_task(operation)
        self._finish_turn(outcome)
        await self._flush()
        # Published only now, so a client that saw the outcome finds the whole turn in the store.
        self._outcomes[outcome.turn_id] = outcome
        self._forget_old_outcomes()
        if self._auto_compaction_pause > 0:
            self._auto_compaction_pause -= 1
        elif self._context_enabled and context.needs_compaction(
            self._context, self._fixed_tokens, self._profile.context_window, self._profile.max_output_tokens
        ):
            if (await self._compact("threshold")).error is not None:
                # The plan still fits the window by omission; try again a few turns later.
                self._auto_compaction_pause = AUTO_COMPACTION_PAUSE_TURNS
            self._set_status("idle")

    def _forget_old_outcomes(self) -> None:
        while len(self._outcomes) > RECENT_OUTCOMES:
            oldest = next(iter(self._outcomes))
            del self._outcomes[oldest]
            self._forgotten_below = max(self._forgotten_below, _turn_number(oldest) + 1)

    async def _initialize(self) -> None:
        if self._carried:
            self._fixed_tokens = self._estimate_fixed_tokens()
            self._set_status("idle")
            await self._flush()
            return
        listed = await workflow.execute_activity(
            TOOLS_LIST,
            ListToolsInput(names=self._config.tools),
            result_type=ListToolsResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=STORE_RETRY,
            summary="list tools",
        )
        self._tools = {t.name: t for t in listed.tools}
        if listed.unknown:
            workflow.logger.warning("session %s: unknown tools ignored: %s", self._config.session_id, listed.unknown)
        if self._context_enabled:
            lookup = await self._describe_profile(self._config.profile)
            if lookup.info is not None:
                self._profile = lookup.info
            else:
                # The first model call reports an unknown profile as the turn's error; plan with defaults until then.
                workflow.logger.warning("session %s: %s", self._config.session_id, lookup.error)
            self._fixed_tokens = self._estimate_fixed_tokens()
        self._emit(SessionInitialized(config=self._config, tools=sorted(self._tools)))
        await self._flush(include_config=True)
        self._set_status("idle")

    async def _describe_profile(self, profile: str) -> ProfileLookup:
        return await workflow.execute_activity(
            PROFILES_DESCRIBE,
            DescribeProfileInput(profile=profile, script=self._config.script),
            result_type=ProfileLookup,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=MODEL_RETRY,
            summary=f"describe profile {profile}",
        )

    def _estimate_fixed_tokens(self) -> int:
        """Tokens of what every model call carries besides messages: system prompt and tool specs."""
        specs = json.dumps([self._tools[name].model_dump(mode="json") for name in sorted(self._tools)], sort_keys=True)
        return context.estimate_tokens(len((self._config.system_prompt or "").encode()) + len(specs.encode()))

    # ---------------------------------------------------------------- continue-as-new

    def _should_continue_as_new(self) -> bool:
        return (
            self._context_enabled
            and self._archive_request is None
            and workflow.info().is_continue_as_new_suggested()
            and workflow.all_handlers_finished()
        )

    def _continue_as_new(self) -> None:
        """Continue as a new run carrying ``SessionState``.

        Synchronous on purpose: between the check that no handler runs and the
        continue-as-new there is no await, so no update or signal can arrive in between and
        be left behind. Events not yet in the store travel in the state; the new run writes
        them first.
        """
        info = workflow.info()
        self._emit(
            SessionContinuedAsNew(
                run=self._run_number + 1,
                history_events=info.get_current_history_length(),
                history_bytes=info.get_current_history_size(),
            )
        )
        state = SessionState(
            run=self._run_number + 1,
            seq=self._seq,
            next_position=self._next_position,
            turn_counter=self._turn_counter,
            request_counter=self._request_counter,
            op_counter=self._op_counter,
            assistant_messages=self._assistant_messages,
            turns_completed=self._turns_completed,
            usage=self._usage,
            tools=[self._tools[name] for name in sorted(self._tools)],
            profile=self._profile,
            context=self._context,
            inbox=list(self._inbox),
            recent_outcomes=list(self._outcomes.values()),
            pending_approvals=[p.request for p in self._approvals.values() if p.decision is None],
            unflushed_events=list(self._unflushed_events),
            unflushed_messages=list(self._unflushed_messages),
        )
        workflow.continue_as_new(SessionInput(config=self._config, state=state))

    # ---------------------------------------------------------------- compaction and model switching

    async def _compact(self, reason: str, target: ProfileInfo | None = None) -> CompactOutcome:
        """Summarise the older part of the conversation so the rest fits ``target``'s window.

        The current profile writes the summary (in chunks that fit its window); the newest
        groups that fit a quarter of the target's input budget stay verbatim. The transcript
        in the store is never changed. Only the main loop calls it, one inbox operation or
        turn end at a time, so compactions never overlap; ``compact`` requests join a queued one.
        """
        if not self._context_enabled:
            return CompactOutcome(compacted=False, reason="this session's history predates compaction")
        target = target or self._profile
        ctx = self._context
        before = context.context_tokens(ctx, self._fixed_tokens)
        upto = context.compaction_split(
            ctx,
            context_window=target.context_window,
            max_output_tokens=target.max_output_tokens,
            fixed_tokens=self._fixed_tokens,
            latest_turn_only=reason == "requested",
        )
        if upto is None:
            return CompactOutcome(
                compacted=False,
                reason="nothing to compact: the conversation since the last summary is its newest part",
                tokens_before=before,
                tokens_after=before,
            )
        summarizer = self._profile
        max_summary = context.max_summary_tokens(target.context_window)
        budget = int(context.input_budget(summarizer.context_window, summarizer.max_output_tokens) / ctx.calibration)
        chunk_tokens = max(budget - self._fixed_tokens - 2 * max_summary - context.SUMMARY_PROMPT_TOKENS, 512)
        message_cap = max(chunk_tokens // 4, context.MIN_MESSAGE_TOKENS)
        chunks = context.compaction_chunks(ctx, upto, chunk_tokens=chunk_tokens, message_cap_tokens=message_cap)
        self._set_status("running")
        self._set_details(f"compacting the context ({reason}) with `{summarizer.name}`")
        self._emit(
            ContextCompactionStarted(
                reason=reason,  # type: ignore[arg-type]
                profile=summarizer.name,
                from_position=ctx.summary_upto,
                upto_position=upto,
                estimated_tokens=before,
            )
        )
        await self._flush()
        summary_id = ctx.summary_id
        usage = Usage()
        result: CompactResult | None = None
        try:
            for index, (start, end) in enumerate(chunks):
                new_id = ctx.next_summary_id
                ctx.next_summary_id += 1
                result = await workflow.execute_activity(
                    CONTEXT_COMPACT,
                    CompactInput(
                        session_id=self._config.session_id,
                        profile=summarizer.name,
                        script=self._config.script,
                        previous_summary_id=summary_id,
                        ranges=[(start, end)],
                        summary_id=new_id,
                        upto_position=end if index < len(chunks) - 1 else upto,
                        max_summary_tokens=max_summary,
                        max_message_bytes=message_cap * context.BYTES_PER_TOKEN,
                    ),
                    result_type=CompactResult,
                    start_to_close_timeout=timedelta(seconds=self._config.model_timeout_seconds),
                    heartbeat_timeout=timedelta(seconds=self._config.heartbeat_timeout_seconds),
                    retry_policy=COMPACT_RETRY,
                    summary=f"compact {start}-{end} with {summarizer.name} ({index + 1}/{len(chunks)})",
                )
                summary_id = new_id
                usage = usage + result.usage
        except ActivityError as err:
            error = _error_text(err)
            self._emit(ContextCompactionFailed(error=error))
            await self._flush()
            return CompactOutcome(compacted=False, error=error, tokens_before=before, tokens_after=before)
        assert result is not None and summary_id is not None
        context.apply_compaction(ctx, summary_id, upto, context.estimate_tokens(result.summary_chars))
        self._usage = self._usage + usage
        after = context.context_tokens(ctx, self._fixed_tokens)
        self._emit(
            ContextCompactionCompleted(
                summary_id=summary_id,
                upto_position=upto,
                summary_tokens=ctx.summary_tokens,
                estimated_tokens=after,
                chunks=len(chunks),
                usage=usage,
                preview=result.preview,
            )
        )
        await self._flush()
        return CompactOutcome(
            compacted=True, summary_id=summary_id, upto_position=upto, tokens_before=before, tokens_after=after
        )

    async def _switch_model(self, operation: QueuedOperation) -> SwitchModelResult | str:
        """Switch to ``operation.profile``, compacting first when the conversation would not fit it."""
        assert operation.profile is not None
        try:
            lookup = await self._describe_profile(operation.profile)
        except ActivityError as err:
            lookup = ProfileLookup(error=_error_text(err))
        if lookup.info is None:
            error = lookup.error or f"profile {operation.profile!r} has no description"
            self._emit(ModelProfileSwitchFailed(principal=operation.principal, profile=operation.profile, error=error))
            await self._flush()
            return error
        target = lookup.info
        previous = self._config.profile
        if target.name == previous:
            return SwitchModelResult(
                from_profile=previous,
                profile=previous,
                context_window=target.context_window,
                max_output_tokens=target.max_output_tokens,
                estimated_tokens=self._planned_tokens(target),
            )
        compacted = False
        compaction_error = None
        if context.needs_compaction(self._context, self._fixed_tokens, target.context_window, target.max_output_tokens):
            outcome = await self._compact("switch", target)
            compacted, compaction_error = outcome.compacted, outcome.error
        self._config = self._config.model_copy(update={"profile": target.name})
        self._profile = target
        self._context.calibration = 1.0  # another model, another tokenizer: learn it anew
        self._emit(
            ModelProfileSwitched(
                principal=operation.principal,
                from_profile=previous,
                profile=target.name,
                context_window=target.context_window,
                max_output_tokens=target.max_output_tokens,
                compacted=compacted,
            )
        )
        await self._flush()
        return SwitchModelResult(
            from_profile=previous,
            profile=target.name,
            context_window=target.context_window,
            max_output_tokens=target.max_output_tokens,
            compacted=compacted,
            compaction_error=compaction_error,
            estimated_tokens=self._planned_tokens(target),
        )

    def _planned_tokens(self, profile: ProfileInfo) -> int:
        """The estimated input (tokens) of a model call made now with ``profile``."""
        plan = context.plan_context(
            self._context,
            context_window=profile.context_window,
            max_output_tokens=profile.max_output_tokens,
            fixed_tokens=self._fixed_tokens,
        )
        return plan.estimated_tokens

    async def _run_turn_task(self, queued: QueuedOperation) -> TurnOutcome:
        self._active_turn = queued.op_id
        self._cancel_request = None
        self._round = 0
        self._turn_task = asyncio.create_task(self._run_turn(queued))
        watcher = asyncio.create_task(self._cancel_when_requested(self._turn_task))
        try:
            return await self._turn_task
        except (asyncio.CancelledError, _TurnCancelled, ActivityError):
            # A cancelled turn surfaces as CancelledError, _TurnCancelled or the ActivityError
            # of whatever activity it was awaiting; anything else is the workflow's own cancellation.
            if self._cancel_request is None and self._archive_request is None:
                raise
            return self._cancelled_outcome(queued.op_id)
        finally:
            watcher.cancel()
            self._turn_task = None

    async def _cancel_when_requested(self, turn: asyncio.Task[TurnOutcome]) -> None:
        """Cancel the turn once ``cancel_turn`` or ``archive`` asked for it.

        Signal and update handlers only set a flag: the flag is acted on here, when conditions
        are checked after all of a workflow task's jobs are applied, so the turn stops at the
        same step whatever order the signal and an activity result arrived in (replay-safe).
        """
        await workflow.wait_condition(self._cancel_requested)
        if not turn.done():
            turn.cancel()

    async def _close(self) -> SessionResult:
        request = self._archive_request
        assert request is not None
        for queued in list(self._inbox):
            if queued.kind != "message":
                self._op_results[queued.op_id] = "the session was archived first"
                continue
            outcome = TurnOutcome(turn_id=queued.op_id, status="cancelled", error="session archived")
            self._emit(SessionCancelled(turn_id=queued.op_id, principal=request.principal, reason="session archived"))
            self._emit(TurnEnded(turn_id=queued.op_id, status="cancelled", rounds=0, error=outcome.error, usage=Usage()))
            self._outcomes[queued.op_id] = outcome
        self._inbox.clear()
        self._emit(SessionArchived(principal=request.principal, reason=request.reason))
        self._set_status("archived")
        await self._flush()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SessionResult(
            session_id=self._config.session_id, turns=self._turns_completed, usage=self._usage, status="archived"
        )

    # ---------------------------------------------------------------- one turn

    async def _run_turn(self, queued: QueuedOperation) -> TurnOutcome:
        turn_id = queued.op_id
        self._set_status("running")
        self._emit(TurnStarted(turn_id=turn_id))
        position = self._take_position()
        self._emit(UserMessageAdded(turn_id=turn_id, principal=queued.principal, text=queued.text, position=position))
        self._stage_message(position, turn_id, Message(role="user", text=queued.text))
        usage = Usage()
        tool_calls_total = 0
        for round_number in range(1, self._config.max_rounds_per_turn + 1):
            self._round = round_number
            await self._flush()
            try:
                reply = await self._call_model(turn_id, round_number)
            except _ModelCallFailed as failure:
                return TurnOutcome(
                    turn_id=turn_id,
                    status="failed",
                    error=failure.error,
                    rounds=round_number,
                    tool_calls=tool_calls_total,
                    usage=usage,
                )
            usage = usage + reply.usage
            self._usage = self._usage + reply.usage
            self._stage_message(
                reply.position, turn_id, Message(role="assistant", text=reply.text, tool_calls=reply.tool_calls)
            )
            self._emit(
                AssistantMessageCompleted(
                    turn_id=turn_id,
                    round=round_number,
                    text=reply.text,
                    tool_calls=len(reply.tool_calls),
                    usage=reply.usage,
                    position=reply.position,
                )
            )
            if not reply.tool_calls:
                return TurnOutcome(
                    turn_id=turn_id,
                    status="completed",
                    answer=reply.text,
                    rounds=round_number,
                    tool_calls=tool_calls_total,
                    usage=usage,
                )
            tool_calls_total += len(reply.tool_calls)
            await self._handle_tool_calls(turn_id, round_number, reply.tool_calls)
        return TurnOutcome(
            turn_id=turn_id,
            status="round_limit",
            error=f"no final answer after {self._config.max_rounds_per_turn} rounds",
            rounds=self._config.max_rounds_per_turn,
            tool_calls=tool_calls_total,
            usage=usage,
        )

    async def _call_model(self, turn_id: str, round_number: int) -> ModelCallResult:
        """One model activity; raises ``_ModelCallFailed`` once its retries are spent."""
        reply_position = self._take_position()
        plan: ContextPlan | None = None
        if self._context_enabled:
            plan = context.plan_context(
                self._context,
                context_window=self._profile.context_window,
                max_output_tokens=self._profile.max_output_tokens,
                fixed_tokens=self._fixed_tokens,
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
        self._set_details(f"turn `{turn_id}` · round {round_number} · waiting for model `{self._config.profile}`")
        try:
            reply = await workflow.execute_activity(
                PROVIDER_COMPLETE,
                ModelCallInput(
                    session_id=self._config.session_id,
                    turn_id=turn_id,
                    round=round_number,
                    profile=self._config.profile,
                    script=self._config.script,
                    system_prompt=self._config.system_prompt,
                    tool_names=sorted(self._tools),
                    upto_position=reply_position,
                    reply_position=reply_position,
                    plan=plan,
                    reply_index=self._assistant_messages if self._context_enabled else None,
                ),
                result_type=ModelCallResult,
                start_to_close_timeout=timedelta(seconds=self._config.model_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=self._config.heartbeat_timeout_seconds),
                retry_policy=MODEL_RETRY,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"model {self._config.profile} · {turn_id} · round {round_number}",
            )
        except ActivityError as err:
            self._raise_if_cancelling(err)
            raise _ModelCallFailed(_error_text(err)) from err
        self._assistant_messages += 1
        if plan is not None:
            context.observe(self._context, plan.raw_tokens, reply.usage.input_tokens)
        return reply

    async def _handle_tool_calls(self, turn_id: str, round_number: int, calls: list[ToolCall]) -> None:
        """Validate every call, ask for all approvals the batch needs at once, then run the allowed calls in order."""
        runnable: list[tuple[ToolCall, PermissionRequest | None]] = []
        for call in calls:
            self._emit(ModelToolCallRequested(turn_id=turn_id, round=round_number, call=call))
            spec = self._tools.get(call.name)
            if spec is None:
                known = ", ".join(sorted(self._tools)) or "(none)"
                self._fail_call(turn_id, call, "unknown_tool", f"unknown tool {call.name!r}; available tools: {known}")
                continue
            if call.arguments is None:
                self._fail_call(
                    turn_id,
                    call,
                    "invalid_arguments",
                    f"arguments for {call.name} are not a JSON object ({call.arguments_error}); "
                    f"received: {call.arguments_raw[:500]}",
                )
                continue
            problems = argument_problems(spec, call.arguments)
            if problems:
                self._fail_call(
                    turn_id, call, "invalid_arguments", f"invalid arguments for {call.name}: " + "; ".join(problems)
                )
                continue
            decision = self._policy.decide(spec)
            if isinstance(decision, DeniedByPolicy):
                self._fail_call(turn_id, call, "denied", f"tool call denied by policy ({decision.reason})")
                continue
            if isinstance(decision, Allowed):
                runnable.append((call, None))
                continue
            self._request_counter += 1
            request = PermissionRequest(
                request_id=f"req-{self._request_counter}",
                turn_id=turn_id,
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
                arguments_sha256=arguments_sha256(call.arguments),
                risk=spec.risk,
                reason=decision.reason,
            )
            self._approvals[request.request_id] = _PendingApproval(request)
            self._emit(PermissionRequested(turn_id=turn_id, request=request))
            runnable.append((call, request))

        waiting = [r for _, r in runnable if r is not None]
        if waiting:
            await self._await_decisions(waiting)

        for call, request in runnable:
            if request is not None:
                pending = self._approvals.pop(request.request_id)
                self._decided_requests.add(request.request_id)
                assert pending.decision is not None
                assert isinstance(pending.decision, PermissionDecision)
                if pending.decision.decision == "deny":
                    why = pending.decision.reason or "no reason given"
                    self._fail_call(turn_id, call, "denied", f"denied by {pending.decision.principal}: {why}")
                    continue
            await self._execute_tool(turn_id, round_number, call)

    async def _await_decisions(self, requests: list[PermissionRequest]) -> None:
        self._set_status("awaiting_approval")
        first = requests[0]
        example = json.dumps({"request_id": first.request_id, "decision": "grant", "principal": self._config.owner})
        lines = [f"- `{r.request_id}` · `{r.tool}` {_preview(json.dumps(r.arguments), 120)}" for r in requests]
        self._set_details(
            "**awaiting approval**\n\n" + "\n".join(lines) + f"\n\nSignal `permission_decision` with `{example}`"
        )
        await self._flush()
        pending_ids = [r.request_id for r in requests]

        def all_decided() -> bool:
            return self._cancel_requested() or all(self._approvals[i].decision is not None for i in pending_ids)

        timeout = self._config.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                all_decided,
                timeout=timedelta(seconds=timeout) if timeout is not None else None,
                timeout_summary="approval timeout" if timeout is not None else None,
            )
        except asyncio.TimeoutError:
            for request_id in pending_ids:
                pending = self._approvals[request_id]
                if pending.decision is None:
                    pending.decision = PermissionDecision(
                        request_id=request_id,
                        decision="deny",
                        principal="system",
                        reason=f"no decision within {timeout:g} s",
                    )
                    self._emit(
                        PermissionDenied(
                            turn_id=pending.request.turn_id,
                            request_id=request_id,
                            call_id=pending.request.call_id,
                            principal="system",
                            reason=pending.decision.reason,
                        )
                    )
        self._raise_if_cancel_requested()
        self._set_status("running")

    async def _execute_tool(self, turn_id: str, round_number: int, call: ToolCall) -> None:
        """Run one call; an effect of unknown outcome waits for an operator's ``reconcile`` answer."""
        position = self._take_position()
        idempotency_key = f"{workflow.info().workflow_id}/{turn_id}/{call.id}"
        self._emit(ToolInvocationStarted(turn_id=turn_id, call_id=call.id, tool=call.name, arguments=call.arguments))
        while True:
            await self._flush()
            self._set_details(f"turn `{turn_id}` · round {round_number} · running tool `{call.name}`")
            try:
                result = await workflow.execute_activity(
                    TOOL_EXECUTE,
                    ToolExecuteInput(
                        session_id=self._config.session_id,
                        turn_id=turn_id,
                        call=call,
                        workspace=self._config.workspace,
                        idempotency_key=idempotency_key,
                        result_position=position,
                        timeout_seconds=self._config.tool_timeout_seconds,
                    ),
                    result_type=ToolExecuteResult,
                    start_to_close_timeout=timedelta(seconds=self._config.tool_timeout_seconds + 30),
                    heartbeat_timeout=timedelta(seconds=self._config.heartbeat_timeout_seconds),
                    retry_policy=TOOL_RETRY,
                    cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    summary=f"{call.name} {_preview(json.dumps(call.arguments), 60)}",
                )
            except ActivityError as err:
                self._raise_if_cancelling(err)
                if _error_type(err) != OUTCOME_UNKNOWN:
                    self._fail_call(turn_id, call, "tool_error", f"{call.name} failed: {_error_text(err)}", position)
                    return
                decision = await self._reconcile(turn_id, call, idempotency_key, _error_text(err))
                if decision.outcome == "not_applied":
                    continue  # the ledger released the claim: run the call once more
                text = f"the effect of this call was applied (confirmed by {decision.principal}); its result is unknown"
                self._stage_message(position, turn_id, Message(role="tool", tool_call_id=call.id, name=call.name, text=text))
                self._emit(
                    ToolInvocationCompleted(
                        turn_id=turn_id, call_id=call.id, tool=call.name, preview=text, size_bytes=len(text), position=position
                    )
                )
                return
            break
        self._track(result.position, "tool", result.size_bytes, result.state_keys if result.ok else [])
        if result.ok:
            self._emit(
                ToolInvocationCompleted(
                    turn_id=turn_id,
                    call_id=call.id,
                    tool=call.name,
                    preview=result.preview,
                    size_bytes=result.size_bytes,
                    position=result.position,
                )
            )
        else:
            self._emit(
                ToolInvocationFailed(
                    turn_id=turn_id,
                    call_id=call.id,
                    tool=call.name,
                    reason="tool_error",
                    error=result.error or "tool failed",
                    position=result.position,
                )
            )

    async def _reconcile(self, turn_id: str, call: ToolCall, idempotency_key: str, error: str) -> ReconcileDecision:
        """Ask an operator whether a claimed-but-unrecorded effect happened; never re-run it silently."""
        self._emit(ToolInvocationFailed(turn_id=turn_id, call_id=call.id, tool=call.name, reason="outcome_unknown", error=error))
        self._request_counter += 1
        arguments = call.arguments or {}
        request = PermissionRequest(
            request_id=f"req-{self._request_counter}",
            turn_id=turn_id,
            call_id=call.id,
            tool=call.name,
            arguments=arguments,
            arguments_sha256=arguments_sha256(arguments),
            risk=self._tools[call.name].risk if call.name in self._tools else "effectful",
            reason="the worker stopped between claiming and recording this effect: was it applied?",
            kind="reconcile",
        )
        pending = _PendingApproval(request)
        self._approvals[request.request_id] = pending
        self._emit(PermissionRequested(turn_id=turn_id, request=request))
        self._set_status("awaiting_approval")
        example = json.dumps({"request_id": request.request_id, "outcome": "applied", "principal": self._config.owner})
        self._set_details(
            f"**reconcile** `{request.request_id}` · `{call.name}` {_preview(json.dumps(arguments), 120)}\n\n"
            f"Was it applied? Signal `reconcile` with `{example}` (or `\"outcome\": \"not_applied\"` to run it again)"
        )
        await self._flush()
        await workflow.wait_condition(lambda: pending.decision is not None or self._cancel_requested())
        self._raise_if_cancel_requested()
        decision = pending.decision
        assert isinstance(decision, ReconcileDecision)
        del self._approvals[request.request_id]
        self._decided_requests.add(request.request_id)
        await workflow.execute_activity(
            EFFECTS_RECONCILE,
            ReconcileEffectInput(
                idempotency_key=idempotency_key, outcome=decision.outcome, principal=decision.principal, note=decision.note
            ),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=STORE_RETRY,
            summary=f"reconcile {call.name}: {decision.outcome}",
        )
        self._set_status("running")
        return decision

    def _fail_call(self, turn_id: str, call: ToolCall, reason: Any, error: str, position: int | None = None) -> None:
        """Record a call that did not run (or failed) and give the model the error as the call's result."""
        if position is None:
            position = self._take_position()
        self._stage_message(
            position,
            turn_id,
            Message(role="tool", tool_call_id=call.id, name=call.name, text=f"error: {error}", is_error=True),
        )
        self._emit(
            ToolInvocationFailed(
                turn_id=turn_id, call_id=call.id, tool=call.name, reason=reason, error=error, position=position
            )
        )

    # ---------------------------------------------------------------- turn endings

    def _cancel_requested(self) -> bool:
        return self._cancel_request is not None or self._archive_request is not None

    def _raise_if_cancel_requested(self) -> None:
        """Stop the turn after a wait whose condition also watches for a cancel."""
        if self._cancel_requested():
            raise _TurnCancelled()

    def _raise_if_cancelling(self, err: ActivityError) -> None:
        if isinstance(err.cause, CancelledError):
            raise _TurnCancelled() from err

    def _cancelled_outcome(self, turn_id: str) -> TurnOutcome:
        request = self._cancel_request or CancelTurnInput(
            principal=self._archive_request.principal if self._archive_request else None, reason="session archived"
        )
        self._close_open_calls(turn_id)
        self._emit(SessionCancelled(turn_id=turn_id, principal=request.principal, reason=request.reason))
        return TurnOutcome(
            turn_id=turn_id,
            status="cancelled",
            error=f"cancelled{' by ' + request.principal if request.principal else ''}"
            + (f": {request.reason}" if request.reason else ""),
            rounds=self._round,
        )

    def _close_open_calls(self, turn_id: str) -> None:
        """Give every tool call of the turn's last assistant message a result, so the transcript stays valid."""
        for approval in list(self._approvals.values()):
            if approval.request.turn_id == turn_id:
                del self._approvals[approval.request.request_id]
                self._decided_requests.add(approval.request.request_id)
        answered: set[str] = set()
        last_calls: list[ToolCall] = []
        for event in self._events:
            if event.turn_id != turn_id:
                continue
            if isinstance(event, AssistantMessageCompleted):
                answered.clear()
                last_calls = []
            elif isinstance(event, ModelToolCallRequested):
                last_calls.append(event.call)
            elif isinstance(event, ToolInvocationCompleted) or (
                isinstance(event, ToolInvocationFailed) and event.position is not None
            ):
                answered.add(event.call_id)  # a result message exists for it
        for call in last_calls:
            if call.id not in answered:
                self._fail_call(turn_id, call, "cancelled", "the turn was cancelled before this call finished")

    def _finish_turn(self, outcome: TurnOutcome) -> None:
        assert outcome.status != "pending"
        self._emit(
            TurnEnded(
                turn_id=outcome.turn_id, status=outcome.status, rounds=outcome.rounds, error=outcome.error, usage=outcome.usage
            )
        )
        self._turns_completed += 1
        self._active_turn = None
        self._cancel_request = None
        self._set_status("idle")

    # ---------------------------------------------------------------- store and events

    def _take_position(self) -> int:
        position = self._next_position
        self._next_position += 1
        return position

    def _stage_message(self, position: int, turn_id: str, message: Message) -> None:
        self._unflushed_messages.append(PositionedMessage(position=position, turn_id=turn_id, message=message))
        size = len(message.text.encode()) + sum(
            len(c.name) + len(c.arguments_raw or json.dumps(c.arguments)) for c in message.tool_calls
        )
        self._track(position, message.role, size, message.state_keys)

    def _track(self, position: int, role: str, size_bytes: int, state_keys: list[str]) -> None:
        """Add a message written by the workflow or an activity to the context bookkeeping."""
        if self._context_enabled:
            context.add_entry(self._context, position, role, size_bytes, state_keys)

    def _emit(self, event: Event) -> None:
        self._seq += 1
        event.seq = self._seq
        event.at = workflow.now()
        self._events.append(event)
        self._unflushed_events.append(event)

    async def _flush(self, include_config: bool = False) -> None:
        """Write staged messages and events to the store (idempotent by position and seq)."""
        if not self._unflushed_events and not self._unflushed_messages and not include_config:
            return
        events = list(self._unflushed_events)
        messages = list(self._unflushed_messages)
        await workflow.execute_activity(
            STORE_APPEND,
            StoreAppendInput(
                session_id=self._config.session_id,
                config=self._config if include_config else None,
                messages=messages,
                events=events,
            ),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=STORE_RETRY,
            summary=f"store {len(messages)} messages, {len(events)} events",
        )
        del self._unflushed_events[: len(events)]
        del self._unflushed_messages[: len(messages)]

    def _set_status(self, status: SessionStatus) -> None:
        self._status = status
        workflow.upsert_search_attributes([SESSION_STATUS.value_set(status), SESSION_OWNER.value_set(self._config.owner)])
        if status == "idle":
            self._set_details(f"**idle** · {self._turns_completed} turns · profile `{self._config.profile}`")
        elif status == "archived":
            self._set_details(f"**archived** · {self._turns_completed} turns")

    def _set_details(self, markdown: str) -> None:
        workflow.set_current_details(markdown)

    # ---------------------------------------------------------------- updates

    @workflow.update
    def send_message(self, input: SendMessageInput) -> SendMessageResult:
        self._turn_counter += 1
        turn_id = f"turn-{self._turn_counter}"
        self._inbox.append(QueuedOperation(kind="message", op_id=turn_id, principal=input.principal, text=input.text))
        ahead = len(self._inbox) - 1 + (1 if self._active_turn is not None else 0)
        return SendMessageResult(turn_id=turn_id, queued_behind=ahead)

    @send_message.validator
    def _validate_send_message(self, input: SendMessageInput) -> None:
        if not input.text.strip():
            raise _rejected("message text is empty")
        if self._archive_request is not None:
            raise _rejected(f"session {self._config.session_id} is archived")
        if input.principal != self._config.owner:
            raise _rejected(
                f"principal {input.principal!r} may not send to session {self._config.session_id} "
                f"(owner is {self._config.owner!r})"
            )

    @workflow.update
    async def wait_turn(self, input: WaitTurnInput) -> TurnOutcome:
        timeout = timedelta(seconds=input.timeout_seconds) if input.timeout_seconds is not None else None
        try:
            await workflow.wait_condition(lambda: input.turn_id in self._outcomes, timeout=timeout)
        except asyncio.TimeoutError:
            return TurnOutcome(turn_id=input.turn_id, status="pending")
        return self._outcomes[input.turn_id]

    @wait_turn.validator
    def _validate_wait_turn(self, input: WaitTurnInput) -> None:
        if input.timeout_seconds is not None and input.timeout_seconds < 0:
            raise _rejected(f"timeout_seconds must be >= 0, got {input.timeout_seconds:g}")
        if not self._is_known_turn(input.turn_id):
            raise _rejected(f"unknown turn {input.turn_id!r} in session {self._config.session_id}")
        if self._is_forgotten_turn(input.turn_id):
            raise _rejected(_forgotten_turn_text(input.turn_id, self._config.session_id))

    @workflow.update
    def archive(self, input: ArchiveInput) -> SessionStateView:
        self._archive_request = input
        view = self.state()
        view.status = "archived"
        return view

    @archive.validator
    def _validate_archive(self, input: ArchiveInput) -> None:
        if self._archive_request is not None:
            raise _rejected(f"session {self._config.session_id} is already archived")
        if input.principal != self._config.owner:
            raise _rejected(f"principal {input.principal!r} may not archive session {self._config.session_id}")

    @workflow.update
    async def switch_model(self, input: SwitchModelInput) -> SwitchModelResult:
        """Queue a switch to ``input.profile`` behind the active turn and wait until it is done.

        Compacts first when the conversation does not fit the new window. Fails with
        ``ApplicationError(type="ModelSwitchFailed")`` for an unknown profile.
        """
        self._op_counter += 1
        op_id = f"op-{self._op_counter}"
        self._inbox.append(QueuedOperation(kind="switch_model", op_id=op_id, principal=input.principal, profile=input.profile))
        await workflow.wait_condition(lambda: op_id in self._op_results)
        result = self._op_results.pop(op_id)
        if isinstance(result, str):
            raise ApplicationError(result, type="ModelSwitchFailed", non_retryable=True)
        assert isinstance(result, SwitchModelResult)
        return result

    @switch_model.validator
    def _validate_switch_model(self, input: SwitchModelInput) -> None:
        self._validate_operation(input.principal, "switch the model of")
        if not input.profile.strip():
            raise _rejected("profile name is empty")
        if not self._context_enabled:
            raise _rejected(f"session {self._config.session_id} predates model switching; start a new session")

    @workflow.update
    async def compact(self, input: CompactRequest) -> CompactOutcome:
        """Compact the context now (behind the active turn); joins a compaction already queued."""
        queued = next((q for q in self._inbox if q.kind == "compact"), None)
        if queued is not None:
            op_id = queued.op_id
        else:
            self._op_counter += 1
            op_id = f"op-{self._op_counter}"
            self._inbox.append(QueuedOperation(kind="compact", op_id=op_id, principal=input.principal))
        await workflow.wait_condition(lambda: op_id in self._op_results)
        result = self._op_results[op_id]
        if isinstance(result, str):
            raise ApplicationError(result, type="CompactionFailed", non_retryable=True)
        assert isinstance(result, CompactOutcome)
        return result

    @compact.validator
    def _validate_compact(self, input: CompactRequest) -> None:
        self._validate_operation(input.principal, "compact")
        if not self._context_enabled:
            raise _rejected(f"session {self._config.session_id} predates compaction; start a new session")

    def _validate_operation(self, principal: str, verb: str) -> None:
        if self._archive_request is not None:
            raise _rejected(f"session {self._config.session_id} is archived")
        if principal != self._config.owner:
            raise _rejected(f"principal {principal!r} may not {verb} session {self._config.session_id}")

    @workflow.update
    def decide(self, input: PermissionDecision) -> None:
        """Like signal ``permission_decision``, but a decision that would be ignored is rejected with the reason."""
        self.permission_decision(input)

    @decide.validator
    def _validate_decide(self, input: PermissionDecision) -> None:
        why = self._why_ignored(input.request_id, input.principal, "tool_call", input.call_id, input.arguments_sha256)
        if why is not None:
            raise _rejected(_IGNORED_REASONS[why].format(request=input.request_id, principal=input.principal))

    @workflow.update
    def decide_reconcile(self, input: ReconcileDecision) -> None:
        """Like signal ``reconcile``, but an answer that would be ignored is rejected with the reason."""
        self.reconcile(input)

    @decide_reconcile.validator
    def _validate_decide_reconcile(self, input: ReconcileDecision) -> None:
        why = self._why_ignored(input.request_id, input.principal, "reconcile")
        if why is not None:
            raise _rejected(_IGNORED_REASONS[why].format(request=input.request_id, principal=input.principal))

    def _why_ignored(
        self,
        request_id: str,
        principal: str,
        kind: str,
        call_id: str | None = None,
        digest: str | None = None,
    ) -> str | None:
        """Why a decision on ``request_id`` changes nothing, or None when it is valid. Pure: no state changes."""
        if principal != self._config.owner:
            return "not_owner"  # first: a stranger learns nothing about the session's requests
        pending = self._approvals.get(request_id)
        if request_id in self._decided_requests or (pending is not None and pending.decision is not None):
            return "already_decided"
        if pending is None:
            number = request_id.removeprefix("req-")
            if number.isdigit() and 1 <= int(number) <= self._request_counter:
                return "already_decided"  # decided in an earlier run (before a continue-as-new)
            return "unknown_request"
        if pending.request.kind != kind:
            return "wrong_kind"
        if (call_id is not None and call_id != pending.request.call_id) or (
            digest is not None and digest != pending.request.arguments_sha256
        ):
            return "mismatch"
        return None

    # ---------------------------------------------------------------- signals

    @workflow.signal
    def permission_decision(self, input: PermissionDecision) -> None:
        why = self._why_ignored(input.request_id, input.principal, "tool_call", input.call_id, input.arguments_sha256)
        if why is not None:
            self._emit(
                PermissionDecisionIgnored(
                    request_id=input.request_id, decision=input.decision, principal=input.principal, why=why  # type: ignore[arg-type]
                )
            )
            return
        pending = self._approvals[input.request_id]
        pending.decision = input
        event_type = PermissionGranted if input.decision == "grant" else PermissionDenied
        self._emit(
            event_type(
                turn_id=pending.request.turn_id,
                request_id=input.request_id,
                call_id=pending.request.call_id,
                principal=input.principal,
                reason=input.reason,
            )
        )

    @workflow.signal
    def reconcile(self, input: ReconcileDecision) -> None:
        why = self._why_ignored(input.request_id, input.principal, "reconcile")
        if why is not None:
            self._emit(
                PermissionDecisionIgnored(
                    request_id=input.request_id, decision=input.outcome, principal=input.principal, why=why  # type: ignore[arg-type]
                )
            )
            return
        pending = self._approvals[input.request_id]
        pending.decision = input
        self._emit(
            EffectReconciled(
                turn_id=pending.request.turn_id,
                request_id=input.request_id,
                call_id=pending.request.call_id,
                outcome=input.outcome,
                principal=input.principal,
                note=input.note,
            )
        )

    @workflow.signal
    def cancel_turn(self, input: CancelTurnInput) -> None:
        if input.principal is not None and input.principal != self._config.owner:
            self._emit(CancelIgnored(turn_id=input.turn_id, principal=input.principal, why="not_owner"))
            return
        for queued in list(self._inbox):
            if queued.kind == "message" and queued.op_id == input.turn_id:
                self._inbox.remove(queued)
                self._emit(SessionCancelled(turn_id=queued.op_id, principal=input.principal, reason=input.reason))
                outcome = TurnOutcome(turn_id=queued.op_id, status="cancelled", error="cancelled before it started")
                self._emit(TurnEnded(turn_id=queued.op_id, status="cancelled", rounds=0, error=outcome.error, usage=Usage()))
                self._outcomes[queued.op_id] = outcome
                return
        if self._turn_task is None or self._turn_task.done():
            return
        if input.turn_id is not None and input.turn_id != self._active_turn:
            return
        self._cancel_request = input

    # ---------------------------------------------------------------- queries

    @workflow.query
    def state(self) -> SessionStateView:
        return SessionStateView(
            session_id=self._config.session_id,
            owner=self._config.owner,
            status=self._status,
            profile=self._config.profile,
            workspace=self._config.workspace,
            active_turn_id=self._active_turn,
            queued_turn_ids=[q.op_id for q in self._inbox if q.kind == "message"],
            pending_approvals=[p.request for p in self._approvals.values() if p.decision is None],
            turns_completed=self._turns_completed,
            usage=self._usage,
            last_seq=self._seq,
            current_round=self._round,
            context_window=self._profile.context_window if self._context_enabled else None,
            max_output_tokens=self._profile.max_output_tokens if self._context_enabled else None,
            context_tokens=self._planned_tokens(self._profile) if self._context_enabled else None,
            live_tokens=context.context_tokens(self._context, self._fixed_tokens) if self._context_enabled else None,
            summary_id=self._context.summary_id,
            compactions=self._context.compactions,
            run=self._run_number,
            first_seq_in_run=self._first_seq,
        )

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        selected = [e for e in self._events if e.seq > input.since_seq][: input.limit]
        return EventsPage(events=selected, last_seq=self._seq, first_seq=self._first_seq)

    @workflow.query
    def turn(self, turn_id: str) -> TurnOutcome | None:
        """The turn's outcome, or None while it is queued or running; fails for an unknown turn."""
        if not self._is_known_turn(turn_id):
            raise ValueError(f"unknown turn {turn_id!r} in session {self._config.session_id}")
        if self._is_forgotten_turn(turn_id):
            raise ValueError(_forgotten_turn_text(turn_id, self._config.session_id))
        return self._outcomes.get(turn_id)

    def _is_forgotten_turn(self, turn_id: str) -> bool:
        """A turn that ended in an earlier run, beyond the outcomes carried through continue-as-new."""
        return turn_id not in self._outcomes and _turn_number(turn_id) < self._forgotten_below

    def _is_known_turn(self, turn_id: str) -> bool:
        if not turn_id.startswith("turn-"):
            return False
        number = turn_id[len("turn-") :]
        return number.isdigit() and 1 <= int(number) <= self._turn_counter


def _rejected(message: str) -> ApplicationError:
    """An update validator's refusal: not retryable, typed ``RequestRejected`` (shown as such by any Temporal client)."""
    return ApplicationError(message, type="RequestRejected", non_retryable=True)


def _turn_number(turn_id: str) -> int:
    return int(turn_id.removeprefix("turn-"))


def _forgotten_turn_text(turn_id: str, session_id: str) -> str:
    return (
        f"turn {turn_id!r} of session {session_id} {FORGOTTEN_TURN}; "
        "its outcome is the TurnEnded event in the store (agentrt session events)"
    )


def _error_type(err: BaseException) -> str | None:
    """The type of the innermost ``ApplicationError`` in the cause chain, if any."""
    found = None
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            found = cause.type
        cause = cause.__cause__
    return found


def _error_text(err: BaseException) -> str:
    """The first ``ApplicationError``'s type and message in the cause chain (e.g. the provider's
    status, URL and body); its own causes are lower-level details of the same failure."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            return f"{cause.type}: {cause.message}" if cause.type else cause.message
        cause = cause.__cause__
    return str(err)
