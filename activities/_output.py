"""A structured turn's final answer in the model activity: the output tool's call read as the
answer, and the answer checked against the turn's ``OutputSpec`` (``schemas.check_output``).

The check runs here, not in the workflow: its result is recorded in history with the call's
(so replay never runs the validator again, whatever jsonschema version a later worker has),
and an answer or schema that makes validation slow costs this activity, bounded by
``check_output``'s budgets, never a workflow task (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import json

from agentrt.activities.providers import uses_output_tool
from agentrt.schemas import OUTPUT_TOOL, ModelProfile, ModelResponse, OutputCheck, OutputSpec, ToolSpec, check_output

__all__ = ["checked_answer", "with_output_tool"]


def with_output_tool(tools: list[ToolSpec], output: OutputSpec | None, profile: ModelProfile) -> list[ToolSpec]:
    """``tools`` plus the output tool when the call has a spec its provider asks for by a tool."""
    if output is None or not uses_output_tool(profile):
        return tools
    return [tool for tool in tools if tool.name != OUTPUT_TOOL] + [output.tool_spec()]


async def checked_answer(output: OutputSpec, response: ModelResponse) -> tuple[ModelResponse, OutputCheck | None]:
    """The response as the turn keeps it, and its check (None when it is no final answer).

    A call of the output tool is the final answer: its arguments become the answer's text (JSON)
    and the reply's other calls are not run (as pydantic-ai's default end strategy). A reply
    with other tool calls only is no final answer. The check runs in a thread (it is CPU work,
    bounded by ``check_output``)."""
    answer_call = next((call for call in response.tool_calls if call.name == OUTPUT_TOOL), None)
    if answer_call is not None:
        if answer_call.arguments is not None:
            text = json.dumps(answer_call.arguments, ensure_ascii=False)
        else:
            text = answer_call.arguments_raw or ""
        response = response.model_copy(update={"text": text, "tool_calls": []})
    elif response.tool_calls:
        return response, None
    return response, await asyncio.to_thread(check_output, output, response.text)
