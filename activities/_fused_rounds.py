"""Read-only rounds run inside one model call (``fused-rounds-v1``, ``SessionConfig.fused_rounds``).

On Temporal a round costs two activities and two workflow tasks, most of it waiting for
dispatch. When a reply asks only for fast read-only tools (``local_activity``) that the
session's policy allows without asking, the model call runs them on its own worker and calls
the model again, up to its limits; the workflow records those rounds when the call returns
(``workflows/_fused_rounds.py``).

Nothing a fused round does is written to the transcript here: its messages travel back in the
result (the results of one round at most ``FuseRounds.max_result_bytes`` together, those of
all its rounds at most ``MAX_FUSED_BYTES``), so a call that is cancelled or retried leaves nothing the workflow did
not accept, except its usage receipts. A follow-up model call records its receipt under attempt
``FOLLOW_UP_ATTEMPTS × activity attempt + k`` (k = 1, 2, ...), apart from the attempts Temporal
numbers; it streams no token deltas (a stream shows a call's deltas after the call's
``ModelRequestStarted``, which the workflow writes when the call returns) and stores no
reasoning blocks (a profile that takes reasoning back never fuses).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import activity

from agentrt.activities._output import with_output_tool
from agentrt.activities._telemetry import model_call
from agentrt.schemas import (
    ContextBreakdown,
    FusedRound,
    FusedToolResult,
    Message,
    ModelCallInput,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
    ToolExecuteInput,
    ToolSpec,
    Usage,
    argument_problems,
    session_workflow_id,
)
from agentrt.workflows.policy import Allowed, PolicyEngine

if TYPE_CHECKING:
    from agentrt.activities._model import ModelActivities
    from agentrt.activities._tools import ToolActivities
    from agentrt.activities.providers import Provider

# Follow-up calls record their receipts under FOLLOW_UP_ATTEMPTS * attempt + k.
FOLLOW_UP_ATTEMPTS = 1000
# The most bytes of tool results one model call carries back (UTF-8).
MAX_FUSED_BYTES = 64 * 1024
# No follow-up model call once this share of the call's start-to-close timeout has passed.
TIME_SHARE = 0.5


async def _no_deltas(text: str) -> None:
    """A follow-up call's deltas are not streamed (see the module's docstring)."""


class RoundFusion:
    """Runs the rounds after a model call's first reply, over the worker's model and tool activities."""

    def __init__(self, models: "ModelActivities", tools: "ToolActivities") -> None:
        self._models = models
        self._tools = tools

    async def follow(
        self,
        input: ModelCallInput,
        profile: ModelProfile,
        provider: "Provider",
        tools: list[ToolSpec],
        first: ModelResponse,
        context: ContextBreakdown | None = None,
    ) -> tuple[list[FusedRound], ModelResponse | None, ContextBreakdown | None]:
        """The rounds run after ``first`` (the call's own reply) and the reply they ended with,
        with the input by source of the call that gave that reply (``context``: ``first``'s; each
        round carries its own).

        Returns ``([], first)`` when ``first``'s calls may not run here. The reply is the first
        one that asks for a call that may not run here, or for no call (an answer); None when
        the rounds ended without a reply: the round limit (``fuse.max_rounds`` follow-ups), the
        call's time (``TIME_SHARE`` of its start-to-close timeout), or a follow-up call that
        failed, was refused or came back empty (the workflow's next call meets that again, under
        its own retry policy). Raises only ``asyncio.CancelledError`` (the call was cancelled).
        """
        fuse = input.fuse
        assert fuse is not None
        loop = asyncio.get_running_loop()
        timeout = activity.info().start_to_close_timeout
        deadline = loop.time() + (timeout.total_seconds() * TIME_SHARE if timeout else 60.0)
        specs = {s.name: s for s in self._models.registry.specs(fuse.tools)[0] if s.risk == "read_only" and s.local_activity}
        policy = PolicyEngine(
            fuse.approval, fuse.sandbox, network=fuse.network, interactive=fuse.interactive, workspace=fuse.workspace,
            version=fuse.policy_version,
        )
        rounds: list[FusedRound] = []
        later: list[tuple[int, Message]] = []  # the rounds' messages, at the positions the workflow will give them
        position, room = input.reply_position, MAX_FUSED_BYTES
        response = first
        while True:
            calls = response.tool_calls
            if not calls or not all(runs_without_asking(call, specs, policy) for call in calls):
                return rounds, response, context
            results = await self._run_calls(input, calls, specs, min(fuse.max_result_bytes, room), deadline)
            if results is None:
                return rounds, response, context
            room -= sum(len(r.text.encode()) for r in results)
            rounds.append(FusedRound(
                text=response.text, tool_calls=calls, usage=response.usage, stop_reason=response.stop_reason,
                reasoning_chars=sum(len(block.text) for block in response.reasoning), results=results, context=context,
            ))
            later.append((position, Message(role="assistant", text=response.text, tool_calls=calls)))
            for call, result in zip(calls, results):
                position += 1
                later.append((position, result.message(call)))
            position += 1
            if len(rounds) > fuse.max_rounds or loop.time() > deadline:
                return rounds, None, None
            follow_up = await self._follow_up(input, len(rounds), position, profile, provider, tools, later)
            if follow_up is None:
                return rounds, None, None
            response, context = follow_up

    async def _run_calls(
        self, input: ModelCallInput, calls: list[ToolCall], specs: dict[str, ToolSpec], max_bytes: int, deadline: float
    ) -> list[FusedToolResult] | None:
        """Each call's result, in call order; None (none of them is kept) when one raised
        something else than a ``ToolError`` (a user tool's crash, retried as a tool activity),
        wrote a memory, or returned more than ``max_bytes`` bytes in all, or when ``deadline``
        (the event loop's clock) passed before a call started: a reply may ask for hundreds of
        calls, which run one after another here, and together they must not hold the model
        call past its start-to-close timeout (unfused, each is a tool activity of its own).
        Each call is bounded as the session bounds it unfused: ``fuse.timeout_seconds``, or its
        tool's own bound (``@tool(timeout_seconds=...)``, ``specs``) when shorter."""
        fuse = input.fuse
        assert fuse is not None
        loop = asyncio.get_running_loop()
        results: list[FusedToolResult] = []
        for call in calls:
            if loop.time() > deadline:
                activity.logger.info("fused round stopped: the call's time share passed before %s ran", call.name)
                return None
            own = specs[call.name].timeout_seconds
            tool_input = ToolExecuteInput(
                session_id=input.session_id, turn_id=input.turn_id, call=call, workspace=fuse.workspace,
                idempotency_key=f"{session_workflow_id(input.session_id)}/{input.turn_id}/{call.id}",
                result_position=input.reply_position,
                timeout_seconds=fuse.timeout_seconds if own is None else min(fuse.timeout_seconds, own),
                sandbox=fuse.sandbox, network=fuse.network,
            )
            try:
                ok, text, error_type, keys, memory = await asyncio.to_thread(self._tools.run_unstored, tool_input)
            except Exception as err:  # the tool activity runs it again, with its retry policy and its error
                activity.logger.info("fused round stopped: %s raised %s", call.name, type(err).__name__)
                return None
            max_bytes -= len(text.encode())
            if memory is not None or max_bytes < 0:
                return None
            results.append(FusedToolResult(call_id=call.id, ok=ok, text=text, error_type=error_type, state_keys=keys if ok else []))
        return results

    async def _follow_up(
        self,
        input: ModelCallInput,
        k: int,
        position: int,
        profile: ModelProfile,
        provider: "Provider",
        tools: list[ToolSpec],
        later: list[tuple[int, Message]],
    ) -> tuple[ModelResponse, ContextBreakdown | None] | None:
        """Follow-up call ``k`` (its reply at ``position``, after the messages ``later``) and its
        input by source; None when it was refused, failed or came back empty."""
        models = self._models
        attempt = FOLLOW_UP_ATTEMPTS * activity.info().attempt + k
        step = input.model_copy(update={
            "round": input.round + k, "reply_position": position, "store_writes": None,
            "reply_index": input.reply_index + k if input.reply_index is not None else None,
        })
        with model_call(input.session_id, attempt, turn_id=input.turn_id, round=step.round) as call:
            call.request(profile)
            try:
                system, messages, context, refusal = await asyncio.to_thread(models.begin_call, step, attempt, profile, tools, later)
            except Exception as err:
                activity.logger.info("fused round stopped: its context could not be read (%s)", type(err).__name__)
                return None
            if refusal is not None:
                return None
            request = ModelRequest(
                profile=profile, system=system, messages=messages, tools=with_output_tool(tools, input.output, profile),
                reply_index=step.reply_index, script_session=input.script_session, script_node=input.script_node,
                output=input.output,
            )
            try:
                response = await provider.complete(request, _no_deltas)
            except asyncio.CancelledError:
                await asyncio.shield(asyncio.to_thread(models.end_call, step, attempt, [], 0, "interrupted", Usage()))
                raise
            except Exception as err:
                partial = err.partial_usage if isinstance(err, ProviderError) and isinstance(err.partial_usage, Usage) else None
                try:
                    await asyncio.to_thread(models.end_call, step, attempt, [], 0, "interrupted", partial or Usage(), None, profile)
                except Exception:
                    activity.logger.exception("could not record the end of fused follow-up call %d", k)
                activity.logger.info("fused round stopped: follow-up call %d failed (%s)", k, type(err).__name__)
                return None
            kept = response.model_copy(update={"reasoning": []})
            await asyncio.to_thread(models.end_call, step, attempt, [], 0, "completed", response.usage, kept, profile)
            call.reply(response.usage, response.stop_reason, profile)
        if not response.text.strip() and not response.tool_calls:
            return None
        return response, context



def runs_without_asking(call: ToolCall, tools: dict[str, ToolSpec], policy: PolicyEngine) -> bool:
    """True when the session would run ``call`` at once: one of ``tools``, its arguments a JSON
    object valid for the tool's schema, and ``policy`` allowing it without approval (the
    session's triage, ``workflows/_tool_calls.py``, says ``run`` for exactly these)."""
    spec = tools.get(call.name)
    if spec is None or call.arguments is None or argument_problems(spec, call.arguments):
        return False
    return isinstance(policy.decide(spec, call.arguments), Allowed)
