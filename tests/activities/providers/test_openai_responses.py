"""Wire tests for OpenAIResponsesProvider against a loopback server serving Responses-API streams.

Real recorded streams (``recordings/openai-responses/``, ``recordings/azure/responses-*``) are
replayed byte for byte; shapes no recording has (incomplete, failed, error events, hostile
bodies) are written by hand after https://platform.openai.com/docs/api-reference/responses-streaming.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentrt.activities.providers import (
    OpenAIResponsesProvider,
    ToolNames,
    application_error_from,
    provider_for,
)
from agentrt.schemas import (
    ConfigurationError,
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

RECORDINGS = Path(__file__).parent / "recordings"

WEATHER = ToolSpec(
    name="weather",
    description="Get weather information for a location",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)
FS_READ = ToolSpec(
    name="fs.read",
    description="Read a file in the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def profile(base_url: str, model: str = "gpt-5", **kw: Any) -> ModelProfile:
    return ModelProfile(name="t", provider="openai-responses", model=model, base_url=f"{base_url}/v1", **kw)


def request(base_url: str, *, model: str = "gpt-5", tools: list[ToolSpec] | None = None, messages=None, **kw):
    return ModelRequest(
        profile=profile(base_url, model, **kw),
        system="You are terse.",
        messages=messages or [Message(role="user", text="What's the weather in Florence, Italy?")],
        tools=tools or [],
    )


def recorded(path: str) -> bytes:
    return (RECORDINGS / path).read_bytes()


def recorded_events(path: str) -> list[dict[str, Any]]:
    """The JSON data of each event of a recording, to read expected values from."""
    return [
        json.loads(line[len("data:") :]) for line in recorded(path).decode().splitlines() if line.startswith("data:")
    ]


def replay(path: str, *, piece: int | None = None) -> Reply:
    """A recording as it was sent: in one write, or cut every ``piece`` bytes (mid-line, mid-character)."""
    body = recorded(path)
    content_type = json.loads((RECORDINGS / path).with_suffix(".json").read_text())["content_type"]
    chunks = [body] if piece is None else [body[i : i + piece] for i in range(0, len(body), piece)]
    return Reply(headers={"Content-Type": content_type}, chunks=chunks)


def collector() -> tuple[list[str], Any]:
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    return deltas, on_delta


# Hand-made events, shaped as the streaming reference gives them.


def created() -> dict[str, Any]:
    return {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress"}}


def message_added(index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_item.added",
        "output_index": index,
        "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []},
    }


def text_delta(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": index,
        "content_index": 0,
        "delta": text,
    }


def call_added(index: int = 0, *, call_id: str = "call_1", name: str = "weather") -> dict[str, Any]:
    return {
        "type": "response.output_item.added",
        "output_index": index,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        },
    }


def arguments_delta(delta: Any, index: int = 0) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": index, "delta": delta}


def reasoning_added(index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_item.added",
        "output_index": index,
        "item": {"id": "rs_1", "type": "reasoning", "summary": []},
    }


def completed(usage: Any = None, status: str = "completed") -> dict[str, Any]:
    usage = usage if usage is not None else {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
    return {"type": "response.completed", "response": {"id": "resp_1", "status": status, "usage": usage}}


def stream(*events: dict[str, Any]) -> Reply:
    return Reply(chunks=sse_typed(*events))


# --- recordings --------------------------------------------------------------------------


async def test_recorded_text_stream_streams_the_answer_through_on_delta(server: LoopbackServer) -> None:
    server.reply(replay("openai-responses/text.sse"))
    deltas, on_delta = collector()
    req = request(server.url, model="gpt-4o")

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req, on_delta)

    assert deltas == ["The", " capital", " of", " France", " is", " Paris", "."]
    assert response.text == "The capital of France is Paris."
    assert response.tool_calls == []
    assert response.reasoning == []
    assert response.stop_reason == "completed"
    assert response.usage == Usage(input_tokens=278, output_tokens=9)


async def test_recorded_function_call_cut_into_small_pieces_is_joined(server: LoopbackServer) -> None:
    server.reply(replay("openai-responses/function-call.sse", piece=13))
    req = request(server.url, model="gpt-4o", tools=[ToolSpec(name="get_capital", description="")])

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert response.tool_calls == [
        ToolCall(id="call_kL0PCQV7M2WMoVX8V8OtYSAL", name="get_capital", arguments={"country": "France"})
    ]
    assert response.text == ""
    assert response.stop_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=255, output_tokens=16)


@pytest.mark.parametrize(
    "path",
    [
        "openai-responses/gpt-5-reasoning-summary-function-call.sse",
        "azure/responses-gpt-5-mini-reasoning-summary-tool-call.sse",
    ],
)
async def test_recorded_reasoning_item_keeps_its_id_summary_and_encrypted_content(
    server: LoopbackServer, path: str
) -> None:
    server.reply(replay(path, piece=97))
    deltas, on_delta = collector()
    req = request(server.url, tools=[WEATHER], reasoning_effort="high")
    (item,) = [
        e["item"]
        for e in recorded_events(path)
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    ]
    (usage,) = [e["response"]["usage"] for e in recorded_events(path) if e["type"] == "response.completed"]

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req, on_delta)

    assert response.reasoning == [
        ReasoningBlock(
            type="reasoning_item",
            provider="openai-responses",
            id=item["id"],
            text=item["summary"][0]["text"],
            data=item["encrypted_content"],
        )
    ]
    assert response.reasoning[0].text.startswith("**Getting weather")
    assert deltas == []
    assert response.text == ""
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("weather", {"location": "Florence, Italy"})]
    assert response.tool_calls[0].id.startswith("call_")
    assert response.stop_reason == "tool_calls"
    assert response.usage == Usage(
        input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"], reasoning_tokens=64
    )


async def test_recorded_parallel_calls_come_back_in_output_order_and_an_empty_reasoning_item_is_dropped(
    server: LoopbackServer,
) -> None:
    server.reply(replay("openai-responses/gpt-5-parallel-function-calls.sse"))
    req = request(server.url, tools=[ToolSpec(name="add", description=""), ToolSpec(name="multiply", description="")])

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert response.tool_calls == [
        ToolCall(id="call_inViAUr9eV0GDtyOywkCxp59", name="add", arguments={"a": 2, "b": 3}),
        ToolCall(id="call_Op66UUnzuOoKmgGeFJQJFTUY", name="multiply", arguments={"a": 2, "b": 3}),
    ]
    assert response.reasoning == []
    assert response.usage == Usage(input_tokens=109, output_tokens=223, reasoning_tokens=128)


async def test_recorded_web_search_answer_reads_cached_tokens_and_skips_the_built_in_tool_item(
    server: LoopbackServer,
) -> None:
    server.reply(replay("openai-responses/gpt-5-web-search-cached-tokens.sse", piece=5))
    deltas, on_delta = collector()
    req = request(server.url)

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req, on_delta)

    assert response.usage == Usage(input_tokens=9463, output_tokens=582, cache_read_tokens=8320, reasoning_tokens=512)
    assert response.text.startswith("San Francisco weather today (Tuesday, September 16, 2025)")
    assert "71°F" in response.text
    assert "".join(deltas) == response.text
    assert response.tool_calls == []
    assert response.stop_reason == "completed"
    assert [block.id for block in response.reasoning] == [
        "rs_00a60507bf41223d0068c9d2fc927081a088e0b920cdfe3866",
        "rs_00a60507bf41223d0068c9d300b23481a0b77a03d911213220",
    ]
    assert all(block.data and block.data.startswith("gAAAAA") and block.text == "" for block in response.reasoning)


# --- request body -------------------------------------------------------------------------


async def test_second_round_sends_the_reasoning_item_back_before_its_function_call(server: LoopbackServer) -> None:
    server.reply(
        replay("openai-responses/gpt-5-reasoning-summary-function-call.sse"), replay("openai-responses/text.sse")
    )
    req = request(server.url, tools=[WEATHER], reasoning_effort="high")
    provider = OpenAIResponsesProvider(req.profile, "sk-test")
    first = await provider.complete(req)
    (call,) = first.tool_calls
    (block,) = first.reasoning
    history = [
        *req.messages,
        Message(role="assistant", tool_calls=first.tool_calls, reasoning=first.reasoning),
        Message(role="tool", tool_call_id=call.id, name="weather", text="Sunny, 24 °C"),
    ]

    await provider.complete(req.model_copy(update={"messages": history}))

    second = server.last.json
    assert second["store"] is False
    assert second["include"] == ["reasoning.encrypted_content"]
    assert second["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "What's the weather in Florence, Italy?"}]},
        {
            "type": "reasoning",
            "id": block.id,
            "summary": [{"type": "summary_text", "text": block.text}],
            "encrypted_content": block.data,
        },
        {
            "type": "function_call",
            "call_id": call.id,
            "name": "weather",
            "arguments": '{"location": "Florence, Italy"}',
        },
        {"type": "function_call_output", "call_id": call.id, "output": "Sunny, 24 °C"},
    ]


async def test_request_body_is_stateless_with_instructions_wire_tool_names_and_auth(server: LoopbackServer) -> None:
    server.reply(replay("openai-responses/text.sse"))
    history = [
        Message(role="system", text="Answer in French."),
        Message(role="user", text="Read the readme"),
        Message(
            role="assistant",
            text="Reading it.",
            tool_calls=[ToolCall(id="call_1", name="fs.read", arguments={"path": "README.md"})],
        ),
        Message(role="tool", tool_call_id="call_1", name="fs.read", text="# agentrt"),
    ]
    req = request(server.url, tools=[FS_READ], messages=history, max_output_tokens=256, reasoning_effort="low")

    await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    sent = server.last
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.json == {
        "model": "gpt-5",
        "instructions": "You are terse.\n\nAnswer in French.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Read the readme"}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Reading it."}]},
            {"type": "function_call", "call_id": "call_1", "name": "fs__read", "arguments": '{"path": "README.md"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "# agentrt"},
        ],
        "stream": True,
        "store": False,
        "max_output_tokens": 256,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "low", "summary": "auto"},
        "tools": [
            {
                "type": "function",
                "name": "fs__read",
                "description": "Read a file in the workspace.",
                "parameters": FS_READ.parameters,
                "strict": False,
            }
        ],
    }


def test_a_reasoning_model_gets_no_temperature_and_asks_for_encrypted_reasoning() -> None:
    prof = ModelProfile(name="t", provider="openai-responses", model="o4-mini", temperature=0.2)
    provider = OpenAIResponsesProvider(prof, "sk")

    body = provider.request_body(ModelRequest(profile=prof, messages=[Message(role="user", text="x")]), ToolNames([]))

    assert provider.url == "https://api.openai.com/v1/responses"
    assert "temperature" not in body
    assert "reasoning" not in body
    assert body["include"] == ["reasoning.encrypted_content"]


def test_a_model_that_does_not_reason_gets_its_temperature_and_no_include() -> None:
    # The API answers 400 "Encrypted content is not supported with this model" to gpt-4o.
    prof = ModelProfile(name="t", provider="openai-responses", model="gpt-4o", temperature=0.2)

    body = OpenAIResponsesProvider(prof, "sk").request_body(
        ModelRequest(profile=prof, messages=[Message(role="user", text="x")]), ToolNames([])
    )

    assert body["temperature"] == 0.2
    assert "include" not in body
    assert "instructions" not in body


@pytest.mark.parametrize(
    ("model", "reasons"),
    [
        ("o1", True),
        ("o3-mini", True),
        ("o4-mini-2025-04-16", True),
        ("gpt-5", True),
        ("gpt-5.1-codex", True),
        ("openai/gpt-5-mini", True),
        ("codex-mini-latest", True),
        ("gpt-5-chat-latest", False),
        ("gpt-4.1", False),
        ("gpt-4o", False),
    ],
)
def test_temperature_and_include_follow_the_model_family(model: str, reasons: bool) -> None:
    prof = ModelProfile(name="t", provider="openai-responses", model=model, temperature=0.5)

    body = OpenAIResponsesProvider(prof, "sk").request_body(
        ModelRequest(profile=prof, messages=[Message(role="user", text="x")]), ToolNames([])
    )

    assert ("temperature" in body, "include" in body) == (not reasons, reasons)


def test_only_openai_responses_reasoning_items_with_encrypted_content_are_sent_back() -> None:
    prof = ModelProfile(name="t", provider="openai-responses", model="gpt-5")
    reasoning = [
        ReasoningBlock(type="thinking", provider="anthropic", text="hmm", signature="sig"),
        ReasoningBlock(type="reasoning", provider="openai", text="chat reasoning"),
        ReasoningBlock(type="reasoning_item", provider="openai-responses", id="rs_old", text="summary only"),
        ReasoningBlock(type="reasoning_item", provider="openai-responses", id="rs_2", data="gAAAA-2"),
    ]
    messages = [Message(role="user", text="hi"), Message(role="assistant", text="Hello.", reasoning=reasoning)]

    body = OpenAIResponsesProvider(prof, "sk").request_body(
        ModelRequest(profile=prof, messages=messages), ToolNames([])
    )

    assert body["input"][1:] == [
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA-2"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
    ]


async def test_local_server_without_key_sends_no_authorization(server: LoopbackServer) -> None:
    server.reply(replay("openai-responses/text.sse"))
    req = request(server.url)

    await OpenAIResponsesProvider(req.profile, None).complete(req)

    assert "authorization" not in server.last.headers


# --- hand-made streams: shapes no recording has --------------------------------------------


async def test_incomplete_response_keeps_its_text_and_says_why_it_stopped(server: LoopbackServer) -> None:
    # No recording ends in response.incomplete; shape from the streaming reference.
    incomplete = {
        "type": "response.incomplete",
        "response": {
            "id": "resp_1",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 20, "output_tokens": 16, "output_tokens_details": {"reasoning_tokens": 12}},
        },
    }
    server.reply(stream(created(), message_added(), text_delta("The answer is"), incomplete))
    req = request(server.url)

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert response.text == "The answer is"
    assert response.stop_reason == "max_output_tokens"
    assert response.usage == Usage(input_tokens=20, output_tokens=16, reasoning_tokens=12)


async def test_a_refusal_is_the_answer(server: LoopbackServer) -> None:
    refusal = {
        "type": "response.refusal.delta",
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "I can't help with that.",
    }
    server.reply(stream(message_added(), refusal, completed()))
    deltas, on_delta = collector()
    req = request(server.url)

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req, on_delta)

    assert response.text == deltas[0] == "I can't help with that."


async def test_unknown_event_types_and_events_without_a_type_are_ignored(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=[
                *sse_typed(
                    {"type": "response.something_new", "item": "not even an object", "output_index": "x"},
                    message_added(),
                    text_delta("ok"),
                ),
                *sse_data({"unexpected": True}, "[DONE]"),
                b": keep-alive comment\n\n",
                *sse_typed(completed()),
            ]
        )
    )
    req = request(server.url)

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert response.text == "ok"


async def test_arguments_from_output_item_done_win_over_the_deltas(server: LoopbackServer) -> None:
    done = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"location": "Rome"}',
        },
    }
    server.reply(stream(call_added(), arguments_delta('{"loc'), done, completed()))
    req = request(server.url, tools=[WEATHER])

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert response.tool_calls == [ToolCall(id="call_1", name="weather", arguments={"location": "Rome"})]


async def test_function_call_arguments_that_do_not_parse_become_arguments_error(server: LoopbackServer) -> None:
    server.reply(stream(call_added(), arguments_delta('{"location": "Ro'), completed()))
    req = request(server.url, tools=[WEATHER])

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    (call,) = response.tool_calls
    assert call.arguments is None
    assert call.arguments_raw == '{"location": "Ro'
    assert call.arguments_error is not None and "not valid JSON" in call.arguments_error


# --- errors --------------------------------------------------------------------------------


async def test_429_with_retry_after_is_retryable_after_that_delay(server: LoopbackServer) -> None:
    body = {
        "error": {"message": "Rate limit reached", "type": "requests", "param": None, "code": "rate_limit_exceeded"}
    }
    server.reply(json_reply(429, body, {"Retry-After": "7"}))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == 429
    assert caught.value.retry_after == 7.0
    assert application_error_from(caught.value).next_retry_delay == timedelta(seconds=7)


async def test_400_keeps_body_and_url_and_is_not_retryable(server: LoopbackServer) -> None:
    body = {
        "error": {
            "message": "No tool output found for function call call_1.",
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
    server.reply(json_reply(400, body))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == 400
    assert caught.value.url == f"{server.url}/v1/responses"
    assert json.loads(caught.value.body) == body
    assert application_error_from(caught.value).non_retryable is True


@pytest.mark.parametrize(
    ("event", "status"),
    [
        (
            {
                "type": "error",
                "code": "rate_limit_exceeded",
                "message": "Slow down",
                "param": None,
                "sequence_number": 3,
            },
            429,
        ),
        ({"type": "error", "code": "server_error", "message": "Internal error", "param": None}, 500),
        ({"type": "error", "code": "invalid_prompt", "message": "Flagged", "param": None}, 400),
        ({"type": "error", "code": None, "message": "?", "param": None}, 500),
        ({"type": "error", "code": 429, "message": ["wrong", "types"]}, 500),
        ({"type": "error", "error": {"type": "invalid_request_error", "code": None, "message": "bad"}}, 400),
        ({"type": "error", "code": "image_too_large", "message": "too big"}, 400),
        (
            {
                "type": "response.failed",
                "response": {"id": "resp_1", "status": "failed", "error": {"code": "server_error", "message": "boom"}},
            },
            500,
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "error": {"code": "rate_limit_exceeded", "message": "x"},
                },
            },
            429,
        ),
        (
            {
                "type": "response.failed",
                "response": {"id": "resp_1", "status": "failed", "error": {"code": "invalid_prompt", "message": "x"}},
            },
            400,
        ),
        ({"type": "response.failed", "response": "not an object"}, 500),
    ],
)
async def test_error_events_inside_a_200_stream_are_http_errors_with_the_status_of_their_code(
    server: LoopbackServer, event: dict[str, Any], status: int
) -> None:
    # Hand-made: no recording has an error event. Shapes from the streaming reference.
    server.reply(stream(created(), message_added(), text_delta("Hel"), event))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == status
    assert json.loads(caught.value.body) == event


async def test_a_failed_response_keeps_the_usage_it_reported(server: LoopbackServer) -> None:
    failed = {
        "type": "response.failed",
        "response": {
            "status": "failed",
            "error": {"code": "server_error", "message": "boom"},
            "usage": {"input_tokens": 40, "output_tokens": 2},
        },
    }
    server.reply(stream(failed))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.partial_usage == Usage(input_tokens=40, output_tokens=2)


async def test_a_huge_error_event_keeps_only_a_bounded_body(server: LoopbackServer) -> None:
    server.reply(stream({"type": "error", "code": "server_error", "message": "x" * 1_000_000}))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert len(caught.value.body) <= 4096


async def test_recorded_stream_cut_before_response_completed_is_a_transport_error(server: LoopbackServer) -> None:
    body = recorded("openai-responses/text.sse")
    server.reply(Reply(chunks=[body[: body.index(b"event: response.completed")]]))
    deltas, on_delta = collector()
    req = request(server.url)

    with pytest.raises(ProviderTransportError, match="stream ended before response.completed"):
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req, on_delta)

    assert "".join(deltas) == "The capital of France is Paris."


async def test_recorded_stream_cut_mid_event_is_a_transport_error(server: LoopbackServer) -> None:
    body = recorded("openai-responses/function-call.sse")
    cut = body.index(b"event: response.completed") + 200
    server.reply(Reply(chunks=[body[:cut]]))
    req = request(server.url)

    with pytest.raises(ProviderTransportError):
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)


async def test_body_cut_short_of_its_content_length_is_a_transport_error(server: LoopbackServer) -> None:
    chunks = sse_typed(message_added(), text_delta("Hello"))
    server.reply(Reply(chunks=chunks, content_length=sum(map(len, chunks)) + 500))
    req = request(server.url)

    with pytest.raises(ProviderTransportError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.__cause__ is not None


async def test_connection_refused_is_a_transport_error(closed_port_url: str) -> None:
    req = request(closed_port_url)

    with pytest.raises(ProviderTransportError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.url == f"{closed_port_url}/v1/responses"


async def test_provider_that_never_answers_times_out_as_a_transport_error(server: LoopbackServer) -> None:
    server.reply(Reply(hang=True))
    req = request(server.url, timeout_seconds=0.2)

    with pytest.raises(ProviderTransportError, match="timed out|no complete answer"):
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)


async def test_200_that_is_not_an_event_stream_is_a_transport_error(server: LoopbackServer) -> None:
    server.reply(json_reply(200, {"id": "resp_1", "object": "response", "output": []}))
    req = request(server.url)

    with pytest.raises(ProviderTransportError, match="not an event stream"):
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)


# --- hostile and malformed bodies ----------------------------------------------------------

MALFORMED: dict[str, list[dict[str, Any] | str]] = {
    "type is a number": [{"type": 5, "delta": "x"}],
    "text delta is a number": [message_added(), {**text_delta("x"), "delta": 42}],
    "text delta is a list": [message_added(), {**text_delta("x"), "delta": ["a"]}],
    "text delta is null": [message_added(), {**text_delta("x"), "delta": None}],
    "item is a string": [{"type": "response.output_item.added", "output_index": 0, "item": "function_call"}],
    "item is a list": [{"type": "response.output_item.added", "output_index": 0, "item": []}],
    "item type is a number": [{"type": "response.output_item.added", "output_index": 0, "item": {"type": 1}}],
    "output_index is a string": [{**call_added(), "output_index": "x"}],
    "output_index is negative": [{**call_added(), "output_index": -1}],
    "output_index is a float": [{**call_added(), "output_index": 1e30}],
    "output_index is huge": [{**call_added(), "output_index": 10**30}],
    "output_index is true": [{**call_added(), "output_index": True}],
    "call_id is a number": [call_added(call_id=7)],  # type: ignore[arg-type]
    "name is null": [call_added(name=None)],  # type: ignore[arg-type]
    "call_id is empty": [call_added(call_id="")],
    "arguments are a number": [call_added(), arguments_delta(12)],
    "final arguments are an object": [
        call_added(),
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": {"a": 1}},
    ],
    "done item arguments missing": [
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"type": "function_call", "call_id": "c", "name": "n"},
        }
    ],
    "arguments for an item never announced": [arguments_delta('{"a"', index=3)],
    "arguments for a reasoning item": [reasoning_added(), {**arguments_delta("{}"), "item_id": "rs_1"}],
    "summary delta for a function call": [
        call_added(),
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "summary_index": 0,
            "delta": "x",
        },
    ],
    "summary_index is a string": [
        reasoning_added(),
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": "x",
            "delta": "x",
        },
    ],
    "summary text is a number": [
        reasoning_added(),
        {
            "type": "response.reasoning_summary_text.done",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "text": 3,
        },
    ],
    "reasoning summary is a string": [
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "summary": "s"},
        }
    ],
    "reasoning summary part is a string": [
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "summary": ["s"]},
        }
    ],
    "encrypted content is a number": [
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "encrypted_content": 1},
        }
    ],
    "reasoning item without id": [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}}
    ],
    "response is a string": [{"type": "response.completed", "response": "done"}],
    "usage is a list": [completed(usage=[1, 2])],
    "input_tokens is a string": [completed(usage={"input_tokens": "12", "output_tokens": 1})],
    "input_tokens is infinite": ['{"type": "response.completed", "response": {"usage": {"input_tokens": 1e400}}}'],
    "input_tokens is huge": [completed(usage={"input_tokens": 10**30, "output_tokens": 1})],
    "output_tokens is negative": [completed(usage={"input_tokens": 1, "output_tokens": -5})],
    "input_tokens_details is a list": [completed(usage={"input_tokens": 1, "input_tokens_details": []})],
    "cached_tokens is true": [completed(usage={"input_tokens": 1, "input_tokens_details": {"cached_tokens": True}})],
    "incomplete_details is a string": [
        {"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": "max_output_tokens"}}
    ],
    "incomplete reason is a number": [
        {"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": 1}}}
    ],
    "data is not JSON": ["{not json"],
    "data is a JSON list": ['["response.completed"]'],
    "data nests too deep to parse": ["[" * 100_000 + "]" * 100_000],
    "data has a number too long to read": [
        '{"type": "response.completed", "response": {"usage": {"input_tokens": ' + "9" * 5000 + "}}}"
    ],
}


@pytest.mark.parametrize("events", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_known_event_with_a_malformed_body_is_a_protocol_error(
    server: LoopbackServer, events: list[dict[str, Any] | str]
) -> None:
    server.reply(Reply(chunks=[*sse_data(created(), *events), *sse_typed(completed())]))
    req = request(server.url, tools=[WEATHER])

    with pytest.raises(ProviderProtocolError) as caught:
        await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert caught.value.provider == "openai-responses"
    assert caught.value.model == "gpt-5"
    assert caught.value.url == f"{server.url}/v1/responses"
    assert len(caught.value.line) <= ProviderProtocolError.LINE_CHARS + 1
    assert application_error_from(caught.value).non_retryable is True


# --- provider_for --------------------------------------------------------------------------


def test_provider_for_builds_the_responses_adapter_with_the_named_key() -> None:
    prof = ModelProfile(name="r", provider="openai-responses", model="gpt-5", api_key_env="OPENAI_API_KEY")

    provider = provider_for(prof, env={"OPENAI_API_KEY": "sk-live"})

    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.api_key == "sk-live"
    assert provider.url == "https://api.openai.com/v1/responses"


def test_provider_for_refuses_the_responses_api_without_a_key_variable() -> None:
    prof = ModelProfile(name="r", provider="openai-responses", model="gpt-5")

    with pytest.raises(ConfigurationError, match="sets no api_key_env"):
        provider_for(prof, env={})


def test_provider_for_allows_a_keyless_responses_server_on_a_base_url() -> None:
    prof = ModelProfile(name="r", provider="openai-responses", model="gpt-oss", base_url="http://127.0.0.1:8000/v1")

    provider = provider_for(prof, env={})

    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.api_key is None


async def test_a_lone_surrogate_escape_in_streamed_text_becomes_a_replacement_character(server: LoopbackServer) -> None:
    # Hand-made: "\ud800" is valid JSON syntax but no text; kept, the reply could be neither
    # stored nor returned from the activity (UTF-8 refuses it).
    server.reply(stream(message_added(), text_delta("a\ud800"), text_delta("b"), completed(status="completed\udc00")))
    deltas, on_delta = collector()
    req = request(server.url)

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req, on_delta)

    assert response.text == "a\ufffdb" and deltas == ["a\ufffd", "b"]
    assert response.stop_reason == "completed\ufffd"
    response.model_dump_json()


def item_event(kind: str, index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": f"response.output_item.{kind}", "output_index": index, "item": item}


def function_call(id: str, call_id: str, arguments: str = "") -> dict[str, Any]:
    return {"id": id, "type": "function_call", "call_id": call_id, "name": "weather", "arguments": arguments}


async def test_items_a_server_numbers_alike_stay_separate_items(server: LoopbackServer) -> None:
    # Hand-made: a compatible server that numbers every output item 0, as Ollama and LiteLLM
    # do for parallel calls in Chat Completions. The second call took the first one's place
    # (and its argument deltas); a message item at the same index dropped a call.
    server.reply(
        stream(
            item_event("added", 0, function_call("fc_1", "call_1")),
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"location": "Rome"}'},
            item_event("added", 0, function_call("fc_2", "call_2")),
            {"type": "response.function_call_arguments.delta", "item_id": "fc_2", "output_index": 0, "delta": '{"location": "Oslo"}'},
            item_event("done", 0, function_call("fc_2", "call_2", '{"location": "Oslo"}')),
            item_event("added", 0, {"id": "msg_1", "type": "message", "role": "assistant", "content": []}),
            text_delta("Checking both."),
            completed(),
        )
    )
    req = request(server.url, tools=[WEATHER])

    response = await OpenAIResponsesProvider(req.profile, "sk-test").complete(req)

    assert response.tool_calls == [
        ToolCall(id="call_1", name="weather", arguments={"location": "Rome"}),
        ToolCall(id="call_2", name="weather", arguments={"location": "Oslo"}),
    ]
    assert response.text == "Checking both."
