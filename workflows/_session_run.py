"""One run of a session workflow: its state, its bookkeeping and the small steps every part shares.

``SessionRun`` is built once per run by ``SessionWorkflow``'s ``@workflow.init`` and handed to
each collaborator (the turn loop, tool calls, MCP, delegations, context): it holds the
config, the ``SessionState``, the journal, inbox, approvals and sent keys over that state,
the status, the run's ``Generation``, and the running ``Turn``. Its steps stage and emit
events, write the store, run activities and keep the status current. It calls nothing back.
Workflow code only: deterministic, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    ArchiveInput,
    BudgetCrossing,
    CancelRequested,
    CancelTurnInput,
    Event,
    MemoryAccepted,
    MemoryDropped,
    MemoryNote,
    MemoryProposal,
    MemoryProposed,
    Message,
    ProfileInfo,
    QueuedOperation,
    SessionCancelled,
    SessionConfig,
    SessionInput,
    SessionState,
    SessionStateView,
    SessionStatus,
    Spend,
    StoreAppendInput,
    ToolCall,
    ToolSpec,
    TurnEnded,
    TurnOutcome,
    Usage,
    argument_problems,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _compaction as compaction
from agentrt.workflows import _console as console
from agentrt.workflows import context
from agentrt.workflows._approvals import ApprovalBook
from agentrt.workflows._errors import TurnCancelled
from agentrt.workflows._generation import Generation
from agentrt.workflows._idempotency import SentKeys
from agentrt.workflows._inbox import Inbox
from agentrt.workflows._journal import EventJournal

if TYPE_CHECKING:
    from agentrt.workflows._turn import Turn

# Limits assumed for a session whose history predates context-window-v1 (tokens).
DEFAULT_PROFILE_LIMITS = (128_000, 4_096)


class SessionRun:
    """The state of one session run and the steps every part of the session shares."""

    def __init__(self, input: SessionInput) -> None:
        self.carried = input.state is not None  # a run continued as new: its state came from the run before
        self.state: SessionState = input.state or SessionState()
        self.config: SessionConfig = input.config
        config = input.config
        self.journal = EventJournal(self.state)
        self.inbox = Inbox(self.state, config.session_id)
        self.sent_keys = SentKeys(self.state)  # messages sent with an idempotency key
        self.approvals = ApprovalBook(self.state, config.owner, check_edit=self.edit_problems, operators=tuple(config.operators))
        self.tools: dict[str, ToolSpec] = {t.name: t for t in self.state.tools}
        self.turn: Turn | None = None  # the running turn, from its start until its end is recorded
        self.doing: QueuedOperation | None = None  # what the run loop works on (a turn, a compaction, a switch)
        self.compacting = False  # a summary is being written (asked for, at the threshold, or for a switch)
        self.last_round = 0  # the rounds of the last turn that ended (the state query shows them between turns)
        self.archive_request: ArchiveInput | None = None
        self.initialized = self.carried  # SessionInitialized emitted (a continued run has it)
        self.early_cancels: list[CancelTurnInput] = []  # cancels that came before SessionInitialized
        self.status: SessionStatus = "idle"
        self.failure: str | None = None  # why the workflow failed (the state query says so; no command)
        if self.state.profile is None:
            window, max_output = DEFAULT_PROFILE_LIMITS
            self.state.profile = ProfileInfo(name=config.profile, provider="", context_window=window, max_output_tokens=max_output)
        # Asked here, not in run(): update validators of the first activation run before run() does.
        self.gen = Generation.for_run(carried=self.carried)
        self.config_unwritten = False  # lean-start-v1: the config travels with the first write
        self.end_written = False  # the session's end is in the store (archive answers then)
        self.owner_unwritten = False  # lean-start-v1: AgentOwner goes with the first status
        self.fixed_tokens = 0  # tokens every model call carries besides messages (system prompt, tool specs)
        self.compacting = False  # a compaction's summary calls are under way
        self.turn_outcome: TurnOutcome | None = None  # ``ends_after_turn``: how its turn ended (the run's result carries it)
        # The start of this run: of the session for a new one (where its spend's wall time counts from).
        self.run_started = workflow.now()
        if not self.carried:
            # Sessions with these fields are newer than every recorded history: nothing here changes
            # an older session's commands.
            if config.budget is not None or config.ends_after_turn:
                self.state.started_at = self.run_started
            if config.prompt is not None and config.prompt.strip():
                self.inbox.add_message(config.owner, config.prompt)  # as if the owner sent it first

    @property
    def profile(self) -> ProfileInfo:
        assert self.state.profile is not None
        return self.state.profile

    def edit_problems(self, tool: str, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with edited ``arguments`` for ``tool`` (the model's calls' schema check)."""
        spec = self.tools.get(tool)
        return argument_problems(spec, arguments) if spec is not None else [f"unknown tool {tool!r}"]

    # ---------------------------------------------------------------- cancels

    def workflow_cancelled(self) -> bool:
        return workflow.cancellation_reason() is not None

    def cancel_request(self) -> CancelTurnInput | None:
        """The cancel asked for the running turn (``cancel_turn``), or None."""
        return self.turn.cancel_request if self.turn is not None else None

    def cancel_requested(self) -> bool:
        return (
            self.cancel_request() is not None
            or self.archive_request is not None
            or (self.gen.turn_control and self.workflow_cancelled())
        )

    def stop_after_step(self) -> bool:
        """A cancel arrived while a call that finished anyway was in flight: stop before the next step."""
        return self.gen.turn_control and self.cancel_requested()

    async def before_call(self) -> None:
        """Before a turn's next model or tool call; raises ``TurnCancelled`` if a cancel came meanwhile.

        Under ``lean-rounds-v1`` what is staged travels with the call (``writes_for_call``);
        older histories ``flush`` it first. A store write that completes in the workflow task
        that also brings the cancel returns normally (the SDK turns the turn task's cancellation
        into a cancel of the write, which had finished): without the check the next call would
        run, unasked and uncancelled.
        """
        if not self.gen.lean_rounds:
            await self.flush()
        await self.hold_while_paused()
        if self.stop_after_step():
            raise TurnCancelled()

    async def hold_while_paused(self) -> None:
        """While the session is paused (``pause``), write what is staged and wait: no model or tool
        call starts. A resume goes on; a cancel, an archive or the workflow's cancellation ends the
        wait at once (the caller meets it next). Nothing, not even an await, when not paused."""
        if self.state.paused is None:
            return
        self.show_details()
        await self.flush()
        await workflow.wait_condition(lambda: self.state.paused is None or self.cancel_requested() or self.ending())

    def cancel_reason(self) -> tuple[str | None, str | None]:
        """(principal, reason) of the cancel that ends the active turn."""
        request = self.cancel_request()
        if request is not None:
            return request.principal, request.reason
        if self.archive_request is not None:
            return self.archive_request.principal, "session archived"
        why = workflow.cancellation_reason()
        return "temporal", f"workflow cancelled{': ' + why if why else ''}"

    def ending(self) -> bool:
        """The session was archived, or (``turn-control-v1``) its workflow was cancelled."""
        return self.archive_request is not None or (self.gen.turn_control and self.workflow_cancelled())

    def cancelled_call(self, err: BaseException) -> bool:
        """``err`` is a call cut short by the workflow's cancellation (``turn-control-v1``)."""
        return self.gen.turn_control and self.workflow_cancelled() and is_cancelled_exception(err)

    def announce_workflow_cancel(self) -> None:
        """Record that Temporal asked for the cancel (``cancel_turn`` and ``archive`` record their own)."""
        turn = self.turn
        if (
            self.gen.turn_control
            and turn is not None
            and not turn.cancel_announced
            and turn.cancel_request is None
            and self.archive_request is None
            and self.workflow_cancelled()
        ):
            principal, reason = self.cancel_reason()
            self.emit(CancelRequested(turn_id=turn.id, principal=principal, reason=reason))
            turn.cancel_announced = True

    # ---------------------------------------------------------------- spend and budget

    def tracks_spend(self) -> bool:
        """The session counts its spend: it has a budget or ends after its turn (``SessionState.started_at`` is set)."""
        return self.state.started_at is not None

    def add_usage(self, usage: Usage, *, priced: bool = True) -> None:
        """Count a model call's tokens; ``priced``: by the session profile's price (when spend is tracked)."""
        self.state.usage = self.state.usage + usage
        price = self.profile.price
        if priced and price is not None and self.tracks_spend():
            self.state.cost_usd += price.cost(usage)

    def count_tool_calls(self, calls: int) -> None:
        """Count tool calls a model asked for (when spend is tracked), whether they run or not."""
        if self.tracks_spend():
            self.state.tool_calls += calls

    def spend(self) -> Spend:
        """What the session has used: all its tokens, the cost and tool calls counted since it
        tracks spend, and the seconds since it started (``workflow.now()``)."""
        started = self.state.started_at
        wall = max((workflow.now() - started).total_seconds(), 0.0) if started is not None else 0.0
        state = self.state
        return Spend(usage=state.usage, cost_usd=state.cost_usd, tool_calls=state.tool_calls, wall_seconds=wall)

    def budget_crossing(self) -> BudgetCrossing | None:
        """The limit of the session's budget its spend has crossed, or None (no budget, none crossed).

        Tokens, cost and wall time cross a limit they reach (``Budget.crossed``); tool calls are
        counted when the model asks for them, so a limit of N lets N calls run and is crossed
        by a batch that would take the count past N.
        """
        budget = self.config.budget
        if budget is None:
            return None
        spend = self.spend()
        crossing = budget.model_copy(update={"max_tool_calls": None}).crossed(spend)
        if crossing is None and budget.max_tool_calls is not None and spend.tool_calls > budget.max_tool_calls:
            crossing = BudgetCrossing(dimension="tool_calls", limit=budget.max_tool_calls, used=spend.tool_calls)
        return crossing

    def budget_note(self) -> str | None:
        """What is left of the budget, for the model's system prompt; None without a budget."""
        budget = self.config.budget
        return None if budget is None else "Remaining budget: " + budget.remaining(self.spend()).describe()

    # ---------------------------------------------------------------- store and events

    def stage_message(self, position: int, turn_id: str, message: Message) -> None:
        size = self.journal.stage_message(position, turn_id, message)
        self.track(position, message.role, size, message.state_keys)

    def track(self, position: int, role: str, size_bytes: int, state_keys: list[str]) -> None:
        """Add a message written by the workflow or an activity to the context bookkeeping."""
        if self.gen.context:
            context.add_entry(self.state.context, position, role, size_bytes, state_keys)

    def emit(self, event: Event) -> None:
        self.journal.emit(event, workflow.now())

    async def flush(self, include_config: bool = False) -> None:
        """Write staged messages and events to the store (idempotent by position and seq).

        A local activity under ``lean-rounds-v1``, a regular one in older histories.
        """
        if self.status == "awaiting_approval":
            self.show_details()  # what waits, and how to decide it, over the step's own line
        events, messages = self.journal.unflushed()
        include_config = include_config or self.config_unwritten
        if not events and not messages and not include_config:
            return
        await self.execute(
            options.STORE_WRITE,
            StoreAppendInput(
                session_id=self.config.session_id,
                config=self.config if include_config else None,
                messages=messages,
                events=events,
            ),
            local=self.gen.lean_rounds,
            summary=f"store {len(messages)} messages, {len(events)} events",
        )
        self.journal.flushed(len(events), len(messages))
        if include_config:
            self.config_unwritten = False

    def writes_for_call(self) -> StoreAppendInput | None:
        """What is staged, to travel in the next model or tool call's input (``lean-rounds-v1``).

        The activity writes it before its own work (a local tool call: with its result);
        ``call_wrote`` marks it written once the call returned. A call that fails leaves it
        staged for the next write (idempotent).
        """
        if not self.gen.lean_rounds:
            return None
        events, messages = self.journal.unflushed()
        if not events and not messages and not self.config_unwritten:
            return None
        config = self.config if self.config_unwritten else None
        return StoreAppendInput(session_id=self.config.session_id, config=config, messages=messages, events=events)

    def call_wrote(self, writes: StoreAppendInput | None) -> None:
        if writes is not None:
            self.journal.flushed(len(writes.events), len(writes.messages))
            if writes.config is not None:
                self.config_unwritten = False

    async def execute(
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
        else the workflow's). One that heartbeats gets the session's heartbeat timeout unless
        ``heartbeat_timeout`` is given."""
        self.gen.console()  # a new session's first command is an activity: the patch is asked before it
        if config.heartbeats and heartbeat_timeout is None:
            heartbeat_timeout = self.config.heartbeat_timeout_seconds
        return await config.execute(
            arg,
            local=local and self.gen.local_activities,
            summary=summary,
            result_type=result_type,
            start_to_close=start_to_close,
            heartbeat_timeout=heartbeat_timeout,
            task_queue=task_queue,
        )

    def memory_written(self, turn_id: str, call: ToolCall, note: MemoryNote) -> None:
        """Record what ``memory.write`` stored: a session memory is accepted at once; a workspace
        or user one waits for the owner's ``decide_memory``; a workspace status note was dropped
        (``MemoryDropped``, with why)."""
        if note.status == "dropped":
            self.emit(MemoryDropped(
                turn_id=turn_id, memory_id=note.memory_id, scope=note.scope, key=note.key, preview=note.preview,
                reason=note.reason or "status note", call_id=call.id,
            ))
            return
        if note.status == "accepted":
            self.emit(MemoryAccepted(turn_id=turn_id, memory_id=note.memory_id, scope=note.scope, key=note.key, call_id=call.id))
            return
        if all(p.memory_id != note.memory_id for p in self.state.memory_proposals):
            self.state.memory_proposals.append(
                MemoryProposal(memory_id=note.memory_id, scope=note.scope, key=note.key, turn_id=turn_id, call_id=call.id)
            )
        self.emit(MemoryProposed(
            turn_id=turn_id, memory_id=note.memory_id, scope=note.scope, key=note.key, preview=note.preview, call_id=call.id,
        ))

    # ---------------------------------------------------------------- status

    def set_status(self, status: SessionStatus, *, with_owner: bool = False) -> None:
        """Record ``status`` (search attribute ``AgentSessionStatus``) and show it in the current details.

        Under ``console-v1`` every search attribute of the session (``_console.Listing``) is
        written when its value differs from the workflow's, in one upsert, and not at all when
        none does. Before it: under ``lean-rounds-v1`` the owner is written once per run
        (``with_owner``: initialisation asks for it) instead of with every status; under
        ``lean-start-v1`` a session whose first message is already queued writes it with the
        ``running`` status that follows at once.
        """
        self.status = status
        if self.gen.console():
            self.owner_unwritten = False
            updates = console.changed(self.listing(), workflow.info().typed_search_attributes)
            if updates:
                workflow.upsert_search_attributes(updates)
        else:
            attributes = [SESSION_STATUS.value_set(self.shown_status())]
            if with_owner or self.owner_unwritten or not self.gen.lean_rounds:
                attributes.append(SESSION_OWNER.value_set(self.config.owner))
                self.owner_unwritten = False
            workflow.upsert_search_attributes(attributes)
        if status != "running" or self.state.paused is not None:
            self.show_details()  # a running turn's steps write their own (model, tool, advisor)

    def shown_status(self) -> SessionStatus:
        """The status the session shows: ``paused`` while it is paused (and not archived), else its own."""
        return "paused" if self.state.paused is not None and self.status != "archived" else self.status

    def listing(self) -> console.Listing:
        """The session's search attribute values: spend where the session counts it (a budget, or a
        task's, graph's or delegated session), once there is a cost."""
        return console.Listing(
            kind="session",
            owner=self.config.owner,
            status=self.shown_status(),
            profile=self.config.profile,
            pending_approvals=len(self.approvals.undecided()),
            spend_usd=console.spend_or_none(self.state.cost_usd) if self.tracks_spend() else None,
        )

    def show_details(self) -> None:
        """Current details: the status line and, for each request waiting for a decision, the JSON
        and commands that decide it (``_console.session_details``)."""
        listing = self.listing()
        workflow.set_current_details(
            console.session_details(
                workflow_id=workflow.info().workflow_id,
                session_id=self.config.session_id,
                owner=self.config.owner,
                status=self.shown_status(),
                profile=self.config.profile,
                turns=self.state.turns_completed,
                pending=self.approvals.undecided() if self.status == "awaiting_approval" else (),
                paused=self.state.paused,
                spend_usd=listing.spend_usd,
            )
        )

    # ---------------------------------------------------------------- queued turns

    def cancel_queued(self, queued: QueuedOperation, principal: str | None, reason: str | None, error: str) -> None:
        """End a turn that never started, or answer an operation that never ran."""
        if queued.kind != "message":
            self.inbox.finish(queued.op_id, "the session was archived first")
            return
        outcome = TurnOutcome(turn_id=queued.op_id, status="cancelled", error=error)
        self.emit(SessionCancelled(turn_id=queued.op_id, principal=principal, reason=reason))
        self.emit(TurnEnded(turn_id=queued.op_id, status="cancelled", rounds=0, error=error, usage=Usage()))
        self.inbox.record(outcome)

    def hold_outcomes(self) -> None:
        """Until ``publish_held``, turns cancelled before they started keep their outcomes back, so
        that a client that sees one finds the turn's end in the store (``regular-activities-v1``;
        before it a local store write held the whole workflow task back, the outcome with it)."""
        if not self.gen.local_activities:
            self.inbox.hold()

    def publish_held(self) -> None:
        """Publish the outcomes ``hold_outcomes`` kept back (their events are written now)."""
        self.inbox.publish_held()

    # ---------------------------------------------------------------- the state query

    def view(self) -> SessionStateView:
        """What the ``state`` query answers."""
        turn = self.turn
        status = "cancelling" if turn is not None and self.cancel_requested() else self.shown_status()
        if self.failure is not None:
            status = "failed"
        fields: dict[str, Any] = {}
        if self.gen.context:
            fields = {
                "context_window": self.profile.context_window,
                "max_output_tokens": self.profile.max_output_tokens,
                "context_tokens": compaction.planned_tokens(self.state.context, fixed_tokens=self.fixed_tokens, profile=self.profile),
                "live_tokens": context.context_tokens(self.state.context, self.fixed_tokens),
            }
        budget = self.config.budget
        if budget is not None or self.tracks_spend():
            spend = self.spend()
            fields["spend"] = spend
            if budget is not None:
                fields["budget"], fields["remaining"] = budget, budget.remaining(spend)
        config = self.config
        return SessionStateView(
            session_id=config.session_id,
            owner=config.owner,
            operators=list(config.operators),
            strangers_ignored=self.state.strangers_ignored,
            sandbox=config.sandbox,
            network=config.network,
            approval_mode=config.approval.mode,
            status=status,
            error=self.failure,
            profile=config.profile,
            agent=config.agent,
            title=config.title,
            workspace=config.workspace,
            active_turn_id=turn.id if turn is not None else None,
            queued_turn_ids=self.inbox.queued_turn_ids(),
            pending_approvals=self.approvals.undecided(),
            pending_memories=list(self.state.memory_proposals),
            advisor=config.advisor.mode,
            turns_completed=self.state.turns_completed,
            usage=self.state.usage,
            last_seq=self.journal.last_seq,
            current_round=turn.round if turn is not None else self.last_round,
            summary_id=self.state.context.summary_id,
            compactions=self.state.context.compactions,
            run=self.state.run,
            first_seq_in_run=self.journal.first_seq,
            paused=self.state.paused,
            **fields,
        )
