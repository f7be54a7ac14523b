"""The session workflow as the client addresses it: by its type name (``SESSION_WORKFLOW``) and
its handlers' names, argument and result types, without importing the workflow class and what
it imports (the policy engine, the activities' references, the session steps).

``SessionHandlers`` declares each update, signal and query with Temporal's decorators and no
body, so ``handle.execute_update(SessionHandlers.send_and_wait, message)`` is typed and decodes
its result as a call with the workflow's own method would. tests/client/test_session_handlers.py
holds it equal to ``SessionWorkflow``'s handlers (names, kinds, argument and result types).
"""

from __future__ import annotations

from typing import NoReturn

from temporalio import workflow

from agentrt.schemas import (
    CHILD_SPEND_SIGNAL,
    MODEL_CALL_RETRIED_SIGNAL,
    ChildSpendReport,
    ModelCallRetry,
    SESSION_WORKFLOW,
    ArchiveInput,
    CancelTurnInput,
    CompactOutcome,
    CompactRequest,
    ElicitationAnswer,
    EventsPage,
    EventsQuery,
    MemoryDecision,
    PauseInput,
    PermissionDecision,
    RaiseBudgetInput,
    ReconcileDecision,
    RenameInput,
    SendMessageInput,
    SendMessageResult,
    SessionResult,
    SessionStateView,
    SET_PAUSED_SIGNAL,
    UPGRADE_SIGNAL,
    SetPausedInput,
    SwitchModelInput,
    SwitchModelResult,
    TurnOutcome,
    WaitTurnInput,
)

__all__ = ["FORGOTTEN_TURN", "SESSION_RESULT", "SESSION_WORKFLOW", "SessionHandlers"]

# The workflow's run result type, for a start by type name.
SESSION_RESULT = SessionResult
# How a ``turn`` query's failure says the turn ended in an earlier run (continue-as-new) of the
# session: its outcome is no longer held (the workflow's ``FORGOTTEN_TURN``).
FORGOTTEN_TURN = "ended in an earlier run of the workflow"


def _declared() -> NoReturn:
    raise NotImplementedError("a declaration of the session workflow's handler: the worker runs it")


class SessionHandlers:
    """The session workflow's updates, signals and queries, declared (never run here)."""

    @workflow.update
    def send_message(self, input: SendMessageInput) -> SendMessageResult:
        _declared()

    @workflow.update
    async def send_and_wait(self, input: SendMessageInput) -> TurnOutcome:
        _declared()

    @workflow.update
    async def wait_turn(self, input: WaitTurnInput) -> TurnOutcome:
        _declared()

    @workflow.update
    async def archive(self, input: ArchiveInput) -> SessionStateView:
        _declared()

    @workflow.update
    async def raise_budget(self, input: RaiseBudgetInput) -> SessionStateView:
        _declared()

    @workflow.update
    async def rename(self, input: RenameInput) -> SessionStateView:
        _declared()

    @workflow.update
    async def switch_model(self, input: SwitchModelInput) -> SwitchModelResult:
        _declared()

    @workflow.update
    async def compact(self, input: CompactRequest) -> CompactOutcome:
        _declared()

    @workflow.update
    def decide(self, input: PermissionDecision) -> None:
        _declared()

    @workflow.update
    def answer_elicitation(self, input: ElicitationAnswer) -> None:
        _declared()

    @workflow.update
    def decide_reconcile(self, input: ReconcileDecision) -> None:
        _declared()

    @workflow.update
    async def decide_memory(self, input: MemoryDecision) -> None:
        _declared()

    @workflow.update
    def cancel(self, input: CancelTurnInput) -> None:
        _declared()

    @workflow.update
    async def pause(self, input: PauseInput) -> SessionStateView:
        _declared()

    @workflow.update
    async def resume(self, input: PauseInput) -> SessionStateView:
        _declared()

    @workflow.signal
    def permission_decision(self, input: PermissionDecision) -> None:
        _declared()

    @workflow.signal
    def reconcile(self, input: ReconcileDecision) -> None:
        _declared()

    @workflow.signal
    def elicitation_answer(self, input: ElicitationAnswer) -> None:
        _declared()

    @workflow.signal
    def cancel_turn(self, input: CancelTurnInput) -> None:
        _declared()

    @workflow.signal(name=CHILD_SPEND_SIGNAL)
    def child_spend(self, input: ChildSpendReport) -> None:
        _declared()

    @workflow.signal(name=MODEL_CALL_RETRIED_SIGNAL)
    def model_call_retried(self, input: ModelCallRetry) -> None:
        _declared()

    @workflow.signal(name=SET_PAUSED_SIGNAL)
    async def set_paused(self, input: SetPausedInput) -> None:
        _declared()

    @workflow.signal(name=UPGRADE_SIGNAL)
    def upgrade(self) -> None:
        _declared()

    @workflow.query
    def state(self) -> SessionStateView:
        _declared()

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        _declared()

    @workflow.query
    def turn(self, turn_id: str) -> TurnOutcome | None:
        _declared()
