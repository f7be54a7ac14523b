"""The pydantic-ai row of ``bench.overhead``: the same workload on pydantic-ai's Temporal integration.

An ordinary ``Agent`` with the ``TemporalDurability`` capability (the successor of the
deprecated ``TemporalAgent`` wrapper in pydantic-ai 2.x), run from a workflow of its own:
each model request and each tool call is an activity registered by ``AgentPlugin``, the
message history lives in the workflow (so every model activity's input carries the whole
transcript, tool results inline). The model is a zero-latency ``FunctionModel``; the tool
makes its text in memory.

Import only when ``pydantic_ai.durable_exec.temporal`` is installed (the ``bench`` extra).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalDurability
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

PAI_WORKFLOW = "BenchPaiAgentWorkflow"
AGENT_NAME = "bench_pai"
_PROMPT_SHAPE = re.compile(r"rounds=(\d+) bytes=(\d+)")


def prompt_for(rounds: int, result_bytes: int) -> str:
    """The user prompt; the fake model reads the workload's shape from it (activities share no state)."""
    return f"Read the workspace files one by one, then say done. rounds={rounds} bytes={result_bytes}"


def _shape(messages: list[ModelMessage]) -> tuple[int, int]:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                content = getattr(part, "content", None)
                if isinstance(content, str) and (found := _PROMPT_SHAPE.search(content)):
                    return int(found.group(1)), int(found.group(2))
    raise ValueError("no 'rounds=R bytes=N' in the prompt")


def fake_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Round k (k - 1 tool results so far): one ``read_file`` call; after round R the answer."""
    rounds, result_bytes = _shape(messages)
    done = sum(
        1
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    )
    if done >= rounds:
        return ModelResponse(parts=[TextPart("done")])
    k = done + 1
    return ModelResponse(
        parts=[ToolCallPart("read_file", {"path": f"file-{k:04d}.txt", "size": result_bytes}, tool_call_id=f"call-{k}")]
    )


agent = Agent(
    FunctionModel(fake_model),
    name=AGENT_NAME,
    capabilities=[
        TemporalDurability(
            activity_config=workflow.ActivityConfig(
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5),
            )
        )
    ],
)


@agent.tool_plain
def read_file(path: str, size: int) -> str:
    """``size`` bytes of text naming ``path``."""
    return (f"{path}:" + "x" * size)[:size]


@dataclass
class PaiInput:
    rounds: int
    result_bytes: int


@workflow.defn(name=PAI_WORKFLOW)
class BenchPaiAgentWorkflow:
    @workflow.run
    async def run(self, input: PaiInput) -> str:
        # pydantic-ai stops a run at 50 model requests by default; the workload makes R + 1.
        limits = UsageLimits(request_limit=input.rounds + 5)
        result = await agent.run(prompt_for(input.rounds, input.result_bytes), usage_limits=limits)
        return str(result.output)


def client_plugins() -> list:
    """Plugins for the client (data converter, sandbox passthrough) and worker (plus the agent's activities)."""
    return [PydanticAIPlugin()]


def worker_plugins() -> list:
    return [AgentPlugin(agent)]


WORKFLOWS = [BenchPaiAgentWorkflow]
ACTIVITIES: list = []  # AgentPlugin registers the agent's model and tool activities
