"""The tool calls of one round: triage, approvals, execution under the effect ledger (its
reconciliation: ``_reconcile_steps``).

``ToolCalls`` is one of ``SessionWorkflow``'s steps, over its ``SessionRun``, its MCP steps and its
delegations; workflow code only.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeout

from agentrt.schemas import (
    ADVISOR_REQUEST_CHARS,
    DELEGATE_TOOL,
    AdvisorReviewCompleted,
    AdvisorReviewInput,
    AdvisorReviewResult,
    AdvisorReviewStarted,
    ElicitationAnswer,
    McpCallInput,
    McpCallResult,
    Message,
    ModelToolCallRequested,
    PermissionDecision,
    PermissionGranted,
    PermissionRequest,
    PermissionRequested,
    ReconcileDecision,
    ToolCall,
    ToolCallEdited,
    ToolExecuteInput,
    ToolExecuteResult,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
    arguments_sha256,
    code_span,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _advisor as advisor
from agentrt.workflows import _delegation as delegation
from agentrt.workflows._delegate_steps import Delegations
from agentrt.workflows._errors import (
    OUTCOME_UNKNOWN,
    TurnCancelled,
    error_text,
    error_type,
)
from agentrt.workflows._mcp_steps import MAX_ELICITATIONS_PER_CALL, Mcp
from agentrt.workflows._reconcile_steps import Reconciles, key_without_position
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_calls import Triage, arguments_preview, triage
from agentrt.workflows.policy import PolicyEngine

if TYPE_CHECKING:
    from agentrt.workflows._turn import Turn


class ToolCalls:
    """Runs the tool calls a model reply asked for."""

    def __init__(self, run: SessionRun, mcp: Mcp, delegations: Delegations) -> None:
        self.run = run
        self.mcp = mcp
        self.delegations = delegations
        self.policy = self._policy(version=1)  # version 1 until the run's first batch asks policy-sandbox-v1 (handle)
        self.reconciles = Reconciles(run)

    def _policy(self, *, version: int) -> PolicyEngine:
        config = self.run.config
        self._policy_config = config  # what it was built from
        return PolicyEngine(
            config.approval, config.sandbox, network=config.network, interactive=config.interactive,
            workspace=config.workspace, version=version,
        )

    async def handle(self, turn: Turn, round_number: int, calls: list[ToolCall]) -> str | None:
        """Have the advisor review the batch when its mode says so, triage every call, ask for all
        approvals the batch needs at once, then run the allowed calls in order. Returns the
        advisor's reason when it rejected the batch (no call ran), else None.

        With ``policy-decisions-v1`` (policy version 3) a call the policy allows records
        ``PermissionGranted`` with the rule that allowed it, and each call's result has its
        transcript position taken in call order before any call runs, so the model reads the
        results in the order it asked, whichever calls were refused, denied or run."""
        turn_id = turn.id
        runnable: list[tuple[ToolCall, PermissionRequest | None, int | None]] = []
        if self._policy_config is not self.run.config:
            self.policy = self._policy(version=self.policy.version)  # the session's agent set its policy at its start
        if self.policy.version < 2 and self.run.gen.policy_v2():
            self.policy.version = 2
        if self.policy.version == 2 and self.run.gen.policy_decisions():
            self.policy.version = 3
        decisions = self.policy.version >= 3
        reviewed = self.run.config.advisor.mode != "off"
        if reviewed:
            for call in calls:
                self.run.emit(ModelToolCallRequested(turn_id=turn_id, round=round_number, call=call))
            rejection = await self._advise(turn, round_number, calls)
            if rejection is not None:
                for call in calls:
                    turn.fail_call(call, "advisor_rejected", f"not run: the advisor rejected this batch ({rejection})")
                return rejection
        positions = [self.run.journal.take_position() if decisions else None for _ in calls]  # results in call order
        for call, position in zip(calls, positions, strict=True):
            if not reviewed:
                self.run.emit(ModelToolCallRequested(turn_id=turn_id, round=round_number, call=call))
            verdict = self._triage(call)
            grant = self.run.approvals.session_grant(verdict.rule) if verdict.action == "ask" and verdict.rule else None
            if verdict.action == "refuse":
                text = (self.mcp.unavailable_text(turn, call) if verdict.failure == "unknown_tool" else None) or verdict.text
                turn.fail_call(call, verdict.failure, text, position)
            elif verdict.action == "run":
                if decisions:
                    self.run.emit(PermissionGranted(
                        turn_id=turn_id, call_id=call.id, reason=verdict.text, scope="policy", rule=verdict.rule,
                    ))
                runnable.append((call, None, position))
            elif grant is not None:
                reason = f"granted for this session on {grant.request_id} ({grant.rule})"
                self.run.emit(PermissionGranted(
                    turn_id=turn_id, request_id=grant.request_id, call_id=call.id, principal=grant.principal,
                    reason=reason, scope="session", rule=grant.rule if decisions else None,
                ))
                runnable.append((call, None, position))
            else:
                request = self.run.approvals.request(
                    turn_id, call, self.run.tools[call.name].risk, verdict.text, grant_rule=verdict.rule or None
                )
                self.run.emit(PermissionRequested(turn_id=turn_id, request=request))
                runnable.append((call, request, position))
        waiting = [r for _, r, _ in runnable if r is not None]
        if waiting:
            asked = workflow.now()
            turn.steps_in_flight = [
                (round_number, "approval", {"tool": r.tool, "arguments": r.arguments}, asked, r.call_id) for r in waiting
            ]
            await self._await_decisions(waiting)
            turn.steps_in_flight = []
            self._record_approvals(turn, round_number, waiting, asked)
        for call, request, position in runnable:
            note = None
            if request is not None:
                decision = self.run.approvals.close(request.request_id)
                assert isinstance(decision, PermissionDecision)
                if decision.decision == "deny":
                    why = decision.reason or "no reason given"
                    turn.fail_call(call, "denied", f"denied by {decision.principal}: {why}", position)
                    continue
                if decision.arguments is not None:
                    edited = self._edited_call(turn, request, call, decision, position)
                    if edited is None:
                        continue
                    call, note = edited
            if call.name == DELEGATE_TOOL:
                await self.delegations.delegate(turn, round_number, call, note, position)
            else:
                await self._execute_tool(turn, round_number, call, note, position)
        return None

    def _triage(self, call: ToolCall) -> Triage:
        """``triage`` of the call; a ``delegate`` call is also refused, before any approval, when
        this session may not delegate (a graph's node, a delegated session: even when it does
        not hold the tool) or asks for more than the session holds (``CapabilityWidened``)."""
        if call.name != DELEGATE_TOOL:
            return triage(call, self.run.tools, self.policy)
        refused = delegation.refusal(self.run.config)
        if refused is not None:
            return Triage(call, "refuse", refused, "denied")
        verdict = triage(call, self.run.tools, self.policy)
        if verdict.action == "refuse":
            return verdict
        refused = self.delegations.refusal(delegation.DelegateRequest.from_arguments(call.arguments))
        return Triage(call, "refuse", refused, "denied") if refused is not None else verdict

    async def _advise(self, turn: Turn, round_number: int, calls: list[ToolCall]) -> str | None:
        """Run the advisor on the batch when its mode says so; its reason when it rejects, else None.

        Fail-open: a review that fails (provider error, timeout, an answer that is no verdict)
        approves the batch, recorded in ``AdvisorReviewCompleted.error``.
        """
        turn_id = turn.id
        policy = self.run.config.advisor
        risks = [advisor.high_risk_rule(self.run.tools.get(c.name), c, self.run.config.workspace) for c in calls]
        reason = advisor.review_reason(policy, risks)
        if reason is None:
            return None
        profile = policy.profile or self.run.config.profile
        self.run.emit(AdvisorReviewStarted(
            turn_id=turn_id, round=round_number, call_ids=[c.id for c in calls], mode=policy.mode,  # type: ignore[arg-type]
            reason=reason, profile=profile,
        ))
        started = workflow.now()
        index = self.run.state.advisor_reviews
        self.run.state.advisor_reviews += 1
        turn.steps_in_flight = [(round_number, "advisor.review", {"tools": [c.name for c in calls], "reason": reason}, started, None)]
        await self.run.before_call()
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · advisor reviewing {len(calls)} calls")
        writes = self.run.writes_for_call()
        try:
            review = await self.run.execute(
                options.ADVISOR,
                AdvisorReviewInput(
                    session_id=self.run.config.session_id, turn_id=turn_id, round=round_number, profile=profile,
                    script=self.run.config.script, review_index=index, workspace=self.run.config.workspace,
                    request=turn.request[:ADVISOR_REQUEST_CHARS], calls=calls, risks=risks, store_writes=writes,
                ),
                local=False,
                result_type=AdvisorReviewResult,
                summary=f"advisor {profile} · {turn_id} · round {round_number} · {len(calls)} calls",
                start_to_close=policy.timeout_seconds,
                heartbeat_timeout=self.run.config.heartbeat_timeout_seconds,
                task_queue=self.run.config.model_task_queue,
            )
            self.run.call_wrote(writes)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) or self.run.stop_after_step():
                raise TurnCancelled() from err
            why = f"timed out after {policy.timeout_seconds:g} s" if isinstance(err.cause, ActivityTimeout) else error_text(err)
            review = AdvisorReviewResult(verdict="approve", error=why)
        if self.run.stop_after_step():
            raise TurnCancelled()
        turn.steps_in_flight = []
        self.run.add_usage(review.usage, priced=profile == self.run.profile.name)  # the session profile's price only
        turn.advisor_usage = turn.advisor_usage + review.usage
        self.run.emit(AdvisorReviewCompleted(
            turn_id=turn_id, round=round_number, verdict=review.verdict, concern_count=len(review.concerns),
            summary=review.summary, concerns=review.concerns, error=review.error,
        ))
        text = review.error or review.summary or "; ".join(review.concerns)
        turn.record_step(
            round_number, "advisor.review", {"tools": [c.name for c in calls], "reason": reason},
            review.verdict, text, started,
        )
        if review.verdict != "reject":
            return None
        return review.summary or "; ".join(review.concerns) or "no reason given"

    def _record_approvals(self, turn: Turn, round_number: int, requests: list[PermissionRequest], asked: Any) -> None:
        """One trajectory step per approval the batch waited for: its decision and who made it."""
        for request in requests:
            decision = self.run.approvals.decision(request.request_id)
            if isinstance(decision, PermissionDecision):
                outcome, text = decision.decision, f"{decision.decision} by {decision.principal}: {decision.reason or ''}"
            else:
                outcome, text = "deny", "no decision"
            turn.record_step(
                round_number, "approval",
                {"tool": request.tool, "arguments": request.arguments},  # what was decided; ids differ from run to run
                outcome, f"{request.request_id}: {text}", asked, call_id=request.call_id,
            )

    def _edited_call(
        self, turn: Turn, request: PermissionRequest, call: ToolCall, decision: PermissionDecision, position: int | None
    ) -> tuple[ToolCall, str] | None:
        """The call with the arguments an approval chose, recorded as ``ToolCallEdited``, and the
        note the model reads with its result; None (the call refused, its result at ``position``)
        when the sandbox or the policy refuses the edited call."""
        turn_id = turn.id
        arguments = decision.arguments or {}
        self.run.emit(ToolCallEdited(
            turn_id=turn_id, request_id=request.request_id, call_id=call.id, principal=decision.principal,
            arguments=arguments, arguments_sha256=arguments_sha256(arguments),
        ))
        edited = call.model_copy(update={"arguments": arguments, "arguments_raw": "", "arguments_error": None})
        verdict = self._triage(edited)
        if verdict.action == "refuse":
            turn.fail_call(call, verdict.failure, f"the call as {decision.principal} edited it: {verdict.text}", position)
            return None
        shown = arguments_preview(arguments, 500)
        return edited, f"[{decision.principal} changed the arguments of this call before it ran; it ran with {shown}]"

    async def _await_decisions(self, requests: list[PermissionRequest]) -> None:
        self.run.set_status("awaiting_approval")
        example = json.dumps({"request_id": requests[0].request_id, "decision": "grant", "principal": self.run.config.owner})
        lines = [f"- {code_span(r.request_id, 80)} · {code_span(r.tool, 80)} {code_span(arguments_preview(r.arguments, 120), 120)}" for r in requests]
        workflow.set_current_details(
            "**awaiting approval**\n\n" + "\n".join(lines) + f"\n\nSignal `permission_decision` with `{example}`"
        )
        await self.run.flush()
        ids = [r.request_id for r in requests]
        timeout = self.run.config.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: self.run.cancel_requested() or self.run.approvals.all_decided(ids),
                timeout=timedelta(seconds=timeout) if timeout is not None else None,
                timeout_summary="approval timeout" if timeout is not None else None,
            )
        except asyncio.TimeoutError:
            assert timeout is not None
            for event in self.run.approvals.time_out(ids, timeout):
                self.run.emit(event)
        if self.run.cancel_requested():
            raise TurnCancelled()
        self.run.set_status("running")

    async def _execute_tool(
        self, turn: Turn, round_number: int, call: ToolCall, note: str | None = None, position: int | None = None
    ) -> None:
        """Run one call, its result at ``position`` (None: the next one); an effect of unknown
        outcome waits for an operator's ``reconcile`` answer."""
        turn_id = turn.id
        if self.run.state.paused is not None:  # paused: the call neither starts nor is said to start
            await self.run.hold_while_paused()
            if self.run.stop_after_step():
                raise TurnCancelled()
        if position is None:
            position = self.run.journal.take_position()
        spec = self.run.tools.get(call.name)
        idempotency_key = self._idempotency_key(turn_id, call.id, position, ledger=spec is None or spec.risk != "read_only")
        self.run.emit(ToolInvocationStarted(turn_id=turn_id, call_id=call.id, tool=call.name, arguments=call.arguments))
        started = workflow.now()
        local = self._runs_locally(call)
        tool_seconds = self.run.config.tool_timeout_seconds
        if spec is not None and spec.timeout_seconds is not None:
            tool_seconds = min(tool_seconds, spec.timeout_seconds)  # the tool's own bound (@tool(timeout_seconds=...))
        if local:
            tool_seconds = min(tool_seconds, options.LOCAL_TOOL_SECONDS - options.LOCAL_TOOL_GRACE_SECONDS)
        mcp = spec is not None and spec.source is not None and spec.source.startswith("mcp:")
        answers: list[ElicitationAnswer] = []  # the user's answers to this call's server requests, in order
        request_state: str | None = None
        while True:
            await self.run.before_call()
            workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · running tool {code_span(call.name, 80)}")
            if self.run.config.tool_task_queue is not None and self.run.gen.tools_queue_writes():
                await self.run.flush()  # a tools worker of another build need not read this build's events
            writes = self.run.writes_for_call()
            fields = dict(
                session_id=self.run.config.session_id,
                turn_id=turn_id,
                call=call,
                workspace=self.run.config.workspace,
                idempotency_key=idempotency_key,
                result_position=position,
                timeout_seconds=tool_seconds,
                store_writes=writes,
                sandbox=self.run.config.sandbox,
                network=self.run.config.network,
                note=note,
            )
            activity_input: ToolExecuteInput = (
                McpCallInput(**fields, risk=spec.risk, answers=answers, request_state=request_state)  # type: ignore[arg-type, union-attr]
                if mcp else ToolExecuteInput(**fields)  # type: ignore[arg-type]
            )
            try:
                result = await self.run.execute(
                    options.MCP_CALL if mcp else options.TOOL_CALL,
                    activity_input,
                    local=local,
                    result_type=McpCallResult if mcp else ToolExecuteResult,
                    summary=f"{call.name} {arguments_preview(call.arguments, 60)}",
                    start_to_close=options.LOCAL_TOOL_SECONDS if local else tool_seconds + options.TOOL_GRACE_SECONDS,
                    heartbeat_timeout=self.run.config.heartbeat_timeout_seconds,
                    task_queue=self.run.config.tool_task_queue,
                )
            except ActivityError as err:
                if isinstance(err.cause, CancelledError):
                    raise TurnCancelled() from err
                if error_type(err) != OUTCOME_UNKNOWN:
                    turn.fail_call(
                        call, "tool_error", f"{call.name} failed: {error_text(err)}", position, started=started
                    )
                    if self.run.stop_after_step():
                        raise TurnCancelled() from err
                    return
                decision = await self.reconciles.ask(turn_id, call, idempotency_key, error_text(err))
                if decision.outcome == "not_applied":
                    continue  # the ledger released the claim: run the call once more
                text = f"the effect of this call was applied (confirmed by {decision.principal}); its result is unknown"
                self.run.stage_message(position, turn_id, Message(role="tool", tool_call_id=call.id, name=call.name, text=text))
                self.run.emit(
                    ToolInvocationCompleted(
                        turn_id=turn_id, call_id=call.id, tool=call.name, preview=text, size_bytes=len(text), position=position
                    )
                )
                turn.record_step(round_number, call.name, call.arguments, "applied", text, started, call_id=call.id)
                return
            self.run.call_wrote(writes)
            if isinstance(result, McpCallResult) and result.input_required is not None:
                if len(answers) >= MAX_ELICITATIONS_PER_CALL:
                    turn.fail_call(
                        call, "tool_error",
                        f"{call.name} failed: the server asked more than {MAX_ELICITATIONS_PER_CALL} questions in one call",
                        position, started=started,
                    )
                    return
                answers = [*answers, await self.mcp.elicit(turn, round_number, call, result.input_required)]
                request_state = result.input_required.request_state
                continue  # the call again, from the start, with one more answer
            break
        self.run.track(result.position, "tool", result.size_bytes, result.state_keys if result.ok else [])
        if result.ok:
            self.run.emit(
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
            self.run.emit(
                ToolInvocationFailed(
                    turn_id=turn_id,
                    call_id=call.id,
                    tool=call.name,
                    reason="tool_error",
                    error=result.error or "tool failed",
                    position=result.position,
                )
            )
        if result.memory is not None:
            self.run.memory_written(turn_id, call, result.memory)
        self.mcp.skill_result(turn_id, call, result)
        turn.record_step(
            round_number, call.name, call.arguments, "ok" if result.ok else "error",
            result.preview if result.ok else (result.error or "tool failed"), started, call_id=call.id,
        )
        if self.run.stop_after_step():
            raise TurnCancelled()

    def _runs_locally(self, call: ToolCall) -> bool:
        """The call runs as a local activity: a fast read-only tool, ``local_tools`` on (``lean-rounds-v1``),
        no ``tool_task_queue`` (tools run on their own workers then), in a run from before
        ``regular-activities-v1``."""
        spec = self.run.tools.get(call.name)
        return (
            self.run.gen.lean_rounds
            and self.run.gen.local_activities
            and self.run.config.local_tools
            and self.run.config.tool_task_queue is None
            and spec is not None
            and spec.local_activity
            and spec.risk == "read_only"
        )

    def owe_reconciles(self, answered: list[tuple[PermissionRequest, ReconcileDecision]]) -> None:
        """Keep reconcile answers a cancelled turn did not act on, for ``settle_owed_reconciles``."""
        self.reconciles.owe(answered)

    async def settle_owed_reconciles(self) -> None:
        """Write the reconcile answers a cancelled turn did not act on to the effect ledger (idempotent)."""
        await self.reconciles.settle_owed()

    def _idempotency_key(self, turn_id: str, call_id: str, position: int, *, ledger: bool) -> str:
        """The effect ledger's key of a call. With ``effect-key-position-v1`` it holds the call's result
        position, unique in the session: a model may send one call id in two rounds of a turn
        (servers number calls ``call_0``, ``call_1`` ... per reply), and the second effect must not
        be taken for the first. Only calls that go through the ledger (``ledger``: not read-only)
        ask for the patch, so a session of read-only rounds records no marker for it."""
        if ledger and self.run.gen.effect_key_position():
            return f"{workflow.info().workflow_id}/{turn_id}/{position}/{call_id}"
        return key_without_position(turn_id, call_id)
