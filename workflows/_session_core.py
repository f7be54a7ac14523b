"""The state and shared steps every part of the session workflow uses: events, the store, status, cancel checks.

``SessionCore`` declares the attributes ``SessionWorkflow.__init__`` sets and the small steps
the turn loop, the tool-call steps (``_tool_steps``) and the context steps
(``_context_steps``) share. Workflow code only: deterministic, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, is_cancelled_exception

from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    ArchiveInput,
    BudgetCrossing,
    CancelRequested,
    CancelTurnInput,
    Event,
    MemoryAccepted,
    MemoryNote,
    MemoryProposal,
    MemoryProposed,
    Message,
    PermissionRequest,
    ProfileInfo,
    QueuedOperation,
    ReconcileDecision,
    SendMessageInput,
    SessionArchived,
    SessionCancelled,
    SessionConfig,
    SessionResult,
    SessionState,
    SessionStateView,
    SessionStatus,
    Spend,
    StoreAppendInput,
    ToolCall,
    ToolInvocationFailed,
    ToolSpec,
    TurnEnded,
    TurnOutcome,
    Usage,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _compaction as compaction
from agentrt.workflows import _console as console
from agentrt.workflows import context
from agentrt.workflows._approvals import ApprovalBook, Standing, standing
from agentrt.workflows._errors import TurnCancelled, rejected
from agentrt.workflows._idempotency import SentKeys, key_reused_text
from agentrt.workflows._inbox import Inbox
from agentrt.workflows._journal import EventJournal
from agentrt.workflows._trajectory import TrajectoryRecorder
from agentrt.workflows.policy import PolicyEngine


class SessionCore:
    """Attributes and shared steps of ``SessionWorkflow`` (see its ``__init__``)."""

    _state: SessionState
    _config: SessionConfig
    _policy: PolicyEngine
    _journal: EventJournal
    _inbox: Inbox
    _sent_keys: SentKeys  # messages sent with an idempotency key
    _approvals: ApprovalBook
    _tools: dict[str, ToolSpec]
    _active_turn: str | None
    _cancel_request: CancelTurnInput | None
    _archive_request: ArchiveInput | None
    _status: SessionStatus
    _context_enabled: bool
    _turn_control: bool
    _lean_rounds: bool
    _lean_start: bool
    _local_activities: bool  # before regular-activities-v1: steps marked local run as local activities
    _end_written: bool  # the session's end is in the store (_close)
    _config_unwritten: bool
    _owner_unwritten: bool
    _fixed_tokens: int
    _round: int
    # Reconcile answers of a cancelled turn not yet in the effect ledger (``turn-control-v1``).
    _owed_reconciles: list[tuple[PermissionRequest, ReconcileDecision]]
    _cancel_announced: bool
    _initialized: bool
    _carried: bool  # a run continued as new: its state came from the run before
    _early_cancels: list[CancelTurnInput]
    _trajectory: TrajectoryRecorder
    _turn_request: str  # the running turn's user message (the advisor sees its start)
    _advisor_usage: Usage  # tokens of the running turn's advisor reviews
    # Trajectory steps under way (an advisor review, approval waits): (round, action, input, started, call id);
    # a cancel records them as cancelled.
    _steps_in_flight: list[tuple[int, str, dict[str, Any], Any, str | None]]
    _tool_listing: str | None  # the digest of the running turn's MCP tool specs (mcp.list_tools)
    _mcp_failures: dict[str, str]  # the servers the running turn could not list, and why
    _mcp_tokens: int  # estimated tokens of the running turn's MCP tool specs (each model call carries them)
    _turn_outcome: TurnOutcome | None  # ``ends_after_turn``: how its turn ended (the run's result carries it)
    # console-v1, asked at the run's first activity or status (both in its first workflow task): None until then.
    _console_patched: bool | None = None

    if TYPE_CHECKING:
        # Defined by the classes that make up ``SessionWorkflow``; called from the shared steps.
        def cancel_turn(self, input: CancelTurnInput) -> None: ...

        async def _settle_owed_reconciles(self) -> None: ...

    @property
    def _profile(self) -> ProfileInfo:
        assert self._state.profile is not None
        return self._state.profile

    def _workflow_cancelled(self) -> bool:
        return workflow.cancellation_reason() is not None

    def _cancel_requested(self) -> bool:
        return (
            self._cancel_request is not None
            or self._archive_request is not None
            or (self._turn_control and self._workflow_cancelled())
        )

    def _stop_after_step(self) -> bool:
        """A cancel arrived while a call that finished anyway was in flight: stop before the next step."""
        return self._turn_control and self._cancel_requested()

    async def _before_call(self) -> None:
        """Before a turn's next model or tool call; raises ``TurnCancelled`` if a cancel came meanwhile.

        Under ``lean-rounds-v1`` what is staged travels with the call (``_writes_for_call``);
        older histories ``_flush`` it first. A store write that completes in the workflow task
        that also brings the cancel returns normally (the SDK turns the turn task's cancellation
        into a cancel of the write, which had finished): without the check the next call would
        run, unasked and uncancelled.
        """
        if not self._lean_rounds:
            await self._flush()
        if self._stop_after_step():
            raise TurnCancelled()

    def _cancel_reason(self) -> tuple[str | None, str | None]:
        """(principal, reason) of the cancel that ends the active turn."""
        if self._cancel_request is not None:
            return self._cancel_request.principal, self._cancel_request.reason
        if self._archive_request is not None:
            return self._archive_request.principal, "session archived"
        why = workflow.cancellation_reason()
        return "temporal", f"workflow cancelled{': ' + why if why else ''}"

    # ---------------------------------------------------------------- spend and budget

    def _tracks_spend(self) -> bool:
        """The session counts its spend: it has a budget or ends after its turn (``SessionState.started_at`` is set)."""
        return self._state.started_at is not None

    def _add_usage(self, usage: Usage, *, priced: bool = True) -> None:
        """Count a model call's tokens; ``priced``: by the session profile's price (when spend is tracked)."""
        self._state.usage = self._state.usage + usage
        price = self._profile.price
        if priced and price is not None and self._tracks_spend():
            self._state.cost_usd += price.cost(usage)

    def _count_tool_calls(self, calls: int) -> None:
        """Count tool calls a model asked for (when spend is tracked), whether they run or not."""
        if self._tracks_spend():
            self._state.tool_calls += calls

    def _spend(self) -> Spend:
        """What the session has used: all its tokens, the cost and tool calls counted since it
        tracks spend, and the seconds since it started (``workflow.now()``)."""
        started = self._state.started_at
        wall = max((workflow.now() - started).total_seconds(), 0.0) if started is not None else 0.0
        state = self._state
        return Spend(usage=state.usage, cost_usd=state.cost_usd, tool_calls=state.tool_calls, wall_seconds=wall)

    def _budget_crossing(self) -> BudgetCrossing | None:
        """The limit of the session's budget its spend has crossed, or None (no budget, none crossed).

        Tokens, cost and wall time cross a limit they reach (``Budget.crossed``); tool calls are
        counted when the model asks for them, so a limit of N lets N calls run and is crossed
        by a batch that would take the count past N.
        """
        budget = self._config.budget
        if budget is None:
            return None
        spend = self._spend()
        crossing = budget.model_copy(update={"max_tool_calls": None}).crossed(spend)
        if crossing is None and budget.max_tool_calls is not None and spend.tool_calls > budget.max_tool_calls:
            crossing = BudgetCrossing(dimension="tool_calls", limit=budget.max_tool_calls, used=spend.tool_calls)
        return crossing

    def _budget_note(self) -> str | None:
        """What is left of the budget, for the model's system prompt; None without a budget."""
        budget = self._config.budget
        return None if budget is None else "Remaining budget: " + budget.remaining(self._spend()).describe()

    # ---------------------------------------------------------------- store and events

    def _stage_message(self, position: int, turn_id: str, message: Message) -> None:
        size = self._journal.stage_message(position, turn_id, message)
        self._track(position, message.role, size, message.state_keys)

    def _track(self, position: int, role: str, size_bytes: int, state_keys: list[str]) -> None:
        """Add a message written by the workflow or an activity to the context bookkeeping."""
        if self._context_enabled:
            context.add_entry(self._state.context, position, role, size_bytes, state_keys)

    def _emit(self, event: Event) -> None:
        self._journal.emit(event, workflow.now())

    async def _flush(self, include_config: bool = False) -> None:
        """Write staged messages and events to the store (idempotent by position and seq).

        A local activity under ``lean-rounds-v1``, a regular one in older histories.
        """
        if self._status == "awaiting_approval":
            self._show_details()  # what waits, and how to decide it, over the step's own line
        events, messages = self._journal.unflushed()
        include_config = include_config or self._config_unwritten
        if not events and not messages and not include_config:
            return
        await self._execute(
            options.STORE_WRITE,
            StoreAppendInput(
                session_id=self._config.session_id,
                config=self._config if include_config else None,
                messages=messages,
                events=events,
            ),
            local=self._lean_rounds,
            summary=f"store {len(messages)} messages, {len(events)} events",
        )
        self._journal.flushed(len(events), len(messages))
        if include_config:
            self._config_unwritten = False

    def _writes_for_call(self) -> StoreAppendInput | None:
        """What is staged, to travel in the next model or tool call's input (``lean-rounds-v1``).

        The activity writes it before its own work (a local tool call: with its result);
        ``_call_wrote`` marks it written once the
        call returned. A call that fails leaves it staged for the next write (idempotent).
        """
        if not self._lean_rounds:
            return None
        events, messages = self._journal.unflushed()
        if not events and not messages and not self._config_unwritten:
            return None
        config = self._config if self._config_unwritten else None
        return StoreAppendInput(session_id=self._config.session_id, config=config, messages=messages, events=events)

    def _call_wrote(self, writes: StoreAppendInput | None) -> None:
        if writes is not None:
            self._journal.flushed(len(writes.events), len(writes.messages))
            if writes.config is not None:
                self._config_unwritten = False

    async def _execute(
        self,
        config: options.ActivityConfig,
        arg: Any,
        *,
        local: bool,
        summary: str,
        result_type: type | None = None,
        start_to_close: float | None = None,
        heartbeat_timeout: float | None = None,
        task_queue: str | None = None,
    ) -> Any:
        """Run activity ``config.name`` with ``arg``: a local activity when ``local`` (in runs from
        before ``regular-activities-v1`` only), else a regular one (on ``task_queue`` when given,
        else the workflow's)."""
        self._console_on()  # a new session's first command is an activity: the patch is asked before it
        return await config.execute(
            arg,
            local=local and self._local_activities,
            summary=summary,
            result_type=result_type,
            start_to_close=start_to_close,
            heartbeat_timeout=heartbeat_timeout,
            task_queue=task_queue,
        )

    def _set_status(self, status: SessionStatus, *, with_owner: bool = False) -> None:
        """Record ``status`` (search attribute ``AgentSessionStatus``) and show it in the current details.

        Under ``console-v1`` every search attribute of the session (``_console.Listing``) is
        written when its value differs from the workflow's, in one upsert, and not at all when
        none does. Before it: under ``lean-rounds-v1`` the owner is written once per run
        (``with_owner``: ``_initialize`` asks for it) instead of with every status; under
        ``lean-start-v1`` a session whose first message is already queued writes it with the
        ``running`` status that follows at once.
        """
        self._status = status
        if self._console_on():
            self._owner_unwritten = False
            updates = console.changed(self._listing(), workflow.info().typed_search_attributes)
            if updates:
                workflow.upsert_search_attributes(updates)
        else:
            attributes = [SESSION_STATUS.value_set(status)]
            if with_owner or self._owner_unwritten or not self._lean_rounds:
                attributes.append(SESSION_OWNER.value_set(self._config.owner))
                self._owner_unwritten = False
            workflow.upsert_search_attributes(attributes)
        if status != "running":
            self._show_details()  # a running turn's steps write their own (model, tool, advisor)

    def _console_on(self) -> bool:
        """``console-v1``: asked once per run, at its first activity or status, both of which a new
        run issues in its first workflow task (as ``lean-start-v1`` is asked there)."""
        if self._console_patched is None:
            self._console_patched = workflow.patched(console.CONSOLE_PATCH)
        return self._console_patched

    def _listing(self) -> console.Listing:
        """The session's search attribute values: spend where the session counts it (a budget, or a
        task's, graph's or delegated session), once there is a cost."""
        return console.Listing(
            kind="session",
            owner=self._config.owner,
            status=self._status,
            profile=self._config.profile,
            pending_approvals=len(self._approvals.undecided()),
            spend_usd=console.spend_or_none(self._state.cost_usd) if self._tracks_spend() else None,
        )

    def _show_details(self) -> None:
        """Current details: the status line and, for each request waiting for a decision, the JSON
        and commands that decide it (``_console.session_details``)."""
        listing = self._listing()
        workflow.set_current_details(
            console.session_details(
                workflow_id=workflow.info().workflow_id,
                session_id=self._config.session_id,
                owner=self._config.owner,
                status=self._status,
                profile=self._config.profile,
                turns=self._state.turns_completed,
                pending=self._approvals.undecided() if self._status == "awaiting_approval" else (),
                spend_usd=listing.spend_usd,
            )
        )

    def _fail_call(
        self, turn_id: str, call: ToolCall, reason: Any, error: str, position: int | None = None, *, started: Any = None
    ) -> None:
        """Record a call that did not run (or failed) and give the model the error as the call's result."""
        if position is None:
            position = self._journal.take_position()
        message = Message(role="tool", tool_call_id=call.id, name=call.name, text=f"error: {error}", is_error=True)
        self._stage_message(position, turn_id, message)
        self._emit(
            ToolInvocationFailed(turn_id=turn_id, call_id=call.id, tool=call.name, reason=reason, error=error, position=position)
        )
        arguments = call.arguments if call.arguments is not None else {"arguments_raw": call.arguments_raw}
        self._record_step(turn_id, self._round, call.name, arguments, reason, error, started, call_id=call.id)

    def _record_step(
        self,
        turn_id: str,
        round_number: int,
        action: str,
        action_input: dict[str, Any] | None,
        outcome: str,
        text: str,
        started: Any,
        *,
        call_id: str | None = None,
    ) -> None:
        """Add a step to the open turn's trajectory (``trajectory-v1``); ``started`` (a
        ``workflow.now()``) gives its duration, None a step that took no time."""
        event = self._trajectory.step(
            turn_id, round_number, action, action_input, outcome, text, started, workflow.now(), call_id=call_id
        )
        if event is not None:
            self._emit(event)

    def _memory_written(self, turn_id: str, call: ToolCall, note: MemoryNote) -> None:
        """Record what ``memory.write`` stored: a session memory is accepted at once; a workspace
        or user one waits for the owner's ``decide_memory``."""
        if note.status == "accepted":
            self._emit(MemoryAccepted(turn_id=turn_id, memory_id=note.memory_id, scope=note.scope, key=note.key, call_id=call.id))
            return
        if all(p.memory_id != note.memory_id for p in self._state.memory_proposals):
            self._state.memory_proposals.append(
                MemoryProposal(memory_id=note.memory_id, scope=note.scope, key=note.key, turn_id=turn_id, call_id=call.id)
            )
        self._emit(MemoryProposed(
            turn_id=turn_id, memory_id=note.memory_id, scope=note.scope, key=note.key, preview=note.preview, call_id=call.id,
        ))

    def _cancelled_outcome(self, turn_id: str) -> TurnOutcome:
        principal, reason = self._cancel_reason()
        for round_number, action, action_input, started, call_id in self._steps_in_flight:
            self._record_step(turn_id, round_number, action, action_input, "cancelled", "the turn was cancelled", started, call_id=call_id)
        self._steps_in_flight = []
        answered = self._approvals.close_turn(turn_id)
        if self._turn_control:
            self._owed_reconciles.extend(answered)
        for call in self._journal.unanswered_calls(turn_id):
            self._fail_call(turn_id, call, "cancelled", "the turn was cancelled before this call finished")
        self._emit(SessionCancelled(turn_id=turn_id, principal=principal, reason=reason))
        return TurnOutcome(
            turn_id=turn_id,
            status="cancelled",
            error=f"cancelled{' by ' + principal if principal else ''}" + (f": {reason}" if reason else ""),
            rounds=self._round,
        )

    def _cancel_queued(self, queued: QueuedOperation, principal: str | None, reason: str | None, error: str) -> None:
        """End a turn that never started, or answer an operation that never ran."""
        if queued.kind != "message":
            self._inbox.finish(queued.op_id, "the session was archived first")
            return
        outcome = TurnOutcome(turn_id=queued.op_id, status="cancelled", error=error)
        self._emit(SessionCancelled(turn_id=queued.op_id, principal=principal, reason=reason))
        self._emit(TurnEnded(turn_id=queued.op_id, status="cancelled", rounds=0, error=error, usage=Usage()))
        self._inbox.record(outcome)

    def _hold_outcomes(self) -> None:
        """Until ``_publish_held``, turns cancelled before they started keep their outcomes back, so
        that a client that sees one finds the turn's end in the store (``regular-activities-v1``;
        before it a local store write held the whole workflow task back, the outcome with it)."""
        if not self._local_activities:
            self._inbox.hold()

    def _publish_held(self) -> None:
        """Publish the outcomes ``_hold_outcomes`` kept back (their events are written now)."""
        self._inbox.publish_held()

    def _finish_turn(self, outcome: TurnOutcome) -> None:
        assert outcome.status != "pending"
        if self._advisor_usage != Usage():
            outcome.usage = outcome.usage + self._advisor_usage  # the turn's usage counts its advisor reviews
            self._advisor_usage = Usage()
        completed = self._trajectory.complete(outcome)
        if completed is not None:
            self._emit(completed)
        self._emit(
            TurnEnded(
                turn_id=outcome.turn_id, status=outcome.status, rounds=outcome.rounds, error=outcome.error,
                usage=outcome.usage, error_type=outcome.error_type,
            )
        )
        self._state.turns_completed += 1
        self._active_turn = None
        self._cancel_request = None
        self._set_status("idle")

    def _standing(self, principal: str | None, reason: str | None) -> Standing:
        return standing(self._config.owner, self._config.operators, principal, reason)

    def _standing_refusal(self, principal: str | None, reason: str | None, verb: str) -> str | None:
        """Why ``principal`` may not ``verb`` this session (neither the owner nor, with a reason, an
        operator), or None."""
        session = self._config.session_id
        who = self._standing(principal, reason)
        if who == "not_owner":
            return f"principal {principal!r} may not {verb} session {session} (owner is {self._config.owner!r})"
        if who == "no_reason":
            return f"operator {principal!r} must give a reason to {verb} session {session}, which it does not own"
        return None

    def _check_owner_or_operator(self, principal: str | None, reason: str | None, verb: str) -> None:
        """Refuse (update validators) a principal that is neither the owner nor, with a reason, an operator."""
        why = self._standing_refusal(principal, reason, verb)
        if why is not None:
            raise rejected(why)

    def _cancel_refusal(self, input: CancelTurnInput) -> str | None:
        """Why a cancel would change nothing (update ``cancel`` rejects it), or None."""
        session = self._config.session_id
        why = self._standing_refusal(input.principal, input.reason, "cancel turns of")
        if why is not None:
            return why
        queued = self._inbox.queued_turn_ids()
        running = self._active_turn if self._cancel_request is None else None
        if input.turn_id is not None and input.turn_id not in queued and input.turn_id != running:
            if input.turn_id == self._active_turn:
                return f"turn {input.turn_id!r} of session {session} is already being cancelled"
            return self._inbox.unknown_or_forgotten(input.turn_id) or f"turn {input.turn_id!r} has already ended"
        if running is None and not queued:
            return f"nothing to cancel in session {session}: no turn is running or queued"
        return None

    def _validate_operation(self, principal: str, verb: str) -> None:
        if self._archive_request is not None:
            raise rejected(f"session {self._config.session_id} is archived")
        if self._ending():
            raise rejected(f"session {self._config.session_id} is ending: its workflow was cancelled")
        if principal != self._config.owner:
            raise rejected(
                f"principal {principal!r} may not {verb} session {self._config.session_id} (owner is {self._config.owner!r})"
            )

    def _queue_message(self, message: SendMessageInput) -> str:
        """Queue ``message`` as a turn; returns its turn id.

        A message sent again with an idempotency key its principal used before is not queued:
        the first message's turn id is returned. The same key with another text raises
        ``RequestRejected`` (``ApplicationError``; the validator refuses it first, this catches two
        such messages accepted in one workflow task). Without a key nothing here differs from a
        plain ``Inbox.add_message``.
        """
        sent = self._sent_keys.first(message)
        if sent is not None:
            self._check_idempotency_key(message)
            return sent.turn_id
        turn_id = self._inbox.add_message(message.principal, message.text)
        self._sent_keys.remember(message, turn_id)
        return turn_id

    def _check_idempotency_key(self, message: SendMessageInput) -> None:
        """Refuse (update validators) a message whose idempotency key was used for another text."""
        sent = self._sent_keys.reused_for(message)
        if sent is not None:
            assert message.idempotency_key is not None
            raise rejected(key_reused_text(message.idempotency_key, sent.turn_id, self._config.session_id))

    async def _queue_operation(self, kind: Any, principal: str, profile: str | None = None) -> Any:
        op_id = self._inbox.add_operation(kind, principal, profile)
        self._inbox.expect(op_id)
        await workflow.wait_condition(lambda: self._inbox.has_result(op_id))
        return self._inbox.collect(op_id)

    async def _close(self) -> SessionResult:
        """End the session (archive, workflow cancellation, or the end of an ``ends_after_turn`` session's
        turn): queued turns are cancelled, the rest recorded. The result of a session that tracks
        spend carries it; an ``ends_after_turn`` session's carries its turn's outcome."""
        principal = self._archive_request.principal if self._archive_request else "temporal"
        reason = self._archive_request.reason if self._archive_request else self._cancel_reason()[1]
        self._hold_outcomes()
        for queued in self._inbox.drain():
            self._cancel_queued(queued, principal, "session archived", "session archived")
        self._emit(SessionArchived(principal=principal, reason=reason))
        self._set_status("archived")
        try:
            await self._settle_owed_reconciles()  # owed only when the workflow's cancel cut the first try short
            await self._flush()
        except ActivityError as err:
            if not self._cancelled_call(err):
                raise
            # Cancelled while the end was being written (after an archive): write it all the same.
            await self._settle_owed_reconciles()
            await self._flush()
        self._publish_held()
        self._end_written = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SessionResult(
            session_id=self._config.session_id,
            turns=self._state.turns_completed,
            usage=self._state.usage,
            status="archived",
            outcome=self._turn_outcome if self._config.ends_after_turn else None,
            spend=self._spend() if self._tracks_spend() else None,
        )

    def _ending(self) -> bool:
        """The session was archived, or (``turn-control-v1``) its workflow was cancelled."""
        return self._archive_request is not None or (self._turn_control and self._workflow_cancelled())

    def _cancelled_call(self, err: BaseException) -> bool:
        """``err`` is a call cut short by the workflow's cancellation (``turn-control-v1``)."""
        return self._turn_control and self._workflow_cancelled() and is_cancelled_exception(err)

    def _announce_workflow_cancel(self) -> None:
        """Record that Temporal asked for the cancel (``cancel_turn`` and ``archive`` record their own)."""
        if (
            self._turn_control
            and self._active_turn is not None
            and not self._cancel_announced
            and self._cancel_request is None
            and self._archive_request is None
            and self._workflow_cancelled()
        ):
            principal, reason = self._cancel_reason()
            self._emit(CancelRequested(turn_id=self._active_turn, principal=principal, reason=reason))
            self._cancel_announced = True

    def _view(self) -> SessionStateView:
        """What the ``state`` query answers."""
        status = "cancelling" if self._active_turn is not None and self._cancel_requested() else self._status
        fields: dict[str, Any] = {}
        if self._context_enabled:
            fields = {
                "context_window": self._profile.context_window,
                "max_output_tokens": self._profile.max_output_tokens,
                "context_tokens": compaction.planned_tokens(
                    self._state.context, fixed_tokens=self._fixed_tokens, profile=self._profile
                ),
                "live_tokens": context.context_tokens(self._state.context, self._fixed_tokens),
            }
        budget = self._config.budget
        if budget is not None or self._tracks_spend():
            spend = self._spend()
            fields["spend"] = spend
            if budget is not None:
                fields["budget"], fields["remaining"] = budget, budget.remaining(spend)
        return SessionStateView(
            session_id=self._config.session_id,
            owner=self._config.owner,
            operators=list(self._config.operators),
            strangers_ignored=self._state.strangers_ignored,
            sandbox=self._config.sandbox,
            network=self._config.network,
            approval_mode=self._config.approval.mode,
            status=status,
            profile=self._config.profile,
            workspace=self._config.workspace,
            active_turn_id=self._active_turn,
            queued_turn_ids=self._inbox.queued_turn_ids(),
            pending_approvals=self._approvals.undecided(),
            pending_memories=list(self._state.memory_proposals),
            advisor=self._config.advisor.mode,
            turns_completed=self._state.turns_completed,
            usage=self._state.usage,
            last_seq=self._journal.last_seq,
            current_round=self._round,
            summary_id=self._state.context.summary_id,
            compactions=self._state.context.compactions,
            run=self._state.run,
            first_seq_in_run=self._journal.first_seq,
            **fields,
        )
