"""The naive baseline of ``bench.history``: an agent loop that keeps its whole transcript in history.

This is what an agent loop on Temporal looks like when content is not kept out of history
(the common pattern of other runtimes): the workflow holds the transcript as a list of
messages with their contents inline, passes all of it to every model activity, and the
tool activity returns the full tool result into the workflow. Each model call's input
therefore repeats the whole conversation so far, and workflow history grows
quadratically with the number of rounds.

The model is agentrt's own scripted provider (``activities.providers.scripted``): round i
is answered with the i-th response of the script, exactly as in a session. Tools run
through agentrt's tool registry, so ``fs.read`` returns the same text in both runs.

Before each model call the workflow records ``workflow.info().get_current_history_size()``
and returns the list in ``NaiveAgentResult.history_bytes`` (also served by the query
``history_bytes``). It stops early, with a status that says why, instead of failing the
way a real naive runtime would, when the next model call would break a server limit:
an activity payload over ``max_payload_bytes`` (server: 2 MiB), a history over
``max_history_bytes`` (server: 50 MiB) or more than ``max_history_events`` events
(server: 51,200).

Not part of agentrt: used only by ``bench.history``; its activity names are prefixed
``naive.`` and it runs on its own task queue.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from agentrt.activities.providers.scripted import ScriptedProvider
    from agentrt.activities.tools import ToolContext, default_registry
    from agentrt.schemas import Message, ModelProfile, ModelRequest, ModelResponse, ToolCall, ToolError, ToolSpec

NAIVE_MODEL = "naive.model_complete"
NAIVE_TOOL = "naive.tool_execute"

# Server defaults (see ../shared/TEMPORAL_NOTES.md), with room for the events around a call.
PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024
HISTORY_LIMIT_BYTES = 50 * 1024 * 1024
HISTORY_EVENTS_LIMIT = 51_200
_MARGIN_BYTES = 64 * 1024
_MARGIN_EVENTS = 100

NaiveStatus = Literal["completed", "round_limit", "payload_limit", "history_limit", "event_limit"]


class NaiveAgentInput(BaseModel):
    """Workflow input: the prompt, the script and workspace, the tools offered, and the limits it stops at."""

    prompt: str
    script: str
    workspace: str
    tools: list[ToolSpec] = Field(default_factory=list)
    max_rounds: int = 250
    max_payload_bytes: int = PAYLOAD_LIMIT_BYTES - _MARGIN_BYTES
    max_history_bytes: int = HISTORY_LIMIT_BYTES - _MARGIN_BYTES
    max_history_events: int = HISTORY_EVENTS_LIMIT - _MARGIN_EVENTS


class NaiveAgentResult(BaseModel):
    """``history_bytes[i]`` is the history size (bytes) when model call ``i + 1`` was made.

    ``rounds`` counts the model calls made; ``stopped`` says which limit ended a run early.
    """

    status: NaiveStatus
    rounds: int
    answer: str = ""
    history_bytes: list[int] = Field(default_factory=list)
    stopped: str | None = None


class NaiveModelInput(BaseModel):
    """The whole transcript, inline, on every call."""

    script: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)


class NaiveToolInput(BaseModel):
    call: ToolCall
    workspace: str


class NaiveToolResult(BaseModel):
    """The tool's full output, inline."""

    text: str
    is_error: bool = False


_RETRY = RetryPolicy(maximum_attempts=3)


@workflow.defn(name="NaiveAgentWorkflow")
class NaiveAgentWorkflow:
    def __init__(self) -> None:
        self._history_bytes: list[int] = []

    @workflow.query
    def history_bytes(self) -> list[int]:
        return list(self._history_bytes)

    @workflow.run
    async def run(self, input: NaiveAgentInput) -> NaiveAgentResult:
        messages: list[Message] = [Message(role="user", text=input.prompt)]
        for round_number in range(1, input.max_rounds + 1):
            request = NaiveModelInput(script=input.script, messages=messages, tools=input.tools)
            info = workflow.info()
            history_size = info.get_current_history_size()
            stopped = _limit_reached(input, request, history_size, info.get_current_history_length())
            if stopped is not None:
                status, why = stopped
                return NaiveAgentResult(
                    status=status, rounds=round_number - 1, history_bytes=self._history_bytes, stopped=why
                )
            self._history_bytes.append(history_size)
            reply = await workflow.execute_activity(
                NAIVE_MODEL,
                request,
                result_type=ModelResponse,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=_RETRY,
                summary=f"naive model · round {round_number}",
            )
            messages.append(Message(role="assistant", text=reply.text, tool_calls=reply.tool_calls))
            if not reply.tool_calls:
                return NaiveAgentResult(
                    status="completed", rounds=round_number, answer=reply.text, history_bytes=self._history_bytes
                )
            for call in reply.tool_calls:
                result = await workflow.execute_activity(
                    NAIVE_TOOL,
                    NaiveToolInput(call=call, workspace=input.workspace),
                    result_type=NaiveToolResult,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=_RETRY,
                    summary=f"naive {call.name}",
                )
                messages.append(
                    Message(
                        role="tool", tool_call_id=call.id, name=call.name, text=result.text, is_error=result.is_error
                    )
                )
        return NaiveAgentResult(status="round_limit", rounds=input.max_rounds, history_bytes=self._history_bytes)


def _limit_reached(
    input: NaiveAgentInput, request: NaiveModelInput, history_size: int, history_length: int
) -> tuple[NaiveStatus, str] | None:
    """Which server limit the next model call would break, if any (JSON size of its input as the payload size)."""
    payload = len(request.model_dump_json())
    if payload > input.max_payload_bytes:
        return "payload_limit", f"the model input would be {payload:,} bytes (limit {input.max_payload_bytes:,})"
    if history_size + 2 * payload > input.max_history_bytes:
        return "history_limit", (
            f"history at {history_size:,} bytes + a {payload:,}-byte model input (limit {input.max_history_bytes:,})"
        )
    if history_length > input.max_history_events:
        return "event_limit", f"history at {history_length:,} events (limit {input.max_history_events:,})"
    return None


@activity.defn(name=NAIVE_MODEL)
async def naive_model_complete(input: NaiveModelInput) -> ModelResponse:
    """agentrt's scripted model on the transcript it was given (answer i for the i-th assistant turn)."""
    profile = ModelProfile(name="scripted", provider="scripted", model="scripted", script=input.script)
    request = ModelRequest(profile=profile, messages=input.messages, tools=input.tools)
    return await ScriptedProvider(profile).complete(request)


@activity.defn(name=NAIVE_TOOL)
async def naive_tool_execute(input: NaiveToolInput) -> NaiveToolResult:
    """Run the call with agentrt's tool registry; the whole output goes back into the workflow."""
    def run() -> NaiveToolResult:
        try:
            output = default_registry().execute(input.call, ToolContext(workspace=Path(input.workspace)))
        except ToolError as err:
            return NaiveToolResult(text=f"error: {err}", is_error=True)
        return NaiveToolResult(text=output.text)

    return await asyncio.to_thread(run)


NAIVE_ACTIVITIES = [naive_model_complete, naive_tool_execute]
