"""SessionWorkflow: a durable conversation whose turn loop survives worker and server crashes.

One workflow per session (id ``session-<session_id>``). Messages arrive through the
``send_message`` update and queue in an inbox; one turn runs at a time:

    model activity -> tool calls -> policy decision -> approval wait (signal)
    -> tool activities -> results back to the model -> ... -> final answer

It holds one ``SessionState`` and continues as new with it. ``@workflow.init`` builds the run
(``SessionRun``: config, state, journal, inbox, approvals, status, generation) and the steps over
it (``TurnLoop`` with a ``Turn`` per turn, ``ToolCalls``, ``Mcp``, ``Delegations``, ``Context``,
``SessionControl``, ``Continuation``); this module keeps the run loop and the handlers, which
delegate to those steps. Content lives in the store; activities get positions, not content.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from agentrt.schemas import (
    CHILD_SPEND_SIGNAL,
    MODEL_CALL_RETRIED_SIGNAL,
    SEARCH_ATTRIBUTE_KEYS,
    SESSION_WORKFLOW,
    SET_PAUSED_SIGNAL,
    UPGRADE_SIGNAL,
    ArchiveInput,
    CancelTurnInput,
    ChildSpendReport,
    CompactOutcome,
    CompactRequest,
    ElicitationAnswer,
    EventsPage,
    EventsQuery,
    MemoryDecision,
    ModelCallRetried,
    ModelCallRetry,
    PauseInput,
    PermissionDecision,
    QueuedOperation,
    RaiseBudgetInput,
    ReconcileDecision,
    RenameInput,
    SendMessageInput,
    SendMessageResult,
    SessionArchived,
    SessionInput,
    SessionResult,
    SessionStateView,
    SetPausedInput,
    SwitchModelInput,
    SwitchModelResult,
    TurnOutcome,
    WaitTurnInput,
    session_workflow_id,
)
from agentrt.workflows import _compaction as compaction
from agentrt.workflows._children import report_cancelled
from agentrt.workflows._context_steps import Context
from agentrt.workflows._continuation import Continuation
from agentrt.workflows._delegate_steps import Delegations
from agentrt.workflows._inbox import FORGOTTEN_TURN, RECENT_OUTCOMES
from agentrt.workflows._mcp_steps import Mcp
from agentrt.workflows._pause import SessionPause
from agentrt.workflows._session_control import MAX_WAIT_TURN_SECONDS, SessionControl
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_steps import ToolCalls
from agentrt.workflows._turn import TurnLoop

# The reason of the SessionArchived that ends an ``ends_after_turn`` session after its turn.
ENDED_AFTER_TURN = "ended after its turn"

__all__ = ["FORGOTTEN_TURN", "MAX_WAIT_TURN_SECONDS", "RECENT_OUTCOMES", "SEARCH_ATTRIBUTE_KEYS", "SessionWorkflow", "workflow_id_for"]

workflow_id_for = session_workflow_id


# Not sandboxed: the sandbox re-imports a workflow's modules for every run and routes every
# activation and payload through its proxies, about half of a round's worker CPU. What it
# guards, the session's modules keep by construction (they import only temporalio,
# agentrt.schemas, each other and pure standard-library names; tests/workflows/test_determinism.py
# reads them for that), and replaying the committed histories checks the rest.
@workflow.defn(name=SESSION_WORKFLOW, sandboxed=False)
class SessionWorkflow:
    @workflow.init
    def __init__(self, input: SessionInput) -> None:
        self._run = run = SessionRun(input)
        self._mcp = Mcp(run)
        self._delegations = Delegations(run)
        self._tool_calls = ToolCalls(run, self._mcp, self._delegations)
        self._turns = TurnLoop(run, self._tool_calls, self._mcp)
        self._context = Context(run)
        self._control = SessionControl(run)
        self._continuation = Continuation(run, self._delegations)  # wait_turn answers "ask again" while it drains
        self._pause = SessionPause(run, self._control, self._delegations.children)
        self._retries_recorded: set[tuple[str | None, int, int]] = set()  # (turn, round, attempt): ModelCallRetried

    # ---------------------------------------------------------------- run

    @workflow.run
    async def run(self, input: SessionInput) -> SessionResult:
        run = self._run
        expected = session_workflow_id(input.config.session_id)
        if run.gen.lean_start and workflow.info().workflow_id != expected:
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
                await workflow.wait_condition(lambda: bool(run.inbox) or run.ending() or self._continuation.due())
                if run.ending():
                    break
                if self._continuation.due():
                    if await self._continuation.drain_handlers(self._run_operation):
                        self._continuation.continue_as_new()
                    elif run.inbox and not run.ending():
                        # A model switch or compaction waits behind this message: it runs first.
                        await self._run_operation(run.inbox.pop())
                    continue
                await self._run_operation(run.inbox.pop())
        except (asyncio.CancelledError, ActivityError) as err:
            # The workflow's cancellation surfaces where the run awaited: a condition, or the
            # ActivityError of the call in flight (a store write, a compaction, a tool listing).
            if not run.ending() or not (isinstance(err, asyncio.CancelledError) or run.cancelled_call(err)):
                raise
        except ApplicationError as err:
            run.failure = f"{err.type}: {err.message}" if err.type else err.message  # the state query shows it
            raise
        await self._delegations.end_all()
        result = await self._close()
        if run.archive_request is None:
            if workflow.info().parent is not None and run.gen.child_spend_report():
                await report_cancelled(run.config.session_id, result)  # a Canceled end carries no result
            raise asyncio.CancelledError(run.cancel_reason()[1])  # the workflow ends Canceled, as asked
        return result

    async def _initialize(self) -> None:
        """A continued run resumes; a new one initialises, then applies the cancels that came first."""
        if self._run.carried:
            await self._context.resume()
            return
        early = await self._context.initialize()
        for cancel in early:
            self._control.cancel_turn(cancel)
        await self._context.open(cancelled=bool(early))

    async def _run_operation(self, operation: QueuedOperation) -> None:
        self._run.doing = operation  # a send-only-if-idle message is refused until it is done
        try:
            if operation.kind == "message":
                await self._run_message(operation)
                return
            result: SwitchModelResult | CompactOutcome | str = "the session ended first"
            try:
                result = await (self._context.compact("requested", principal=operation.principal) if operation.kind == "compact" else self._context.switch_model(operation))
            finally:
                self._run.inbox.finish(operation.op_id, result)  # the caller's update must never wait forever
            self._run.set_status("idle")
        finally:
            self._run.doing = None

    async def _run_message(self, operation: QueuedOperation) -> None:
        run = self._run
        outcome = await self._turns.play(operation)
        assert run.turn is not None
        self._turns.finish(run.turn, outcome)
        try:
            await self._tool_calls.settle_owed_reconciles()
            await run.flush()
        finally:
            # Published only now, so a client that saw the outcome finds the whole turn in the store.
            run.inbox.record(outcome)
        if run.config.ends_after_turn and run.turn_outcome is None:
            run.turn_outcome = outcome
            if not run.ending():  # an archive or a workflow cancellation meanwhile ends it their way
                run.archive_request = ArchiveInput(principal=run.config.owner, reason=ENDED_AFTER_TURN)
            return
        if not run.gen.context or (run.gen.turn_control and run.ending()):
            return  # an ending session summarises nothing more
        state = run.state
        compact, state.auto_compaction_pause = compaction.needs_auto_compaction(
            state.context, state.auto_compaction_pause, fixed_tokens=run.fixed_tokens, profile=run.profile,
            threshold=run.config.compact_threshold,
        )
        if compact:
            if (await self._context.compact("threshold")).error is not None:
                state.auto_compaction_pause = compaction.AUTO_COMPACTION_PAUSE_TURNS
            run.set_status("idle")

    async def _close(self) -> SessionResult:
        """End the session (archive, workflow cancellation, or the end of an ``ends_after_turn`` session's
        turn): queued turns are cancelled, the rest recorded. The result of a session that tracks
        spend carries it; an ``ends_after_turn`` session's carries its turn's outcome."""
        run = self._run
        principal = run.archive_request.principal if run.archive_request else "temporal"
        reason = run.archive_request.reason if run.archive_request else run.cancel_reason()[1]
        run.hold_outcomes()
        for queued in run.inbox.drain():
            run.cancel_queued(queued, principal, "session archived", "session archived")
        run.emit(SessionArchived(principal=principal, reason=reason))
        run.set_status("archived")
        try:
            await self._tool_calls.settle_owed_reconciles()  # owed only when the workflow's cancel cut the first try short
            await run.flush()
        except ActivityError as err:
            if not run.cancelled_call(err):
                raise
            # Cancelled while the end was being written (after an archive): write it all the same.
            await self._tool_calls.settle_owed_reconciles()
            await run.flush()
        run.publish_held()
        run.end_written = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SessionResult(
            session_id=run.config.session_id,
            turns=run.state.turns_completed,
            usage=run.state.usage,
            status="archived",
            outcome=run.turn_outcome if run.config.ends_after_turn else None,
            spend=run.spend() if run.tracks_spend() else None,
        )

    # ---------------------------------------------------------------- updates

    @workflow.update
    def send_message(self, input: SendMessageInput) -> SendMessageResult:
        """Queue a message; answers its turn id and how much runs before it. A message sent again
        with its ``idempotency_key`` is not queued again: the answer names the first one's turn
        (``queued_behind`` as it stands now)."""
        turn_id = self._control.queue_message(input)
        ahead = self._run.inbox.queued_ahead(turn_id, self._run.turn is not None)
        return SendMessageResult(turn_id=turn_id, queued_behind=ahead)

    @send_message.validator
    def _validate_send_message(self, input: SendMessageInput) -> None:
        self._control.validate_send_message(input)

    @workflow.update
    async def send_and_wait(self, input: SendMessageInput) -> TurnOutcome:
        """Queue a message and answer with its turn's outcome once the turn ends: ``send_message``
        and ``wait_turn`` in one update (with update-with-start, a session's start, first message
        and outcome in one call). ``pending`` with ``ask_again`` when the session continues as
        new before the turn ends: wait for ``turn_id`` with ``wait_turn``. A message sent again with
        its ``idempotency_key`` is not queued again: this answers for the first one's turn
        (``pending`` with ``ask_again`` when its outcome is no longer held: it is in the store)."""
        inbox = self._run.inbox
        turn_id = self._control.queue_message(input)
        if input.idempotency_key is not None and (inbox.outcome(turn_id) is None and inbox.is_forgotten_turn(turn_id)):
            return TurnOutcome(turn_id=turn_id, status="pending", ask_again=True)
        await workflow.wait_condition(lambda: inbox.outcome(turn_id) is not None or self._continuation.draining)
        return inbox.outcome(turn_id) or TurnOutcome(turn_id=turn_id, status="pending", ask_again=True)

    @send_and_wait.validator
    def _validate_send_and_wait(self, input: SendMessageInput) -> None:
        self._control.validate_send_message(input)

    @workflow.update
    async def wait_turn(self, input: WaitTurnInput) -> TurnOutcome:
        """The turn's outcome once it ends; ``pending`` when ``timeout_seconds`` passed first, or
        with ``ask_again`` when the session continues as new meanwhile (wait again)."""
        inbox = self._run.inbox
        ended = inbox.outcome(input.turn_id)
        if ended is not None:
            return ended  # answered before waiting: a zero timeout expires before a condition is checked
        timeout = timedelta(seconds=input.timeout_seconds) if input.timeout_seconds is not None else None
        try:
            await workflow.wait_condition(
                lambda: inbox.outcome(input.turn_id) is not None or self._continuation.draining,
                timeout=timeout,
                timeout_summary=f"wait for {input.turn_id} (at most {input.timeout_seconds or 0:g} s)" if timeout else None,
            )
        except asyncio.TimeoutError:
            return TurnOutcome(turn_id=input.turn_id, status="pending")
        outcome = inbox.outcome(input.turn_id)
        return outcome or TurnOutcome(turn_id=input.turn_id, status="pending", ask_again=True)

    @wait_turn.validator
    def _validate_wait_turn(self, input: WaitTurnInput) -> None:
        self._control.validate_wait_turn(input)

    @workflow.update
    async def archive(self, input: ArchiveInput) -> SessionStateView:
        """End the session: the running turn is cancelled, queued ones too. An idle session answers
        once its end is in the store and its workflow ends with the answer (``regular-activities-v1``;
        before it, a local store write held the answer back as long); a busy one answers at once."""
        return await self._control.archive(input)

    @archive.validator
    def _validate_archive(self, input: ArchiveInput) -> None:
        self._control.validate_archive(input)

    @workflow.update
    async def raise_budget(self, input: RaiseBudgetInput) -> SessionStateView:
        """Raise the session's budget: every limit ``input.budget`` sets replaces the current one (a
        session without a budget gets one). ``BudgetRaised`` is written to the store before this
        answers; a turn that ended ``budget_exceeded`` can be followed by one that runs."""
        return await self._control.raise_budget(input)

    @raise_budget.validator
    def _validate_raise_budget(self, input: RaiseBudgetInput) -> None:
        self._control.validate_raise_budget(input)

    @workflow.update
    async def rename(self, input: RenameInput) -> SessionStateView:
        """Give the session another title (None clears it): ``SessionRenamed``, written to the store
        (its session row too) before this answers; the title it has already changes nothing."""
        return await self._control.rename(input)

    @rename.validator
    def _validate_rename(self, input: RenameInput) -> None:
        self._control.validate_rename(input)

    @workflow.update
    async def switch_model(self, input: SwitchModelInput) -> SwitchModelResult:
        """Queue a switch to ``input.profile`` behind the active turn and wait until it is done.

        Compacts first when the conversation does not fit the new window. Fails with
        ``ApplicationError(type="ModelSwitchFailed")`` for an unknown profile.
        """
        result = await self._control.queue_operation("switch_model", input.principal, input.profile)
        if isinstance(result, str):
            raise ApplicationError(result, type="ModelSwitchFailed", non_retryable=True)
        assert isinstance(result, SwitchModelResult)
        return result

    @switch_model.validator
    def _validate_switch_model(self, input: SwitchModelInput) -> None:
        self._control.validate_switch_model(input)

    @workflow.update
    async def compact(self, input: CompactRequest) -> CompactOutcome:
        """Compact the context now (behind the active turn); joins a compaction already queued."""
        result = await self._control.request_compaction(input.principal)
        if isinstance(result, str):
            raise ApplicationError(result, type="CompactionFailed", non_retryable=True)
        assert isinstance(result, CompactOutcome)
        return result

    @compact.validator
    def _validate_compact(self, input: CompactRequest) -> None:
        self._control.validate_compact(input)

    @workflow.update
    def decide(self, input: PermissionDecision) -> None:
        """Like signal ``permission_decision``, but a decision that would be ignored is rejected with the reason."""
        self.permission_decision(input)

    @decide.validator
    def _validate_decide(self, input: PermissionDecision) -> None:
        self._control.validate_decide(input)

    @workflow.update
    def answer_elicitation(self, input: ElicitationAnswer) -> None:
        """Answer what an MCP server asked in the middle of a call (a ``PermissionRequested`` of kind
        ``elicitation``): ``accept`` with content matching its schema, ``decline`` or ``cancel``.
        The call runs again with the answer (``ElicitationAnswered``). An answer that would be
        ignored (a stranger's, a second one, content off the schema) is rejected with the reason."""
        self._control.apply_decision(input, "answer", input.reason)

    @answer_elicitation.validator
    def _validate_answer_elicitation(self, input: ElicitationAnswer) -> None:
        self._control.validate_answer_elicitation(input)

    @workflow.update
    def decide_reconcile(self, input: ReconcileDecision) -> None:
        """Like signal ``reconcile``, but an answer that would be ignored is rejected with the reason."""
        self.reconcile(input)

    @decide_reconcile.validator
    def _validate_decide_reconcile(self, input: ReconcileDecision) -> None:
        self._control.validate_decide_reconcile(input)

    @workflow.update
    async def decide_memory(self, input: MemoryDecision) -> None:
        """The owner accepts or rejects a memory this session proposed (``memory.write`` with scope
        ``workspace`` or ``user``): the store records it (activity ``memory.decide``), then
        ``MemoryAccepted`` or ``MemoryRejected``. Only accepted memories reach a context.
        Fails with ``ApplicationError`` (the store's error type) when the store refuses it."""
        await self._control.decide_memory(input)

    @decide_memory.validator
    def _validate_decide_memory(self, input: MemoryDecision) -> None:
        self._control.validate_decide_memory(input)

    @workflow.update
    def cancel(self, input: CancelTurnInput) -> None:
        """Like signal ``cancel_turn``, but a cancel that would change nothing is rejected with the reason."""
        self.cancel_turn(input)

    @cancel.validator
    def _validate_cancel(self, input: CancelTurnInput) -> None:
        self._control.validate_cancel(input)

    @workflow.update
    async def pause(self, input: PauseInput) -> SessionStateView:
        """Start no model or tool call (one in flight finishes) until ``resume``; messages queue meanwhile."""
        return await self._pause.apply(input, paused=True)

    @pause.validator
    def _validate_pause(self, input: PauseInput) -> None:
        self._pause.validate(input, "pause")

    @workflow.update
    async def resume(self, input: PauseInput) -> SessionStateView:
        """Go on where the session stopped (workflows/_pause.py); neither update is an error when it changes nothing."""
        return await self._pause.apply(input, paused=False)

    @resume.validator
    def _validate_resume(self, input: PauseInput) -> None:
        self._pause.validate(input, "resume")

    # ---------------------------------------------------------------- signals

    @workflow.signal(name=SET_PAUSED_SIGNAL)
    async def set_paused(self, input: SetPausedInput) -> None:
        await self._pause.signalled(input)  # a task's, a graph's or a delegating session's pause of this one

    @workflow.signal
    def permission_decision(self, input: PermissionDecision) -> None:
        self._control.apply_decision(input, input.decision, input.reason)

    @workflow.signal
    def reconcile(self, input: ReconcileDecision) -> None:
        self._control.apply_decision(input, "reconcile", input.note)

    @workflow.signal
    def elicitation_answer(self, input: ElicitationAnswer) -> None:
        """Like update ``answer_elicitation``, durable while no worker runs; an answer that would
        change nothing is recorded as ``PermissionDecisionIgnored`` with why."""
        self._control.apply_decision(input, "answer", input.reason)

    @workflow.signal
    def cancel_turn(self, input: CancelTurnInput) -> None:
        self._control.cancel_turn(input)

    @workflow.signal(name=UPGRADE_SIGNAL)
    def upgrade(self) -> None:
        """A newer build of the session's deployment is current (its workers say so): this wakes an
        idle run, which continues as new onto it (workflows/_continuation.py)."""

    @workflow.signal(name=CHILD_SPEND_SIGNAL)
    def child_spend(self, input: ChildSpendReport) -> None:
        self._delegations.children.record(input)  # a delegated session's, as it ends cancelled

    @workflow.signal(name=MODEL_CALL_RETRIED_SIGNAL)
    def model_call_retried(self, input: ModelCallRetry) -> None:
        """A model call's attempt failed and is retried (sent by the activity): recorded as
        ``ModelCallRetried``, once per attempt, so the session's events show each retry as it happens."""
        attempt = (input.turn_id, input.round, input.attempt)
        if attempt not in self._retries_recorded:  # the failing attempt and its retry may both say so
            self._retries_recorded.add(attempt)
            self._run.emit(ModelCallRetried(**input.model_dump()))

    # ---------------------------------------------------------------- queries

    @workflow.query
    def state(self) -> SessionStateView:
        return self._run.view()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return self._run.journal.page(input.since_seq, input.limit)

    @workflow.query
    def turn(self, turn_id: str) -> TurnOutcome | None:
        """The turn's outcome, or None while it is queued or running; fails for an unknown turn."""
        return self._control.turn_outcome(turn_id)
