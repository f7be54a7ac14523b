"""Who may act on a session, and what its updates and signals do: the bodies of its handlers.

``SessionControl`` is one of ``SessionWorkflow``'s steps, over its ``SessionRun``: the update
validators (standing of the principal, what a request would change), the queueing of
messages and operations, decisions and cancels as they are recorded, and the updates that
write to the store themselves (``raise_budget``, ``decide_memory``). ``SessionWorkflow``'s
handlers delegate here. Workflow code only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from agentrt.schemas import (
    ArchiveInput,
    Budget,
    BudgetRaised,
    CancelIgnored,
    CancelRequested,
    CancelTurnInput,
    CompactOutcome,
    CompactRequest,
    ContextCompactionSkipped,
    ElicitationAnswer,
    Event,
    MemoryAccepted,
    MemoryDecideInput,
    MemoryDecision,
    MemoryRejected,
    OperatorActed,
    PermissionDecision,
    PermissionDecisionIgnored,
    RaiseBudgetInput,
    ReconcileDecision,
    RenameInput,
    SendMessageInput,
    SessionRenamed,
    SessionStateView,
    StoreAppendInput,
    SwitchModelInput,
    TurnOutcome,
    WaitTurnInput,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import context
from agentrt.workflows._approvals import Standing, ignored_text, standing
from agentrt.workflows._errors import error_text, rejected
from agentrt.workflows._idempotency import key_reused_text
from agentrt.workflows._session_run import SessionRun

# The longest ``wait_turn`` timeout (seconds, ten years): a longer one fits no timer.
MAX_WAIT_TURN_SECONDS = 10 * 365 * 24 * 3600
# A stranger's ignored decisions and cancels recorded as events per run (stranger-limit-v1); the rest are counted.
MAX_RECORDED_STRANGER_EVENTS = 20


class SessionControl:
    """The standing checks, validators and recorded decisions and cancels of one session run."""

    def __init__(self, run: SessionRun) -> None:
        self.run = run

    # ---------------------------------------------------------------- standing

    def standing(self, principal: str | None, reason: str | None) -> Standing:
        config = self.run.config
        return standing(config.owner, config.operators, principal, reason)

    def _standing_refusal(self, principal: str | None, reason: str | None, verb: str) -> str | None:
        """Why ``principal`` may not ``verb`` this session (neither the owner nor, with a reason, an
        operator), or None."""
        config = self.run.config
        who = self.standing(principal, reason)
        if who == "not_owner":
            return f"principal {principal!r} may not {verb} session {config.session_id}: not its owner"
        if who == "no_reason":
            return f"operator {principal!r} must give a reason to {verb} session {config.session_id}, which it does not own"
        return None

    def check_owner_or_operator(self, principal: str | None, reason: str | None, verb: str) -> None:
        """Refuse (update validators) a principal that is neither the owner nor, with a reason, an operator."""
        why = self._standing_refusal(principal, reason, verb)
        if why is not None:
            raise rejected(why)

    def validate_operation(self, principal: str, verb: str) -> None:
        """Refuse an operation on an archived or ending session, or by anyone but the owner."""
        run, session = self.run, self.run.config.session_id
        if run.archive_request is not None:
            raise rejected(f"session {session} is archived")
        if run.ending():
            raise rejected(f"session {session} is ending: its workflow was cancelled")
        if principal != run.config.owner:
            raise rejected(f"principal {principal!r} may not {verb} session {session}: not its owner")

    def validate_switch_model(self, input: SwitchModelInput) -> None:
        self.validate_operation(input.principal, "switch the model of")
        if not input.profile.strip():
            raise rejected("profile name is empty")
        if not self.run.gen.context:
            raise rejected(f"session {self.run.config.session_id} predates model switching; start a new session")

    def validate_compact(self, input: CompactRequest) -> None:
        self.validate_operation(input.principal, "compact")
        if not self.run.gen.context:
            raise rejected(f"session {self.run.config.session_id} predates compaction; start a new session")

    def validate_wait_turn(self, input: WaitTurnInput) -> None:
        if input.timeout_seconds is not None and input.timeout_seconds < 0:
            raise rejected(f"timeout_seconds must be >= 0, got {input.timeout_seconds:g}")
        if input.timeout_seconds is not None and input.timeout_seconds > MAX_WAIT_TURN_SECONDS:
            raise rejected(
                f"timeout_seconds must be at most {MAX_WAIT_TURN_SECONDS} (ten years), got {input.timeout_seconds:g}; "
                "leave it out to wait without a bound"
            )
        why = self.run.inbox.unknown_or_forgotten(input.turn_id)
        if why is not None:
            raise rejected(why)

    # ---------------------------------------------------------------- messages and operations

    def validate_send_message(self, input: SendMessageInput) -> None:
        config = self.run.config
        if not input.text.strip():
            raise rejected("message text is empty")
        self.validate_operation(input.principal, "send to")
        if config.ends_after_turn:
            parent = config.parent
            steer = ""
            if parent is not None and parent.kind == "task":
                steer = f"; steer task {parent.id} instead (agentrt task amend)"
            elif parent is not None and parent.kind == "session":
                steer = f"; its answer goes to session {parent.id}, which delegated to it"
            raise rejected(f"session {config.session_id} runs one turn and ends: it takes no messages{steer}")
        self.check_idempotency_key(input)
        self.check_idle(input)

    def busy(self) -> tuple[str, str | None] | None:
        """What keeps the session from starting a message's turn at once, or None when it is idle:
        (``compaction``, None), (``turn``, the running turn's id), (``model_switch``, None), or
        (``queued``, None) when a message or operation waits to run."""
        run = self.run
        if run.compacting:
            return "compaction", None
        if run.turn is not None:
            return "turn", run.turn.id
        if run.doing is not None:
            kinds = {"message": "turn", "compact": "compaction", "switch_model": "model_switch"}
            return kinds[run.doing.kind], run.doing.op_id if run.doing.kind == "message" else None
        return ("queued", None) if run.inbox else None

    def check_idle(self, message: SendMessageInput) -> None:
        """Refuse a send-only-if-idle message (``if_idle``) with ``SessionBusy`` while the session is
        ``busy``: nothing is queued. A repeat of a keyed message answers the first one's turn instead."""
        busy = self.busy() if message.if_idle and self.run.sent_keys.first(message) is None else None
        if busy is None:
            return
        what, turn_id = busy
        doing = {
            "turn": f"turn {turn_id} is running", "compaction": "its context is being compacted",
            "model_switch": "it is switching its model", "queued": "messages or operations are queued",
        }[what]
        raise ApplicationError(
            f"session {self.run.config.session_id} is busy: {doing}; the message was not queued "
            "(send it without if_idle to queue it behind)",
            {"busy": what, "turn_id": turn_id},
            type="SessionBusy",
            non_retryable=True,
        )

    def queue_message(self, message: SendMessageInput) -> str:
        """Queue ``message`` as a turn; returns its turn id.

        A message sent again with an idempotency key its principal used before is not queued:
        the first message's turn id is returned. The same key with another text raises
        ``RequestRejected`` (``ApplicationError``; the validator refuses it first, this catches two
        such messages accepted in one workflow task). Without a key nothing here differs from a
        plain ``Inbox.add_message``.
        """
        run = self.run
        sent = run.sent_keys.first(message)
        if sent is not None:
            self.check_idempotency_key(message)
            return sent.turn_id
        self.check_idle(message)  # two accepted in one workflow task: the second finds the first queued
        turn_id = run.inbox.add_message(message.principal, message.text, message.output)
        run.sent_keys.remember(message, turn_id)
        return turn_id

    def check_idempotency_key(self, message: SendMessageInput) -> None:
        """Refuse (update validators) a message whose idempotency key was used for another text."""
        sent = self.run.sent_keys.reused_for(message)
        if sent is not None:
            assert message.idempotency_key is not None
            raise rejected(key_reused_text(message.idempotency_key, sent.turn_id, self.run.config.session_id))

    async def request_compaction(self, principal: str) -> Any:
        """An update ``compact``: queued behind the active turn, joining a compaction already queued.
        One that comes while a compaction runs or is queued records ``ContextCompactionSkipped``
        (``already_compacting``, ``context-events-v1``); while one runs it is answered at once."""
        run = self.run
        queued = any(q.kind == "compact" for q in run.state.inbox)
        if (run.compacting or queued) and run.gen.context_events():
            run.emit(ContextCompactionSkipped(
                trigger="requested", reason="already_compacting", principal=principal,
                estimated_tokens=context.context_tokens(run.state.context, run.fixed_tokens),
            ))
            if not queued:
                return CompactOutcome(compacted=False, reason="already compacting: a compaction is running now")
        return await self.queue_operation("compact", principal)

    async def queue_operation(self, kind: Any, principal: str, profile: str | None = None) -> Any:
        """Queue a model switch or compaction behind the active turn; its result once it ran."""
        inbox = self.run.inbox
        op_id = inbox.add_operation(kind, principal, profile)
        inbox.expect(op_id)
        await workflow.wait_condition(lambda: inbox.has_result(op_id))
        return inbox.collect(op_id)

    # ---------------------------------------------------------------- decisions

    def emit_ignored(self, event: Event, stranger: bool) -> None:
        """Record an ignored decision or cancel; a stranger's only up to ``MAX_RECORDED_STRANGER_EVENTS``
        per run (counted beyond that in ``SessionState.strangers_ignored``), so that strangers
        cannot grow the session's events and store at will (``stranger-limit-v1``)."""
        run = self.run
        if stranger:
            run.state.strangers_ignored += 1
            if run.state.strangers_ignored > MAX_RECORDED_STRANGER_EVENTS and run.gen.stranger_limit():
                return
        run.emit(event)

    def apply_decision(self, input: PermissionDecision | ReconcileDecision | ElicitationAnswer, action: Any, reason: str | None) -> None:
        """Record a decision (or why it was ignored); an operator's is also ``OperatorActed``."""
        event = self.run.approvals.decide(input)
        if isinstance(event, PermissionDecisionIgnored):
            return self.emit_ignored(event, event.why == "not_owner")
        self.run.emit(event)
        if self.standing(input.principal, reason) == "operator":
            self.run.emit(OperatorActed(principal=input.principal, action=action, target=input.request_id, reason=reason or ""))

    def validate_decide(self, input: PermissionDecision) -> None:
        approvals = self.run.approvals
        why = approvals.why_ignored(
            input.request_id, input.principal, "tool_call", input.call_id, input.arguments_sha256, input.arguments,
            input.decision, input.reason,
        )
        if why is not None:
            text = ignored_text(why, input.request_id, input.principal)
            pending = next((r for r in approvals.undecided() if r.request_id == input.request_id), None)
            if why == "invalid_edit" and pending is not None and input.arguments is not None:
                text += ": " + ("; ".join(self.run.edit_problems(pending.tool, input.arguments)) or "a deny cannot edit")
            raise rejected(text)

    def validate_answer_elicitation(self, input: ElicitationAnswer) -> None:
        approvals = self.run.approvals
        why = approvals.why_ignored(input.request_id, input.principal, "elicitation", reason=input.reason)
        if why is not None:
            raise rejected(ignored_text(why, input.request_id, input.principal))
        problems = approvals.answer_problems(input)
        if problems:
            raise rejected(ignored_text("invalid_answer", input.request_id, input.principal) + ": " + "; ".join(problems))

    def validate_decide_reconcile(self, input: ReconcileDecision) -> None:
        why = self.run.approvals.why_ignored(input.request_id, input.principal, "reconcile", reason=input.note)
        if why is not None:
            raise rejected(ignored_text(why, input.request_id, input.principal))

    # ---------------------------------------------------------------- cancel and archive

    def cancel_turn(self, input: CancelTurnInput) -> None:
        """What signal ``cancel_turn`` does: cancel the named (or running) turn, queued ones with
        ``include_queued``; a stranger's or a reasonless operator's cancel is recorded as ignored."""
        run = self.run
        if run.gen.turn_control and not run.initialized:
            run.early_cancels.append(input)  # applied once SessionInitialized is the first event
            return
        if input.principal is None and run.gen.principal_required():
            self.emit_ignored(CancelIgnored(turn_id=input.turn_id, principal="", why="no_principal"), stranger=True)
            return
        who = self.standing(input.principal, input.reason) if input.principal is not None else "owner"
        # Only a named principal stands otherwise than "owner".
        if who == "not_owner":
            assert input.principal is not None
            self.emit_ignored(CancelIgnored(turn_id=input.turn_id, principal=input.principal, why="not_owner"), stranger=True)
            return
        if who == "no_reason":
            assert input.principal is not None
            run.emit(CancelIgnored(turn_id=input.turn_id, principal=input.principal, why="no_reason"))
            return
        if who == "operator":
            assert input.principal is not None
            run.emit(OperatorActed(principal=input.principal, action="cancel", target=input.turn_id, reason=input.reason or ""))
        turn = run.turn
        if input.include_queued:
            dropped = run.inbox.remove_turns()
        else:
            target = input.turn_id
            if target is None and run.gen.turn_control and turn is None:
                target = next(iter(run.inbox.queued_turn_ids()), None)  # the turn about to run
            named = run.inbox.remove_turn(target) if target is not None else None
            dropped = [named] if named is not None else []
        for queued in dropped:
            run.cancel_queued(queued, input.principal, input.reason, "cancelled before it started")
        if dropped and not input.include_queued:
            return  # the named turn was queued: the running one goes on
        if turn is None or turn.task is None or turn.task.done() or turn.cancel_request is not None:
            return
        if input.turn_id is not None and input.turn_id != turn.id and not input.include_queued:
            return
        turn.cancel_request = input
        if run.gen.turn_control:
            run.emit(CancelRequested(turn_id=turn.id, principal=input.principal, reason=input.reason))
            turn.cancel_announced = True
            workflow.set_current_details(f"**cancelling** turn `{turn.id}`")

    def cancel_refusal(self, input: CancelTurnInput) -> str | None:
        """Why a cancel would change nothing (update ``cancel`` rejects it), or None."""
        run, session = self.run, self.run.config.session_id
        why = self._standing_refusal(input.principal, input.reason, "cancel turns of")
        if why is not None:
            return why
        queued = run.inbox.queued_turn_ids()
        active = run.turn.id if run.turn is not None else None
        running = active if run.cancel_request() is None else None
        if input.turn_id is not None and input.turn_id not in queued and input.turn_id != running:
            if input.turn_id == active:
                return f"turn {input.turn_id!r} of session {session} is already being cancelled"
            return run.inbox.unknown_or_forgotten(input.turn_id) or f"turn {input.turn_id!r} has already ended"
        if running is None and not queued:
            return f"nothing to cancel in session {session}: no turn is running or queued"
        return None

    def validate_cancel(self, input: CancelTurnInput) -> None:
        why = self.cancel_refusal(input)
        if why is not None:
            raise rejected(why)

    def turn_outcome(self, turn_id: str) -> TurnOutcome | None:
        """Query ``turn``: the outcome, None while queued or running; ``ValueError`` for an unknown turn."""
        why = self.run.inbox.unknown_or_forgotten(turn_id)
        if why is not None:
            raise ValueError(why)
        return self.run.inbox.outcome(turn_id)

    async def archive(self, input: ArchiveInput) -> SessionStateView:
        """Record the archive (the running turn's cancel too); the state the update answers: an idle
        session's once its end is in the store (``regular-activities-v1``)."""
        view = self._archive(input)
        if not self.run.gen.local_activities and self.run.turn is None:
            await workflow.wait_condition(lambda: self.run.end_written)
        return view

    def _archive(self, input: ArchiveInput) -> SessionStateView:
        run = self.run
        if input.principal != run.config.owner:
            run.emit(OperatorActed(principal=input.principal, action="archive", reason=input.reason or ""))
        if run.turn is not None and run.gen.turn_control:
            run.emit(CancelRequested(turn_id=run.turn.id, principal=input.principal, reason="session archived"))
            run.turn.cancel_announced = True
        run.archive_request = input
        view = run.view()
        view.status = "archived"
        return view

    def validate_archive(self, input: ArchiveInput) -> None:
        run = self.run
        if run.archive_request is not None:
            raise rejected(f"session {run.config.session_id} is already archived")
        if run.ending():
            raise rejected(f"session {run.config.session_id} is ending: its workflow was cancelled")
        self.check_owner_or_operator(input.principal, input.reason, "archive")

    # ---------------------------------------------------------------- budget and memories

    async def raise_budget(self, input: RaiseBudgetInput) -> SessionStateView:
        """What update ``raise_budget`` does (see it)."""
        run = self.run
        if self.standing(input.principal, input.reason) == "operator":
            run.emit(OperatorActed(principal=input.principal, action="raise_budget", reason=input.reason or ""))
        budget = (run.config.budget or Budget()).raised(input.budget)
        # A new config object: staged events (SessionInitialized) keep the one they were made with.
        run.config = run.config.model_copy(update={"budget": budget})
        if run.state.started_at is None:
            run.state.started_at = run.run_started
        run.emit(BudgetRaised(principal=input.principal, budget=budget, reason=input.reason))
        # Everything staged, written now so readers see it in order; it stays staged (the turn's next
        # write repeats it, idempotent by seq and position), as a turn may be writing beside this.
        events, messages = run.journal.unflushed()
        await run.execute(
            options.STORE_WRITE,
            StoreAppendInput(session_id=run.config.session_id, config=run.config, messages=messages, events=events),
            local=True,
            summary="store budget raised",
        )
        return run.view()

    async def rename(self, input: RenameInput) -> SessionStateView:
        """What update ``rename`` does (see it): the new title in the config, ``SessionRenamed``, and
        both written to the store now (the session row's ``title`` with them). The title it has already
        changes nothing (no event)."""
        run = self.run
        if input.title == run.config.title:
            return run.view()
        if self.standing(input.principal, input.reason) == "operator":
            run.emit(OperatorActed(principal=input.principal, action="rename", reason=input.reason or ""))
        previous = run.config.title
        run.config = run.config.model_copy(update={"title": input.title})  # a new object, as raise_budget's
        run.emit(SessionRenamed(principal=input.principal, title=input.title, previous=previous, reason=input.reason))
        events, messages = run.journal.unflushed()
        await run.execute(
            options.STORE_WRITE,
            StoreAppendInput(session_id=run.config.session_id, config=run.config, messages=messages, events=events),
            local=True,
            summary="store session renamed",
        )
        return run.view()

    def validate_rename(self, input: RenameInput) -> None:
        run, session = self.run, self.run.config.session_id
        if run.archive_request is not None:
            raise rejected(f"session {session} is archived")
        if run.ending():
            raise rejected(f"session {session} is ending: its workflow was cancelled")
        self.check_owner_or_operator(input.principal, input.reason, "rename")

    def validate_raise_budget(self, input: RaiseBudgetInput) -> None:
        run, session = self.run, self.run.config.session_id
        if run.archive_request is not None:
            raise rejected(f"session {session} is archived")
        if run.ending():
            raise rejected(f"session {session} is ending: its workflow was cancelled")
        self.check_owner_or_operator(input.principal, input.reason, "raise the budget of")
        if input.budget.is_unbounded():
            raise rejected(f"raise_budget of session {session} needs a budget limit (max_sessions is for tasks)")
        lowered = (run.config.budget or Budget()).lowered_by(input.budget)
        if lowered:
            raise rejected(f"raise_budget cannot lower a limit of session {session}: {', '.join(lowered)}")

    async def decide_memory(self, input: MemoryDecision) -> None:
        """What update ``decide_memory`` does (see it)."""
        run = self.run
        proposal = next((p for p in run.state.memory_proposals if p.memory_id == input.memory_id), None)
        if proposal is None:  # a second decision that passed its validator beside the first
            raise ApplicationError(f"memory {input.memory_id} is already decided", type="MemoryAlreadyDecided", non_retryable=True)
        run.state.memory_proposals.remove(proposal)
        try:
            await run.execute(
                options.DECIDE_MEMORY,
                MemoryDecideInput(
                    session_id=run.config.session_id, memory_id=input.memory_id, decision=input.decision,
                    principal=input.principal, reason=input.reason,
                ),
                local=True,
                summary=f"memory {input.decision} {proposal.scope}:{proposal.key}",
            )
        except ActivityError as err:
            run.state.memory_proposals.append(proposal)
            raise ApplicationError(error_text(err), type="MemoryDecisionFailed", non_retryable=True) from err
        fields: dict[str, Any] = {
            "turn_id": proposal.turn_id, "memory_id": proposal.memory_id, "scope": proposal.scope, "key": proposal.key
        }
        if input.decision == "accept":
            event = run.journal.emit(MemoryAccepted(principal=input.principal, **fields), workflow.now())
        else:
            event = run.journal.emit(MemoryRejected(principal=input.principal, reason=input.reason, **fields), workflow.now())
        # Written now so readers see it; it stays staged too (the next write repeats it, idempotent by seq).
        await run.execute(
            options.STORE_WRITE, StoreAppendInput(session_id=run.config.session_id, events=[event]),
            local=True, summary=f"store memory {input.decision}",
        )

    def validate_decide_memory(self, input: MemoryDecision) -> None:
        config, state = self.run.config, self.run.state
        if input.principal != config.owner:
            raise rejected(
                f"principal {input.principal!r} may not decide memories of session {config.session_id}: not its owner"
            )
        if all(p.memory_id != input.memory_id for p in state.memory_proposals):
            raise rejected(f"memory {input.memory_id!r} is not a proposal of session {config.session_id} waiting for a decision")
