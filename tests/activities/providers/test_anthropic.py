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
    ProviderProtocolError,
    ProviderTransportError,
    ReasoningBlock,
    ToolCall,
    ToolSpec,
    Usage,
)
from tests.activities.providers._loopback import LoopbackServer, Reply, json_reply, sse_data, sse_typed

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
        *({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}} for p in pieces),
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


async def test_request_body_has_system_blocks_tools_and_grouped_tool_results(server: LoopbackServer) -> None:
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
    req = request(server.url, tools=[FS_READ], messages=history, max_output_tokens=1024, prompt_cache="off")

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    sent = server.last
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json
    assert (body["model"], body["max_tokens"], body["stream"]) == (MODEL, 1024, True)
    assert body["system"] == [{"type": "text", "text": "You are terse."}]
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


# --- extended thinking -------------------------------------------------------------------
# Hand-made streams in the shapes of https://docs.anthropic.com/en/api/messages-streaming
# ("Streaming request with extended thinking"); recorded ones are in test_anthropic_recordings.py.

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"


def thinking_block(index: int, signature: str, *pieces: str) -> list[dict]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        *(
            {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": p}}
            for p in pieces
        ),
        {"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}},
        {"type": "content_block_stop", "index": index},
    ]


def redacted_block(index: int, data: str) -> list[dict]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "redacted_thinking", "data": data}},
        {"type": "content_block_stop", "index": index},
    ]


async def test_thinking_becomes_reasoning_blocks_in_stream_order_and_never_answer_text(
    server: LoopbackServer,
) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                *thinking_block(0, SIGNATURE, "Let me ", "think."),
                *redacted_block(1, "EmwKAhgBEgy3va3pzix/LafPsn4a"),
                *text_block(2, "It is 4."),
                *message_end(),
            )
        )
    )
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    req = request(server.url, thinking_budget_tokens=1024)
    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req, on_delta)

    assert response.reasoning == [
        ReasoningBlock(type="thinking", provider="anthropic", text="Let me think.", signature=SIGNATURE),
        ReasoningBlock(type="redacted_thinking", provider="anthropic", data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
    ]
    assert (response.text, deltas) == ("It is 4.", ["It is 4."])


async def test_thinking_profile_sends_the_budget_and_no_temperature(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    req = request(server.url, thinking_budget_tokens=2048, max_output_tokens=4096, temperature=0.2)

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    body = server.last.json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 4096
    assert "temperature" not in body


async def test_without_thinking_temperature_is_sent_and_no_thinking_field(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    req = request(server.url, temperature=0.2)

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    body = server.last.json
    assert body["temperature"] == 0.2
    assert "thinking" not in body


def tool_round(reasoning: list[ReasoningBlock]) -> list[Message]:
    return [
        Message(role="user", text="What is in README.md?"),
        Message(
            role="assistant",
            text="Reading it.",
            tool_calls=[ToolCall(id="toolu_a", name="fs.read", arguments={"path": "README.md"})],
            reasoning=reasoning,
        ),
        Message(role="tool", tool_call_id="toolu_a", name="fs.read", text="# agentrt"),
    ]


OWN_REASONING = [
    ReasoningBlock(type="thinking", provider="anthropic", text="Read the file first.", signature=SIGNATURE),
    ReasoningBlock(type="redacted_thinking", provider="anthropic", data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
]


async def test_with_thinking_an_assistant_message_opens_with_its_thinking_blocks_unchanged(
    server: LoopbackServer,
) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    req = request(
        server.url, tools=[FS_READ], messages=tool_round(OWN_REASONING), thinking_budget_tokens=1024, prompt_cache="off"
    )

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert server.last.json["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Read the file first.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_a", "name": "fs__read", "input": {"path": "README.md"}},
    ]


async def test_without_thinking_no_thinking_block_is_sent(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    req = request(server.url, tools=[FS_READ], messages=tool_round(OWN_REASONING), prompt_cache="off")

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert [b["type"] for b in server.last.json["messages"][1]["content"]] == ["text", "tool_use"]


async def test_reasoning_of_other_providers_and_unsigned_thinking_is_never_sent(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    foreign = [
        ReasoningBlock(type="reasoning", provider="openai", text="chain of thought"),
        ReasoningBlock(type="thinking", provider="openai", text="looks like ours", signature="sig"),
        ReasoningBlock(type="reasoning_item", provider="openai-responses", id="rs_1", data="gAAAA"),
        ReasoningBlock(type="thinking", provider="anthropic", text="cut before its signature"),
    ]
    req = request(
        server.url, tools=[FS_READ], messages=tool_round(foreign), thinking_budget_tokens=1024, prompt_cache="off"
    )

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert [b["type"] for b in server.last.json["messages"][1]["content"]] == ["text", "tool_use"]


# --- prompt caching ----------------------------------------------------------------------


def breakpoints(body: dict) -> list[dict]:
    """Every ``cache_control`` in a request body, wherever it is."""
    blocks = [*body.get("system", []), *body.get("tools", [])]
    blocks += [block for message in body["messages"] for block in message["content"]]
    return [block["cache_control"] for block in blocks if "cache_control" in block]


async def test_default_cache_marks_system_last_tool_and_conversation_ends_with_5m_breakpoints(
    server: LoopbackServer,
) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    second = ToolSpec(name="fs.list", description="List files.")
    req = request(server.url, tools=[FS_READ, second], messages=tool_round([]))

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    body = server.last.json
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": ephemeral}]
    assert ["cache_control" in tool for tool in body["tools"]] == [False, True]
    user, assistant, results = body["messages"]
    assert user["content"][-1]["cache_control"] == ephemeral  # where the previous call ended
    assert all("cache_control" not in block for block in assistant["content"])
    assert results["content"][-1]["cache_control"] == ephemeral  # the conversation so far
    assert breakpoints(body) == [ephemeral] * 4


async def test_one_hour_cache_puts_the_ttl_on_every_breakpoint(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    req = request(server.url, tools=[FS_READ], prompt_cache="1h")

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert breakpoints(server.last.json) == [{"type": "ephemeral", "ttl": "1h"}] * 3


async def test_cache_off_sends_no_breakpoint(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    req = request(server.url, tools=[FS_READ], messages=tool_round(OWN_REASONING), prompt_cache="off")

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert b"cache_control" not in server.last.body


async def test_breakpoints_stay_at_four_over_a_long_tool_loop(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    history = tool_round(OWN_REASONING)
    for k in range(5):
        history += [
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=f"toolu_{k}", name="fs.read", arguments={"path": f"{k}.md"})],
                reasoning=OWN_REASONING,
            ),
            Message(role="tool", tool_call_id=f"toolu_{k}", name="fs.read", text=str(k)),
        ]
    req = request(server.url, tools=[FS_READ], messages=history, thinking_budget_tokens=1024)

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    body = server.last.json
    assert len(breakpoints(body)) == 4
    marked = [
        (i, b["tool_use_id"]) for i, m in enumerate(body["messages"]) for b in m["content"] if "cache_control" in b
    ]
    assert marked == [(len(body["messages"]) - 3, "toolu_3"), (len(body["messages"]) - 1, "toolu_4")]


async def test_breakpoints_are_never_put_on_thinking_blocks(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), *text_block(0, "ok"), *message_end())))
    # A last assistant message holding only thinking (a prefill) has no block to mark.
    history = [*tool_round(OWN_REASONING), Message(role="assistant", reasoning=OWN_REASONING)]
    req = request(server.url, tools=[FS_READ], messages=history, thinking_budget_tokens=1024)

    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    body = server.last.json
    assert [b["type"] for b in body["messages"][-1]["content"]] == ["thinking", "redacted_thinking"]
    marked = [b["type"] for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert (marked, len(breakpoints(body))) == (["tool_result"], 3)


# --- usage -------------------------------------------------------------------------------


async def test_cache_reads_and_writes_are_reported_apart_and_message_delta_updates_them(
    server: LoopbackServer,
) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(input_tokens=10, cache_read_input_tokens=1000, cache_creation_input_tokens=5),
                *text_block(0, "Hi"),
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 30, "cache_creation_input_tokens": 7, "input_tokens": None},
                },
                {"type": "message_stop"},
            )
        )
    )
    req = request(server.url)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert response.usage == Usage(input_tokens=1017, output_tokens=30, cache_read_tokens=1000, cache_write_tokens=7)


async def test_thinking_tokens_in_output_tokens_details_are_reasoning_tokens(server: LoopbackServer) -> None:
    # Shape from the recorded cache-write-code-execution stream, where the count is 0.
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                *thinking_block(0, SIGNATURE, "hmm"),
                *text_block(1, "Hi"),
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 80, "output_tokens_details": {"thinking_tokens": 50}},
                },
                {"type": "message_stop"},
            )
        )
    )
    req = request(server.url, thinking_budget_tokens=1024)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (80, 50)


async def test_usage_seen_before_a_protocol_error_is_kept_on_the_error(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(input_tokens=10, cache_read_input_tokens=1000),
                {"type": "content_block_start", "index": "0", "content_block": {"type": "text", "text": ""}},
            )
        )
    )
    req = request(server.url)

    with pytest.raises(ProviderProtocolError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert caught.value.partial_usage == Usage(input_tokens=1010, output_tokens=1, cache_read_tokens=1000)


# --- wire fidelity: what the API does not define ------------------------------------------


def start(index: object = 0, content_block: object = None) -> dict:
    block = {"type": "text", "text": ""} if content_block is None else content_block
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(delta: object, index: object = 0) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


TOOL_START = start(0, {"type": "tool_use", "id": "toolu_1", "name": "fs__read", "input": {}})
THINKING_START = start(0, {"type": "thinking", "thinking": "", "signature": ""})

MALFORMED = {
    "message not an object": [{"type": "message_start", "message": "hello"}],
    "usage a string": [{"type": "message_start", "message": {"usage": "25"}}],
    "usage count a string": [message_start(input_tokens="25")],  # type: ignore[arg-type]
    "usage count a float": [message_start(output_tokens=1.5)],  # type: ignore[arg-type]
    "usage count a bool": [message_start(input_tokens=True)],
    "usage count negative": [message_start(input_tokens=-1)],
    "usage count huge": [message_start(input_tokens=10**30)],
    "usage details a list": [message_start(output_tokens_details=[1])],  # type: ignore[arg-type]
    "message_delta usage a list": [{"type": "message_delta", "delta": {}, "usage": [1]}],
    "message_delta delta a string": [{"type": "message_delta", "delta": "end_turn"}],
    "stop_reason a number": [{"type": "message_delta", "delta": {"stop_reason": 7}}],
    "index a string": [start("x")],
    "index null": [start(None)],
    "index a bool": [start(True)],
    "index negative": [start(-1)],
    "index a float": [start(0.0)],
    "content_block a string": [start(0, "text")],
    "content_block a list": [start(0, [])],
    "content_block type missing": [start(0, {"text": ""})],
    "text a number": [start(0, {"type": "text", "text": 5})],
    "tool_use id a number": [start(0, {"type": "tool_use", "id": 1, "name": "fs__read", "input": {}})],
    "tool_use name null": [start(0, {"type": "tool_use", "id": "toolu_1", "name": None, "input": {}})],
    "tool_use input a string": [start(0, {"type": "tool_use", "id": "toolu_1", "name": "fs__read", "input": "{}"})],
    "redacted data missing": [start(0, {"type": "redacted_thinking"})],
    "thinking signature a number": [start(0, {"type": "thinking", "thinking": "", "signature": 1})],
    "block started twice": [start(0), start(0)],
    "delta for a block never started": [delta({"type": "text_delta", "text": "hi"}, 3)],
    "stop for a block never started": [{"type": "content_block_stop", "index": 3}],
    "delta a list": [start(), delta([{"type": "text_delta", "text": "hi"}])],
    "delta a string": [start(), delta("hi")],
    "delta null": [start(), delta(None)],
    "delta index a string": [start(), delta({"type": "text_delta", "text": "hi"}, "x")],
    "delta type missing": [start(), delta({"text": "hi"})],
    "text_delta text null": [start(), delta({"type": "text_delta", "text": None})],
    "partial_json a number": [TOOL_START, delta({"type": "input_json_delta", "partial_json": 42})],
    "partial_json an object": [TOOL_START, delta({"type": "input_json_delta", "partial_json": {"path": "a"}})],
    "thinking a number": [THINKING_START, delta({"type": "thinking_delta", "thinking": 5})],
    "signature a list": [THINKING_START, delta({"type": "signature_delta", "signature": ["s"]})],
    "citation a string": [start(), delta({"type": "citations_delta", "citation": "doc 1"})],
    "text_delta on a tool_use block": [TOOL_START, delta({"type": "text_delta", "text": "hi"})],
    "thinking_delta on a text block": [start(), delta({"type": "thinking_delta", "thinking": "hmm"})],
    "delta after content_block_stop": [
        start(),
        {"type": "content_block_stop", "index": 0},
        delta({"type": "text_delta", "text": "late"}),
    ],
    "error not an object": [{"type": "error", "error": "overloaded"}],
    "error type a number": [{"type": "error", "error": {"type": 529}}],
    "type a number": [{"type": 5, "index": 0}],
}


@pytest.mark.parametrize("events", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_known_event_with_a_malformed_body_is_a_protocol_error(
    server: LoopbackServer, events: list[dict]
) -> None:
    chunks = [f"event: {e.get('type')}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    server.reply(Reply(chunks=[*chunks, *sse_typed(*message_end())]))
    req = request(server.url, tools=[FS_READ])

    with pytest.raises(ProviderProtocolError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    error = caught.value
    assert (error.provider, error.model, error.url) == ("anthropic", MODEL, f"{server.url}/v1/messages")
    assert error.line == json.dumps(events[-1])
    assert error.retryable is False


NOT_JSON_OBJECTS = {
    "not JSON": "{'type': 'ping'}",
    "cut JSON": '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_de',
    "a JSON array": '[{"type": "ping"}]',
    "a JSON string": '"ping"',
    "JSON null": "null",
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "an integer of 5,000 digits": f'{{"type": "message_start", "message": {{"usage": {{"input_tokens": {"9" * 5000}}}}}}}',
}


@pytest.mark.parametrize("data", NOT_JSON_OBJECTS.values(), ids=NOT_JSON_OBJECTS.keys())
async def test_event_data_that_is_not_a_json_object_is_a_protocol_error(server: LoopbackServer, data: str) -> None:
    server.reply(Reply(chunks=[*sse_typed(message_start()), *sse_data(data), *sse_typed(*message_end())]))
    req = request(server.url)

    with pytest.raises(ProviderProtocolError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert len(caught.value.line) <= ProviderProtocolError.LINE_CHARS + 1


async def test_unknown_events_blocks_and_deltas_are_skipped(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                {"type": "future_event", "payload": [1, 2, 3]},
                start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
                delta({"type": "input_json_delta", "partial_json": '{"query": "x"}'}, 0),
                {"type": "content_block_stop", "index": 0},
                *text_block(1, "Answer"),
                delta({"type": "future_delta", "anything": None}, 1),
                *message_end(),
            )
        )
    )
    req = request(server.url)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert (response.text, response.tool_calls, response.reasoning) == ("Answer", [], [])


async def test_citations_delta_is_read_and_left_out_of_the_answer(server: LoopbackServer) -> None:
    citation = {
        "type": "char_location",
        "cited_text": "The grass is green.",
        "document_index": 0,
        "document_title": "Nature",
        "start_char_index": 0,
        "end_char_index": 19,
    }
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                start(),
                delta({"type": "citations_delta", "citation": citation}),
                delta({"type": "text_delta", "text": "the grass is green"}),
                {"type": "content_block_stop", "index": 0},
                *message_end(),
            )
        )
    )
    req = request(server.url)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert response.text == "the grass is green"


async def test_error_event_of_an_unknown_type_is_a_retryable_500(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_typed(message_start(), {"type": "error", "error": {"type": "brand_new_error"}})))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert (caught.value.status, caught.value.retryable) == (500, True)


async def test_error_event_body_is_bounded(server: LoopbackServer) -> None:
    huge = {"type": "error", "error": {"type": "api_error", "message": "x" * 1_000_000}}
    server.reply(Reply(chunks=sse_typed(message_start(), huge)))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert (caught.value.status, len(caught.value.body)) == (500, 4096)


async def test_a_lone_surrogate_escape_in_streamed_text_becomes_a_replacement_character(server: LoopbackServer) -> None:
    # Hand-made: "\ud800" is valid JSON syntax but no text; kept, the reply could be neither
    # stored nor returned from the activity (UTF-8 refuses it).
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                *text_block(0, "a\ud800", "b"),
                *tool_block(1, "toolu\udc00", "fs__read", '{"path": "x"}'),
                *message_end(stop_reason="end_turn\udfff"),
            )
        )
    )
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    req = request(server.url, tools=[FS_READ])
    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req, on_delta)

    assert response.text == "a\ufffdb" and deltas == ["a\ufffd", "b"]
    assert response.tool_calls[0].id == "toolu\ufffd" and response.stop_reason == "end_turn\ufffd"
    response.model_dump_json()


async def test_tool_use_blocks_a_server_gives_one_id_get_distinct_ids(server: LoopbackServer) -> None:
    # Hand-made: a call's id is its effect's idempotency key within the turn, so two calls
    # sharing one would run as one effect.
    server.reply(
        Reply(
            chunks=sse_typed(
                message_start(),
                *tool_block(0, "toolu_1", "fs__read", '{"path": "a"}'),
                *tool_block(1, "toolu_1", "fs__read", '{"path": "b"}'),
                *tool_block(2, "", "fs__read", '{"path": "c"}'),
                *message_end(stop_reason="tool_use"),
            )
        )
    )
    req = request(server.url, tools=[FS_READ])

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    ids = [c.id for c in response.tool_calls]
    assert ids[0] == "toolu_1" and len(set(ids)) == 3 and all(ids)
