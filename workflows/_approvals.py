"""The approvals book: permission requests a turn waits on, and the decisions that answer them.

Pure bookkeeping over ``SessionState`` (``request_counter``, ``pending_approvals``,
``approval_decisions``): the signal handlers and update validators of the session
workflow ask it whether a decision counts and record it; the turn loop asks it whether
everything it waits for is decided. A decision that changes nothing is ignored with a
reason (``why_ignored``), never applied twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

from agentrt.schemas import (
    EffectReconciled,
    ElicitationAnswer,
    ElicitationAnswered,
    ElicitationRequest,
    Event,
    PermissionDecision,
    PermissionDecisionIgnored,
    PermissionDenied,
    PermissionGranted,
    PermissionRequest,
    ReconcileDecision,
    SessionGrant,
    SessionState,
    ToolCall,
    ToolSpec,
    argument_problems,
    arguments_sha256,
)

IgnoredWhy = Literal[
    "already_decided", "unknown_request", "not_owner", "wrong_kind", "mismatch", "invalid_edit", "no_reason", "invalid_answer"
]
# What is wrong with edited arguments for a tool (``[]`` when they are valid): the session's check.
EditCheck = Callable[[str, dict[str, Any]], list[str]]

IGNORED_REASONS: Mapping[str, str] = MappingProxyType({
    "already_decided": "request {request} was already decided (or its turn ended)",
    "unknown_request": "no pending request {request} in this session",
    "not_owner": "principal {principal!r} is not the owner of this session",
    "wrong_kind": "request {request} is of another kind (approve/deny a tool call, reconcile an effect, answer a server's question)",
    "mismatch": "the decision names another call or other arguments than request {request}",
    "invalid_edit": "the arguments given for request {request} are not valid for its tool (only a grant may edit them)",
    "invalid_answer": "the answer to request {request} does not match the schema the server asked for",
    "no_reason": "operator {principal!r} must give a reason to decide request {request} of a session it does not own",
})

RECONCILE_REASON = "the worker stopped between claiming and recording this effect: was it applied?"

Decision = PermissionDecision | ReconcileDecision | ElicitationAnswer


Standing = Literal["owner", "operator", "not_owner", "no_reason"]


def standing(owner: str, operators: tuple[str, ...] | list[str], principal: str | None, reason: str | None) -> Standing:
    """Whether ``principal`` may act on a session: as its ``owner``, as an ``operator`` (one of
    ``operators`` giving a non-blank ``reason``), or not (``not_owner``: a stranger or no
    principal; ``no_reason``: an operator who gave none)."""
    if principal == owner:
        return "owner"
    if principal not in operators:
        return "not_owner"
    return "operator" if (reason or "").strip() else "no_reason"


def standing_refusal(
    owner: str, operators: tuple[str, ...] | list[str], principal: str, reason: str | None, verb: str, what: str
) -> str | None:
    """Why ``principal`` may not ``verb`` ``what`` (``task t1``, ``graph g1``): a stranger, or an
    operator without a reason; None when it may (``standing``)."""
    who = standing(owner, operators, principal, reason)
    if who == "not_owner":
        return f"principal {principal!r} may not {verb} {what}: not its owner"
    if who == "no_reason":
        return f"operator {principal!r} must give a reason to {verb} {what}, which it does not own"
    return None


def ignored_text(why: str, request_id: str, principal: str) -> str:
    """The sentence a caller sees when a decision is refused (update validators)."""
    return IGNORED_REASONS[why].format(request=request_id, principal=principal)


class ApprovalBook:
    """Requests ``req-N`` waiting for a decision, numbered for the whole session."""

    def __init__(
        self, state: SessionState, owner: str, check_edit: EditCheck | None = None, operators: tuple[str, ...] = ()
    ) -> None:
        self._state = state
        self._owner = owner
        self._check_edit = check_edit
        self._operators = operators

    # ------------------------------------------------------------ requests

    def request(
        self,
        turn_id: str,
        call: ToolCall,
        risk: str,
        reason: str,
        kind: Literal["tool_call", "reconcile", "elicitation"] = "tool_call",
        idempotency_key: str | None = None,
        grant_rule: str | None = None,
        elicitation: ElicitationRequest | None = None,
    ) -> PermissionRequest:
        """Open a request for ``call`` (its arguments frozen by their SHA-256; a reconcile request
        keeps the ``idempotency_key`` of the effect it asks about; ``grant_rule`` is the policy
        rule a grant for the session would cover; ``elicitation``: what an MCP server asked)."""
        self._state.request_counter += 1
        arguments = call.arguments or {}
        request = PermissionRequest(
            request_id=f"req-{self._state.request_counter}",
            turn_id=turn_id,
            call_id=call.id,
            tool=call.name,
            arguments=arguments,
            arguments_sha256=arguments_sha256(arguments),
            risk=risk,
            reason=reason,
            kind=kind,
            idempotency_key=idempotency_key,
            grant_rule=grant_rule,
            message=elicitation.message if elicitation is not None else None,
            requested_schema=elicitation.requested_schema if elicitation is not None else None,
            url=elicitation.url if elicitation is not None else None,
        )
        self._state.pending_approvals.append(request)
        return request

    def undecided(self) -> list[PermissionRequest]:
        """Requests still waiting for a decision (what the ``state`` query shows)."""
        return [r for r in self._state.pending_approvals if r.request_id not in self._state.approval_decisions]

    def session_grant(self, rule: str) -> SessionGrant | None:
        """The grant for the rest of the session (by the owner or an operator) that covers ``rule``, if any."""
        allowed = (self._owner, *self._operators)
        return next((g for g in self._state.session_grants if g.rule == rule and g.principal in allowed), None)

    def all_decided(self, request_ids: list[str]) -> bool:
        return all(i in self._state.approval_decisions for i in request_ids)

    def decision(self, request_id: str) -> Decision | None:
        return self._state.approval_decisions.get(request_id)

    def close(self, request_id: str) -> Decision | None:
        """Remove the request (its turn acted on the decision, or ended); returns the decision, if any."""
        self._state.pending_approvals = [r for r in self._state.pending_approvals if r.request_id != request_id]
        return self._state.approval_decisions.pop(request_id, None)

    def close_turn(self, turn_id: str) -> list[tuple[PermissionRequest, ReconcileDecision]]:
        """Remove every request of ``turn_id`` (the turn ended without acting on them).

        Returns the reconcile answers among them: whether an effect happened is a fact the
        effect ledger needs even when the turn that asked stopped before writing it there.
        """
        answered: list[tuple[PermissionRequest, ReconcileDecision]] = []
        for request in [r for r in self._state.pending_approvals if r.turn_id == turn_id]:
            decision = self.close(request.request_id)
            if isinstance(decision, ReconcileDecision):
                answered.append((request, decision))
        return answered

    def time_out(self, request_ids: list[str], timeout_seconds: float) -> list[Event]:
        """Deny every undecided request of ``request_ids`` as ``system``; returns the ``PermissionDenied`` events."""
        events: list[Event] = []
        for request in self._state.pending_approvals:
            if request.request_id in request_ids and request.request_id not in self._state.approval_decisions:
                reason = f"no decision within {timeout_seconds:g} s"
                self._state.approval_decisions[request.request_id] = PermissionDecision(
                    request_id=request.request_id, decision="deny", principal="system", reason=reason
                )
                events.append(
                    PermissionDenied(
                        turn_id=request.turn_id,
                        request_id=request.request_id,
                        call_id=request.call_id,
                        principal="system",
                        reason=reason,
                    )
                )
        return events

    # ------------------------------------------------------------ decisions

    def why_ignored(
        self,
        request_id: str,
        principal: str,
        kind: str,
        call_id: str | None = None,
        digest: str | None = None,
        edit: dict[str, Any] | None = None,
        verdict: str = "grant",
        reason: str | None = None,
    ) -> IgnoredWhy | None:
        """Why a decision on ``request_id`` would change nothing, or None when it counts. Changes no
        state. ``edit``: the arguments a grant replaces the call's with (``verdict`` must be
        ``grant`` and they must pass the session's check for the tool). An operator who is not
        the owner counts only with a ``reason``."""
        who = standing(self._owner, self._operators, principal, reason)
        if who in ("not_owner", "no_reason"):
            return who  # first: a stranger learns nothing about the session's requests
        if request_id in self._state.approval_decisions:
            return "already_decided"
        pending = next((r for r in self._state.pending_approvals if r.request_id == request_id), None)
        if pending is None:
            number = request_id.removeprefix("req-")
            # ASCII digits only: str.isdigit() also accepts "²", which int() rejects.
            if number.isascii() and number.isdigit() and 1 <= int(number) <= self._state.request_counter:
                return "already_decided"  # acted on, or its turn ended (in this run or an earlier one)
            return "unknown_request"
        if pending.kind != kind:
            return "wrong_kind"
        if (call_id is not None and call_id != pending.call_id) or (
            digest is not None and digest != pending.arguments_sha256
        ):
            return "mismatch"
        if edit is not None and (verdict != "grant" or self.edit_problems(pending.tool, edit)):
            return "invalid_edit"
        return None

    def answer_problems(self, answer: ElicitationAnswer) -> list[str]:
        """What is wrong with ``answer`` to its pending elicitation request ([] when it may be
        sent): an ``accept`` needs ``content`` matching the requested schema; ``decline`` and
        ``cancel`` carry none."""
        pending = next((r for r in self._state.pending_approvals if r.request_id == answer.request_id), None)
        if pending is None or pending.kind != "elicitation":
            return []
        if answer.action != "accept":
            return ["a decline or cancel carries no content"] if answer.content else []
        schema = pending.requested_schema or {"type": "object", "properties": {}}
        # The server's schema: untrusted (``source`` set), so applied without fetching or slow patterns.
        problems = argument_problems(
            ToolSpec(name=pending.tool, description="", parameters=schema, source="elicitation"), answer.content or {}
        )
        return [p.replace("(arguments)", "(answer)", 1) if p.startswith("(arguments)") else p for p in problems]

    def edit_problems(self, tool: str, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with ``arguments`` as edited arguments for ``tool``; [] when valid."""
        return self._check_edit(tool, arguments) if self._check_edit is not None else []

    def decide(self, decision: Decision) -> Event:
        """Record ``decision`` when it counts; returns the event that says what happened."""
        if isinstance(decision, PermissionDecision):
            why = self.why_ignored(
                decision.request_id, decision.principal, "tool_call", decision.call_id, decision.arguments_sha256,
                decision.arguments, decision.decision, decision.reason,
            )
            verdict = decision.decision
        elif isinstance(decision, ElicitationAnswer):
            why = self.why_ignored(decision.request_id, decision.principal, "elicitation", reason=decision.reason)
            if why is None and self.answer_problems(decision):
                why = "invalid_answer"
            verdict = decision.action
        else:
            why = self.why_ignored(decision.request_id, decision.principal, "reconcile", reason=decision.note)
            verdict = decision.outcome
        if why is not None:
            return PermissionDecisionIgnored(
                request_id=decision.request_id, decision=verdict, principal=decision.principal, why=why
            )
        request = next(r for r in self._state.pending_approvals if r.request_id == decision.request_id)
        self._state.approval_decisions[decision.request_id] = decision
        about: dict[str, Any] = {
            "turn_id": request.turn_id, "request_id": decision.request_id, "call_id": request.call_id
        }
        if isinstance(decision, ElicitationAnswer):
            return ElicitationAnswered(
                **about, principal=decision.principal, action=decision.action,
                content=decision.content if decision.action == "accept" else None,
            )
        if isinstance(decision, ReconcileDecision):
            return EffectReconciled(**about, outcome=decision.outcome, principal=decision.principal, note=decision.note)
        if decision.decision == "deny":
            return PermissionDenied(**about, principal=decision.principal, reason=decision.reason)
        scope = "session" if decision.scope == "session" and request.grant_rule else "once"
        if scope == "session" and request.grant_rule is not None and self.session_grant(request.grant_rule) is None:
            self._state.session_grants.append(
                SessionGrant(principal=decision.principal, tool=request.tool, rule=request.grant_rule, request_id=request.request_id)
            )
        return PermissionGranted(**about, principal=decision.principal, reason=decision.reason, scope=scope)
