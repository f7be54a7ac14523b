"""Wire tests for AnthropicProvider against a loopback server serving Messages streams.

Event shapes follow https://docs.anthropic.com/en/api/messages-streaming and error bodies
https://docs.anthropic.com/en/api/errors.
"""

from __future__ import annotations

import json

import pytest

from agentrt.activities.providers import AnthropicProvider, application_error_from
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ProviderHTTPError,
    ProviderTransportError,
    ToolCall,
    ToolSpec,
)
from tests.activities.providers._loopback import LoopbackServer, Reply, json_reply, sse_typed

MODEL = "claude-sonnet-4-20250514"
FS_READ = ToolSpec(
    name="fs.read",
    description="Read a file in the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def request(base_url: str, *, tools: list[ToolSpec] | None = None, messages: list[Message] | None = None, **kw):
    return ModelRequest(
        profile=ModelProfile(name="t", provider="anthropic", model=MODEL, base_url=base_url, **kw),
        system="You are terse.",
        messages=messages or [Message(role="user", text="Hello")],
        tools=tools or [],
    )


def message_start(input_tokens: int = 25, **usage: int) -> dict:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": MODEL,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
        },
    }


def text_block(index: int, *pieces: str) -> list[dict]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
            for p in pieces
        ),
        {"type": "content_block_stop", "index": index},
    ]


def tool_block(index: int, id: str, name: str, *partial_json: str) -> list[dict]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}},
        },
        *(
            {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}
            for p in partial_json
        ),
        {"type": "content_block_stop", "index": index},
    ]


def message_end(stop_reason: str = "end_turn", output_tokens: int = 15) -> list[dict]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


async def test_streamed_text_arrives_in_order_through_on_delta(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(), {"type": "ping"}, *text_block(0, "Hello", "!", " How can I help?"), *message_end()
            )
        )
    )
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    req = request(server.url)
    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req, on_delta)

    assert deltas == ["Hello", "!", " How can I help?"]
    assert response.text == "Hello! How can I help?"
    assert response.stop_reason == "end_turn"


async def test_usage_combines_message_start_input_and_message_delta_output(server: LoopbackServer) -> None:
    server.reply(
        Reply(chunks=sse_typed(message_start(input_tokens=472), *text_block(0, "Hi"), *message_end(output_tokens=89)))
    )
    req = request(server.url)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert (response.usage.input_tokens, response.usage.output_tokens) == (472, 89)


async def test_cached_prompt_tokens_count_as_input(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(input_tokens=10, cache_read_input_tokens=1000, cache_creation_input_tokens=5),
                *text_block(0, "Hi"),
                *message_end(),
            )
        )
    )
    req = request(server.url)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert response.usage.input_tokens == 1015


async def test_tool_use_input_json_split_across_deltas_is_joined(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                *text_block(0, "Let me read it."),
                *tool_block(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "fs__read", "", '{"pa', 'th": "READ', 'ME.md"}'),
                *message_end("tool_use", 40),
            )
        )
    )
    req = request(server.url, tools=[FS_READ])

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert response.text == "Let me read it."
    assert response.tool_calls == [
        ToolCall(id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="fs.read", arguments={"path": "README.md"})
    ]
    assert response.stop_reason == "tool_use"


async def test_tool_use_without_input_deltas_has_empty_arguments(server: LoopbackServer) -> None:
    server.reply(
        Reply(chunks=sse_typed(message_start(), *tool_block(0, "toolu_1", "fs__read"), *message_end("tool_use")))
    )
    req = request(server.url, tools=[FS_READ])

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert response.tool_calls[0].arguments == {}


async def test_malformed_tool_input_becomes_arguments_error(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(), *tool_block(0, "toolu_1", "fs__read", '{"path": '), *message_end("tool_use")
            )
        )
    )
    req = request(server.url, tools=[FS_READ])

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    (call,) = response.tool_calls
    assert (call.arguments, call.arguments_raw) == (None, '{"path": ')
    assert call.arguments_error is not None


async def test_request_body_has_top_level_system_tools_and_grouped_tool_results(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    history = [
        Message(role="user", text="Read two files"),
        Message(
            role="assistant",
            text="Reading both.",
            tool_calls=[
                ToolCall(id="toolu_a", name="fs.read", arguments={"path": "a.txt"}),
                ToolCall(id="toolu_b", name="fs.read", arguments={"path": "b.txt"}),
            ],
        ),
        Message(role="tool", tool_call_id="toolu_a", name="fs.read", text="A"),
        Message(role="tool", tool_call_id="toolu_b", name="fs.read", text="no such file", is_error=True),
    ]
    req = request(server.url, tools=[FS_READ], messages=history, max_output_tokens=1024)

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    sent = server.last
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json
    assert (body["model"], body["max_tokens"], body["stream"], body["system"]) == (MODEL, 1024, True, "You are terse.")
    assert body["tools"] == [
        {"name": "fs__read", "description": "Read a file in the workspace.", "input_schema": FS_READ.parameters}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read two files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_a", "name": "fs__read", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_b", "name": "fs__read", "input": {"path": "b.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A", "is_error": False},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file", "is_error": True},
            ],
        },
    ]


async def test_529_overloaded_status_is_retryable(server: LoopbackServer) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.reply(json_reply(529, body))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert caught.value.status == 529
    assert application_error_from(caught.value).non_retryable is False


async def test_overloaded_error_event_inside_a_200_stream_is_a_retryable_529(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                *text_block(0, "Hel")[:2],
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
        )
    )
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert caught.value.status == 529
    assert json.loads(caught.value.body)["error"]["type"] == "overloaded_error"
    assert application_error_from(caught.value).non_retryable is False


async def test_400_keeps_body_and_is_not_retryable(server: LoopbackServer) -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "messages.1.content.0: unexpected `tool_use_id`"},
    }
    server.reply(json_reply(400, body, {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"}))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert (caught.value.status, caught.value.url) == (400, f"{server.url}/v1/messages")
    assert json.loads(caught.value.body) == body
    assert application_error_from(caught.value).non_retryable is True


async def test_stream_without_message_stop_is_a_transport_error(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "Hello"))))
    req = request(server.url)

    with pytest.raises(ProviderTransportError, match="message_stop"):
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)


async def test_connection_refused_is_a_transport_error(closed_port_url: str) -> None:
    req = request(closed_port_url)

    with pytest.raises(ProviderTransportError):
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)
