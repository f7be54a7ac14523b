"""The rounds a model call ran itself (``fused-rounds-v1``), recorded as the session's own.

``FusedRounds.spec`` says what a model call may run (``FuseRounds``): only in a session with
``fused_rounds``, no advisor review and no budget, whose tool and model calls go to its own
workers; only the fast read-only tools (``local_activity``) of the worker's registry, and of
those only the calls the policy allows without asking (the activity asks the same ``triage``).
``accept`` records each round the call ran as ``TurnLoop`` and ``ToolCalls`` record a round they
run: its ``ModelRequestStarted`` (and ``ContextAssembled``), the assistant message, for each call
its request, the policy's grant (``policy-decisions-v1``), start, result message, end and
trajectory step; then the reply the call ended with gets its position. ``request_started`` is the
``ModelRequestStarted`` of any model call, ``context_assembled`` its ``ContextAssembled``.
Workflow code only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temporalio import workflow

from agentrt.schemas import (
    DELEGATE_TOOL,
    SKILL_ACTIVATE,
    SKILL_DEACTIVATE,
    AssistantMessageCompleted,
    ContextAssembled,
    ContextBreakdown,
    ContextPlan,
    FusedRound,
    FuseRounds,
    Message,
    ModelCallResult,
    ModelRequestStarted,
    ModelToolCallRequested,
    PermissionGranted,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
    Usage,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import context
from agentrt.workflows._errors import TurnCancelled
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_calls import triage
from agentrt.workflows.policy import PolicyEngine

if TYPE_CHECKING:
    from agentrt.workflows._turn import Turn

PREVIEW_CHARS = 200  # as tool.execute previews a result


@dataclass
class Accepted:
    """What ``accept`` recorded: the rounds' tokens and tool calls, and the round number of the
    reply the call ended with (``reply``, None when it ended without one)."""

    round_number: int
    reply: ModelCallResult | None
    usage: Usage = field(default_factory=Usage)
    calls: int = 0


def request_started(run: SessionRun, turn: Turn, round_number: int, reply_position: int) -> ContextPlan | None:
    """Emit the ``ModelRequestStarted`` of round ``round_number``'s model call (its reply at
    ``reply_position``) and return its context plan (None before ``context-window-v1``)."""
    config, state = run.config, run.state
    plan = None
    if run.gen.context:
        plan = context.plan_context(
            state.context,
            context_window=run.profile.context_window,
            max_output_tokens=run.profile.max_output_tokens,
            fixed_tokens=run.fixed_tokens + turn.mcp_tokens,
            upto_position=reply_position,
        )
    run.emit(
        ModelRequestStarted(
            turn_id=turn.id,
            round=round_number,
            profile=config.profile,
            context_tokens=plan.estimated_tokens if plan else None,
            context_messages=plan.messages if plan else None,
            omitted_messages=plan.omitted if plan else 0,
            summary_id=plan.summary_id if plan else None,
            history_bytes=workflow.info().get_current_history_size(),
        )
    )
    return plan


def context_assembled(
    run: SessionRun, turn: Turn, round_number: int, breakdown: ContextBreakdown | None, overflow: bool = False
) -> None:
    """Emit the ``ContextAssembled`` of round ``round_number``'s model call, its input by source
    (``overflow``: why nothing was sent), when the worker reported one (``context-events-v1``)."""
    if breakdown is not None and run.gen.context_events():
        run.emit(ContextAssembled(
            turn_id=turn.id, round=round_number, profile=run.config.profile, breakdown=breakdown, overflow=overflow,
        ))


class FusedRounds:
    """Says what a session's model call may run itself, and records what it ran."""

    def __init__(self, run: SessionRun) -> None:
        self.run = run

    def spec(self, round_number: int) -> FuseRounds | None:
        """What round ``round_number``'s model call may run itself, or None (it runs none)."""
        run, config = self.run, self.run.config
        if not config.fused_rounds or round_number >= config.max_rounds_per_turn:
            return None
        if config.advisor.mode != "off" or config.budget is not None or config.tool_task_queue or config.model_task_queue:
            return None
        skip = (DELEGATE_TOOL, SKILL_ACTIVATE, SKILL_DEACTIVATE)
        tools = sorted(
            name for name, spec in run.tools.items()
            if spec.risk == "read_only" and spec.local_activity and spec.source is None and name not in skip
        )
        if not tools or not run.gen.fused_rounds():
            return None
        return FuseRounds(
            max_rounds=config.max_rounds_per_turn - round_number,
            tools=tools,
            workspace=config.workspace,
            approval=config.approval,
            sandbox=config.sandbox,
            network=config.network,
            interactive=config.interactive,
            policy_version=self._policy_version(),
            timeout_seconds=min(config.tool_timeout_seconds, options.LOCAL_TOOL_SECONDS - options.LOCAL_TOOL_GRACE_SECONDS),
        )

    def _policy_version(self) -> int:
        """The policy engine the session's tool calls are decided by: 1, 2 (``policy-sandbox-v1``)
        or 3 (``policy-decisions-v1``), asked as ``ToolCalls.handle`` asks them."""
        gen = self.run.gen
        if not gen.policy_v2():
            return 1
        return 3 if gen.policy_decisions() else 2

    def accept(self, turn: Turn, round_number: int, reply: ModelCallResult) -> Accepted:
        """Record the rounds ``reply.fused`` (the first at the position ``reply.position`` taken
        for the call) as rounds ``round_number``, ``round_number + 1``, ...; give the reply the
        call ended with its position and ``ModelRequestStarted``. Raises ``TurnCancelled`` when
        a cancel came meanwhile (the rounds that ran stay recorded)."""
        run = self.run
        done = Accepted(round_number=round_number, reply=None)
        position = reply.position
        for index, fused in enumerate(reply.fused):
            number = round_number + index
            if index:
                position = run.journal.take_position()
                plan = request_started(run, turn, number, position)
                context_assembled(run, turn, number, fused.context)
                run.state.assistant_messages += 1
                if plan is not None:
                    context.observe(run.state.context, plan.raw_tokens, fused.usage.input_tokens)
            self._record_round(turn, number, position, fused, done)
        done.round_number = round_number + len(reply.fused)
        if run.stop_after_step():
            turn.usage = turn.usage + reply.usage
            run.add_usage(reply.usage)
            raise TurnCancelled()
        if reply.call_again:
            return done
        position = run.journal.take_position()
        plan = request_started(run, turn, done.round_number, position)
        context_assembled(run, turn, done.round_number, reply.context)
        run.state.assistant_messages += 1
        if plan is not None:
            context.observe(run.state.context, plan.raw_tokens, reply.usage.input_tokens)
        done.reply = reply.model_copy(update={"position": position, "fused": [], "call_again": False})
        return done

    def _record_round(self, turn: Turn, number: int, position: int, fused: FusedRound, done: Accepted) -> None:
        run, turn_id = self.run, turn.id
        done.usage = done.usage + fused.usage
        turn.usage = turn.usage + fused.usage
        run.add_usage(fused.usage)
        run.stage_message(position, turn_id, Message(role="assistant", text=fused.text, tool_calls=fused.tool_calls))
        run.emit(
            AssistantMessageCompleted(
                turn_id=turn_id, round=number, text=fused.text, tool_calls=len(fused.tool_calls), usage=fused.usage,
                position=position, reasoning_chars=fused.reasoning_chars,
            )
        )
        turn.tool_calls += len(fused.tool_calls)
        done.calls += len(fused.tool_calls)
        run.count_tool_calls(len(fused.tool_calls))
        version = self._policy_version()
        config = run.config
        policy = PolicyEngine(
            config.approval, config.sandbox, network=config.network, interactive=config.interactive,
            workspace=config.workspace, version=version,
        )
        for call in fused.tool_calls:
            run.emit(ModelToolCallRequested(turn_id=turn_id, round=number, call=call))
            verdict = triage(call, run.tools, policy) if version >= 3 else None
            if verdict is not None and verdict.action == "run":  # as ToolCalls.handle records the policy's grant
                run.emit(PermissionGranted(
                    turn_id=turn_id, call_id=call.id, reason=verdict.text, scope="policy", rule=verdict.rule,
                ))
        started = workflow.now()
        for call, result in zip(fused.tool_calls, fused.results):
            at = run.journal.take_position()
            run.emit(ToolInvocationStarted(turn_id=turn_id, call_id=call.id, tool=call.name, arguments=call.arguments))
            run.stage_message(at, turn_id, result.message(call))
            size = len(result.text.encode())
            if result.ok:
                preview = " ".join(result.text.split())[:PREVIEW_CHARS]
                run.emit(ToolInvocationCompleted(
                    turn_id=turn_id, call_id=call.id, tool=call.name, preview=preview, size_bytes=size, position=at,
                ))
                turn.record_step(number, call.name, call.arguments, "ok", preview, started, call_id=call.id)
            else:
                error = result.text.removeprefix("error: ") or "tool failed"
                run.emit(ToolInvocationFailed(
                    turn_id=turn_id, call_id=call.id, tool=call.name, reason="tool_error", error=error, position=at,
                ))
                turn.record_step(number, call.name, call.arguments, "error", error, started, call_id=call.id)
