"""Effects of unknown outcome: an operator says whether a call's effect was applied, and the effect
ledger is told.

A tool call whose activity failed after it claimed its effect in the ledger (``OutcomeUnknown``)
is never run again silently: ``Reconciles.ask`` opens a ``reconcile`` request and waits for an
answer (``applied``: the call is done, its result unknown; ``not_applied``: the ledger released
the claim and the call runs once more). An answer that comes with a cancel of the turn is owed to
the ledger and written when the session next can (``settle_owed``). One of the steps of
``ToolCalls``, over the session's ``SessionRun``; workflow code only.
"""

from __future__ import annotations

import json

from temporalio import workflow

from agentrt.schemas import (
    PermissionRequest,
    PermissionRequested,
    ReconcileDecision,
    ReconcileEffectInput,
    ToolCall,
    ToolInvocationFailed,
    code_span,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows._approvals import RECONCILE_REASON
from agentrt.workflows._errors import TurnCancelled
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_calls import arguments_preview


def key_without_position(turn_id: str, call_id: str) -> str:
    """A call's effect-ledger key before ``effect-key-position-v1`` (and a read-only call's)."""
    return f"{workflow.info().workflow_id}/{turn_id}/{call_id}"


class Reconciles:
    """Asks for and records the outcome of effects the ledger does not know."""

    def __init__(self, run: SessionRun) -> None:
        self.run = run
        # Reconcile answers of a cancelled turn not yet in the effect ledger (turn-control-v1).
        self._owed: list[tuple[PermissionRequest, ReconcileDecision]] = []

    async def ask(self, turn_id: str, call: ToolCall, idempotency_key: str, error: str) -> ReconcileDecision:
        """Ask an operator whether a claimed-but-unrecorded effect happened; never re-run it silently."""
        self.run.emit(ToolInvocationFailed(turn_id=turn_id, call_id=call.id, tool=call.name, reason="outcome_unknown", error=error))
        risk = self.run.tools[call.name].risk if call.name in self.run.tools else "effectful"
        request = self.run.approvals.request(
            turn_id, call, risk, RECONCILE_REASON, kind="reconcile", idempotency_key=idempotency_key
        )
        self.run.emit(PermissionRequested(turn_id=turn_id, request=request))
        self.run.set_status("awaiting_approval")
        example = json.dumps({"request_id": request.request_id, "outcome": "applied", "principal": self.run.config.owner})
        workflow.set_current_details(
            f"**reconcile** {code_span(request.request_id, 80)} · {code_span(call.name, 80)} "
            f"{code_span(arguments_preview(request.arguments, 120), 120)}\n\n"
            f"Was it applied? Signal `reconcile` with `{example}` (or `\"outcome\": \"not_applied\"` to run it again)"
        )
        await self.run.flush()
        await workflow.wait_condition(
            lambda: self.run.approvals.decision(request.request_id) is not None or self.run.cancel_requested()
        )
        if self.run.cancel_requested():
            raise TurnCancelled()  # an answer that came with the cancel is owed to the ledger (_cancelled_outcome)
        # turn-control-v1: the request stays open until the ledger has the answer, so that a
        # cancel meanwhile leaves the answer owed instead of lost.
        if self.run.gen.turn_control:
            decision = self.run.approvals.decision(request.request_id)
        else:
            decision = self.run.approvals.close(request.request_id)
        assert isinstance(decision, ReconcileDecision)
        await self._write(idempotency_key, call.name, decision)
        self.run.approvals.close(request.request_id)
        self.run.set_status("running")
        return decision

    def owe(self, answered: list[tuple[PermissionRequest, ReconcileDecision]]) -> None:
        """Keep reconcile answers a cancelled turn did not act on, for ``settle_owed``."""
        self._owed.extend(answered)

    async def settle_owed(self) -> None:
        """Write the reconcile answers a cancelled turn did not act on to the effect ledger (idempotent)."""
        while self._owed:
            request, decision = self._owed[0]
            # Requests opened before effect-key-position-v1 carry no key: theirs is the key without a position.
            key = request.idempotency_key or key_without_position(request.turn_id, request.call_id)
            await self._write(key, request.tool, decision)
            self._owed.pop(0)

    async def _write(self, idempotency_key: str, tool: str, decision: ReconcileDecision) -> None:
        await self.run.execute(
            options.RECONCILE_EFFECT,
            ReconcileEffectInput(
                idempotency_key=idempotency_key, outcome=decision.outcome, principal=decision.principal, note=decision.note
            ),
            local=self.run.gen.lean_rounds,
            summary=f"reconcile {tool}: {decision.outcome}",
        )
