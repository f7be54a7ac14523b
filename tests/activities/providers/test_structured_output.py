"""Structured output on the wire, against loopback servers: OpenAI Chat's ``response_format``,
Responses' ``text.format``, the output tool where the profile asks for it, and Anthropic's
forced output tool; the answer that comes back, checked as the model activity checks it."""

from __future__ import annotations

import json

from agentrt.activities._output import checked_answer, with_output_tool
from agentrt.activities.providers import AnthropicProvider, OpenAIProvider, OpenAIResponsesProvider
from agentrt.schemas import Message, ModelProfile, ModelRequest, OutputSpec, ToolCall, ToolSpec
from tests.activities.providers import test_anthropic as anthropic
from tests.activities.providers import test_openai as chat
from tests.activities.providers import test_openai_responses as responses
from tests.activities.providers._loopback import LoopbackServer, Reply, sse_typed

TRIAGE = OutputSpec.from_schema(
    {
        "type": "object",
        "description": "How urgent a ticket is.",
        "properties": {"priority": {"type": "string", "enum": ["low", "high"]}},
        "required": ["priority"],
        "additionalProperties": False,
    },
    name="Triage",
    strict=True,
)
FS_READ = chat.FS_READ


def structured(profile: ModelProfile, tools: list[ToolSpec] | None = None) -> ModelRequest:
    """A request as the model activity builds it for a turn with the ``TRIAGE`` spec."""
    return ModelRequest(
        profile=profile, system="You triage tickets.", messages=[Message(role="user", text="my invoice is wrong")],
        tools=with_output_tool(tools or [], TRIAGE, profile), output=TRIAGE,
    )


async def test_openai_chat_asks_for_the_schema_as_response_format_and_its_answer_validates(server: LoopbackServer) -> None:
    server.reply(chat.text_stream('{"priority":', ' "high"}'))
    req = structured(chat.profile(server.url), [FS_READ])

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    body = json.loads(server.last.body)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Triage", "description": "How urgent a ticket is.", "schema": TRIAGE.json_schema, "strict": True},
    }
    assert [t["function"]["name"] for t in body["tools"]] == ["fs__read"] and "tool_choice" not in body
    _, check = await checked_answer(TRIAGE, response)
    assert check is not None and check.output == {"priority": "high"}


async def test_openai_chat_with_output_mode_tool_forces_the_output_tool_instead(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=chat.sse_data(
        chat.tool_piece(0, id="call_1", name="final_result", arguments='{"priority": "urgent"}'),
        chat.chunk({}, finish_reason="tool_calls"),
        "[DONE]",
    )))
    req = structured(chat.profile(server.url, output_mode="tool"), [FS_READ])

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    body = json.loads(server.last.body)
    assert "response_format" not in body and body["tool_choice"] == "required"
    assert body["tools"][-1]["function"] == {
        "name": "final_result", "description": TRIAGE.tool_spec().description, "parameters": TRIAGE.json_schema,
    }
    kept, check = await checked_answer(TRIAGE, response)
    assert kept.tool_calls == [] and json.loads(kept.text) == {"priority": "urgent"}
    assert check is not None and check.output is None and check.problems == ["priority: 'urgent' is not one of ['low', 'high']"]


async def test_openai_responses_asks_for_the_schema_as_text_format(server: LoopbackServer) -> None:
    server.reply(responses.stream(responses.message_added(), responses.text_delta('{"priority": "low"}'), responses.completed()))
    req = structured(responses.profile(server.url, "gpt-5"))

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    body = json.loads(server.last.body)
    assert body["text"] == {
        "format": {
            "type": "json_schema", "name": "Triage", "description": "How urgent a ticket is.",
            "schema": TRIAGE.json_schema, "strict": True,
        }
    }
    assert "tools" not in body
    _, check = await checked_answer(TRIAGE, response)
    assert check is not None and check.output == {"priority": "low"}


async def test_anthropic_forces_the_output_tool_and_its_call_is_the_answer(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(
        anthropic.message_start(),
        *anthropic.tool_block(0, "toolu_1", "final_result", '{"priority"', ': "high"}'),
        *anthropic.message_end("tool_use"),
    )))
    req = structured(anthropic.request(server.url).profile)

    response = await AnthropicProvider(req.profile, "sk-ant").complete(req)

    body = json.loads(server.last.body)
    assert body["tool_choice"] == {"type": "tool", "name": "final_result"}
    assert [t["name"] for t in body["tools"]] == ["final_result"] and body["tools"][0]["input_schema"] == TRIAGE.json_schema
    assert response.tool_calls == [ToolCall(id="toolu_1", name="final_result", arguments={"priority": "high"})]
    kept, check = await checked_answer(TRIAGE, response)
    assert check is not None and check.output == {"priority": "high"} and kept.tool_calls == []


async def test_anthropic_beside_other_tools_asks_for_any_tool_and_with_thinking_forces_none(server: LoopbackServer) -> None:
    beside = structured(anthropic.request(server.url).profile, [FS_READ])
    thinking = structured(anthropic.request(server.url, max_output_tokens=4096, thinking_budget_tokens=2048).profile, [FS_READ])

    def body_of(req: ModelRequest) -> dict:
        return AnthropicProvider(req.profile, "k").request_body(req, chat.ToolNames(t.name for t in req.tools))

    assert body_of(beside)["tool_choice"] == {"type": "any"}
    body = body_of(thinking)
    assert "tool_choice" not in body and [t["name"] for t in body["tools"]] == ["fs__read", "final_result"]


async def test_a_reply_with_other_tool_calls_only_is_no_final_answer() -> None:
    from agentrt.schemas import ModelResponse

    reply = ModelResponse(tool_calls=[ToolCall(id="c1", name="fs.read", arguments={"path": "a"})])

    kept, check = await checked_answer(TRIAGE, reply)

    assert check is None and kept == reply
