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
    from schemas import (
        ArchiveInput,
        AssistantMessageCompleted,
        CancelIgnored,
        CancelTurnInput,
        EffectReconciled,
        Event,
        EventsPage,
        EventsQuery,
        ListToolsInput,
        ListToolsResult,
        Message,
        ModelCallInput,
        ModelCallResult,
        ModelRequestStarted,
        ModelToolCallRequested,
        PermissionDecision,
        PermissionDecisionIgnored,
        PermissionDenied,
        PermissionGranted,
        PermissionRequest,
        PermissionRequested,
        PositionedMessage,
        ReconcileDecision,
        ReconcileEffectInput,
        SendMessageInput,
        SendMessageResult,
        SessionArchived,
        SessionCancelled,
        SessionInitialized,
        SessionInput,
        SessionResult,
        SessionStateView,
        SessionStatus,
        StoreAppendInput,
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
    from workflows.policy import Allowed, DeniedByPolicy, PolicyEngine

# Stable activity names (see activities/); workflows refer to them by name only.
PROVIDER_COMPLETE = "provider.complete"
TOOL_EXECUTE = "tool.execute"
TOOLS_LIST = "tools.list"
STORE_APPEND = "store.append"
EFFECTS_RECONCILE = "effects.reconcile"
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


class _QueuedMessage:
    __slots__ = ("turn_id", "text", "principal")

    def __init__(self, turn_id: str, text: str, principal: str) -> None:
        self.turn_id = turn_id
        self.text = text
        self.principal = principal


class _PendingApproval:
    __slots__ = ("request", "decision")

    def __init__(self, request: PermissionRequest) -> None:
        self.request = request
        self.decision: PermissionDecision | ReconcileDecision | None = None


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, input: SessionInput) -> None:
        self._config = input.config
        self._policy = PolicyEngine(input.config.approval)
        self._tools: dict[str, ToolSpec] = {}
        self._events: list[Event] = []
        self._seq = 0
        self._unflushed_events: list[Event] = []
        self._unflushed_messages: list[PositionedMessage] = []
        self._next_position = 0
        self._inbox: deque[_QueuedMessage] = deque()
        self._turn_counter = 0
        self._request_counter = 0
        self._outcomes: dict[str, TurnOutcome] = {}
        self._approvals: dict[str, _PendingApproval] = {}
        self._decided_requests: set[str] = set()
        self._active_turn: str | None = None
        self._turn_task: asyncio.Task[TurnOutcome] | None = None
        self._cancel_request: CancelTurnInput | None = None
        self._archive_request: ArchiveInput | None = None
        self._usage = Usage()
        self._turns_completed = 0
        self._round = 0
        self._status: SessionStatus = "idle"

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: SessionInput) -> SessionResult:
        await self._initialize()
        while True:
            await workflow.wait_condition(lambda: bool(self._inbox) or self._archive_request is not None)
            if self._archive_request is not None:
                break
            queued = self._inbox.popleft()
            outcome = await self._run_turn_task(queued)
            self._finish_turn(outcome)
            await self._flush()
            # Published only now, so a client that saw the outcome finds the whole turn in the store.
            self._outcomes[outcome.turn_id] = outcome
        return await self._close()

    async def _initialize(self) -> None:
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
        self._emit(SessionInitialized(config=self._config, tools=sorted(self._tools)))
        await self._flush(include_config=True)
        self._set_status("idle")

    async def _run_turn_task(self, queued: _QueuedMessage) -> TurnOutcome:
        self._active_turn = queued.turn_id
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
            return self._cancelled_outcome(queued.turn_id)
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
            outcome = TurnOutcome(turn_id=queued.turn_id, status="cancelled", error="session archived")
            self._emit(SessionCancelled(turn_id=queued.turn_id, principal=request.principal, reason="session archived"))
            self._emit(TurnEnded(turn_id=queued.turn_id, status="cancelled", rounds=0, error=outcome.error, usage=Usage()))
            self._outcomes[queued.turn_id] = outcome
        self._inbox.clear()
        self._emit(SessionArchived(principal=request.principal, reason=request.reason))
        self._set_status("archived")
        await self._flush()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SessionResult(
            session_id=self._config.session_id, turns=self._turns_completed, usage=self._usage, status="archived"
        )

    # ---------------------------------------------------------------- one turn

    async def _run_turn(self, queued: _QueuedMessage) -> TurnOutcome:
        turn_id = queued.turn_id
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
        self._emit(
            ModelRequestStarted(
                turn_id=turn_id,
                round=round_number,
                profile=self._config.profile,
                history_bytes=workflow.info().get_current_history_size(),
            )
        )
        reply_position = self._take_position()
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
        self._inbox.append(_QueuedMessage(turn_id, input.text, input.principal))
        ahead = len(self._inbox) - 1 + (1 if self._active_turn is not None else 0)
        return SendMessageResult(turn_id=turn_id, queued_behind=ahead)

    @send_message.validator
    def _validate_send_message(self, input: SendMessageInput) -> None:
        if not input.text.strip():
            raise ValueError("message text is empty")
        if self._archive_request is not None:
            raise ValueError(f"session {self._config.session_id} is archived")
        if input.principal != self._config.owner:
            raise ValueError(
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
            raise ValueError(f"timeout_seconds must be >= 0, got {input.timeout_seconds:g}")
        if not self._is_known_turn(input.turn_id):
            raise ValueError(f"unknown turn {input.turn_id!r} in session {self._config.session_id}")

    @workflow.update
    def archive(self, input: ArchiveInput) -> SessionStateView:
        self._archive_request = input
        view = self.state()
        view.status = "archived"
        return view

    @archive.validator
    def _validate_archive(self, input: ArchiveInput) -> None:
        if self._archive_request is not None:
            raise ValueError(f"session {self._config.session_id} is already archived")
        if input.principal != self._config.owner:
            raise ValueError(f"principal {input.principal!r} may not archive session {self._config.session_id}")

    @workflow.update
    def decide(self, input: PermissionDecision) -> None:
        """Like signal ``permission_decision``, but a decision that would be ignored is rejected with the reason."""
        self.permission_decision(input)

    @decide.validator
    def _validate_decide(self, input: PermissionDecision) -> None:
        why = self._why_ignored(input.request_id, input.principal, "tool_call", input.call_id, input.arguments_sha256)
        if why is not None:
            raise ValueError(_IGNORED_REASONS[why].format(request=input.request_id, principal=input.principal))

    @workflow.update
    def decide_reconcile(self, input: ReconcileDecision) -> None:
        """Like signal ``reconcile``, but an answer that would be ignored is rejected with the reason."""
        self.reconcile(input)

    @decide_reconcile.validator
    def _validate_decide_reconcile(self, input: ReconcileDecision) -> None:
        why = self._why_ignored(input.request_id, input.principal, "reconcile")
        if why is not None:
            raise ValueError(_IGNORED_REASONS[why].format(request=input.request_id, principal=input.principal))

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
            if queued.turn_id == input.turn_id:
                self._inbox.remove(queued)
                self._emit(SessionCancelled(turn_id=queued.turn_id, principal=input.principal, reason=input.reason))
                outcome = TurnOutcome(turn_id=queued.turn_id, status="cancelled", error="cancelled before it started")
                self._emit(TurnEnded(turn_id=queued.turn_id, status="cancelled", rounds=0, error=outcome.error, usage=Usage()))
                self._outcomes[queued.turn_id] = outcome
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
            queued_turn_ids=[q.turn_id for q in self._inbox],
            pending_approvals=[p.request for p in self._approvals.values() if p.decision is None],
            turns_completed=self._turns_completed,
            usage=self._usage,
            last_seq=self._seq,
            current_round=self._round,
        )

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        selected = [e for e in self._events if e.seq > input.since_seq][: input.limit]
        return EventsPage(events=selected, last_seq=self._seq)

    @workflow.query
    def turn(self, turn_id: str) -> TurnOutcome | None:
        """The turn's outcome, or None while it is queued or running; fails for an unknown turn."""
        if not self._is_known_turn(turn_id):
            raise ValueError(f"unknown turn {turn_id!r} in session {self._config.session_id}")
        return self._outcomes.get(turn_id)

    def _is_known_turn(self, turn_id: str) -> bool:
        if not turn_id.startswith("turn-"):
            return False
        number = turn_id[len("turn-") :]
        return number.isdigit() and 1 <= int(number) <= self._turn_counter


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
