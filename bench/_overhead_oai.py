"""The OpenAI Agents SDK row of ``bench.overhead``: the same workload with Temporal's OpenAI Agents plugin.

``OpenAIAgentsPlugin`` (package ``temporalio-openai-agents``, what
``temporalio.contrib.openai_agents`` forwards to in temporalio 1.35) runs every model call
as its ``invoke_model_activity``; the tool is an activity made a tool with
``activity_as_tool``. The agent loop (``Runner.run``) runs in the workflow and keeps the
conversation there, so each model activity's input carries the whole transcript, tool
results inline. The model is a zero-latency ``Model`` given to the plugin as its model
provider; the tool makes its text in memory. Tracing is off (it would export to OpenAI):
``client_plugins()`` sets ``OPENAI_AGENTS_DISABLE_TRACING=1`` in this process unless set.

Import only when ``temporalio.openai_agents`` and ``agents`` are installed (the ``bench`` extra).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Model, ModelProvider, ModelResponse, Runner, Usage, set_tracing_disabled
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.workflow import activity_as_tool

OAI_WORKFLOW = "BenchOaiAgentWorkflow"
OAI_TOOL = "bench_oai.read_file"
_PROMPT_SHAPE = re.compile(r"rounds=(\d+) bytes=(\d+)")
_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)


def prompt_for(rounds: int, result_bytes: int) -> str:
    """The user prompt; the fake model reads the workload's shape from it (activities share no state)."""
    return f"Read the workspace files one by one, then say done. rounds={rounds} bytes={result_bytes}"


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class FakeModel(Model):
    """Round k (k - 1 ``function_call_output`` items so far): one ``read_file`` call; after round R the answer."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        shape = next(
            (m for item in items if isinstance(c := _field(item, "content"), str) and (m := _PROMPT_SHAPE.search(c))),
            None,
        )
        if shape is None:
            raise ValueError("no 'rounds=R bytes=N' in the prompt")
        rounds, result_bytes = int(shape.group(1)), int(shape.group(2))
        done = sum(1 for item in items if _field(item, "type") == "function_call_output")
        if done >= rounds:
            output: Any = ResponseOutputMessage(
                id=f"msg-{done + 1}",
                content=[ResponseOutputText(text="done", annotations=[], type="output_text")],
                role="assistant",
                status="completed",
                type="message",
            )
        else:
            k = done + 1
            output = ResponseFunctionToolCall(
                arguments=json.dumps({"path": f"file-{k:04d}.txt", "size": result_bytes}),
                call_id=f"call-{k}",
                name="read_file",
                type="function_call",
                id=f"fc-{k}",
                status="completed",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


class FakeModelProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return FakeModel()


@activity.defn(name=OAI_TOOL)
async def read_file(path: str, size: int) -> str:
    """``size`` bytes of text naming ``path``."""
    return (f"{path}:" + "x" * size)[:size]


@dataclass
class OaiInput:
    rounds: int
    result_bytes: int


@workflow.defn(name=OAI_WORKFLOW)
class BenchOaiAgentWorkflow:
    @workflow.run
    async def run(self, input: OaiInput) -> str:
        agent = Agent(
            name="bench_oai",
            instructions="Read the files, then say done.",
            tools=[activity_as_tool(read_file, start_to_close_timeout=timedelta(seconds=60), retry_policy=_RETRY)],
        )
        result = await Runner.run(agent, prompt_for(input.rounds, input.result_bytes), max_turns=input.rounds + 5)
        return str(result.final_output)


def client_plugins() -> list:
    """The plugin for client and worker: data converter, tracing interceptor, the model activity."""
    # The plugin installs its own trace provider while the worker runs, which reads only the
    # environment: without this it would try to export traces to OpenAI at shutdown.
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)
    return [
        OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
            model_provider=FakeModelProvider(),
        )
    ]


def worker_plugins() -> list:
    return []


WORKFLOWS = [BenchOaiAgentWorkflow]
ACTIVITIES = [read_file]
