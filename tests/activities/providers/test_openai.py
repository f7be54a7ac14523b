"""Wire tests for OpenAIProvider against a loopback server serving Chat Completions streams.

Chunk shapes follow https://platform.openai.com/docs/api-reference/chat/streaming.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from agentrt.activities.providers import OpenAIProvider, ToolNames, application_error_from
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ProviderHTTPError,
    ProviderTransportError,
    ToolCall,
    ToolSpec,
)
from tests.activities.providers._loopback import LoopbackServer, Reply, json_reply, sse_data


def profile(base_url: str, **kw) -> ModelProfile:
    return ModelProfile(name="t", provider="openai", model="gpt-4o-mini", base_url=f"{base_url}/v1", **kw)


def chunk(delta: dict | None = None, finish_reason: str | None = None, usage: dict | None = None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": choices,
        "usage": usage,
    }


def text_stream(*pieces: str, usage: dict | None = None) -> Reply:
    usage = usage or {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
    return Reply(
        chunks=sse_data(
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"content": p}) for p in pieces),
            chunk({}, finish_reason="stop"),
            chunk(None, usage=usage),
            "[DONE]",
        )
    )


def tool_piece(index: int, *, id: str | None = None, name: str | None = None, arguments: str = "") -> dict:
    piece: dict = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        piece["id"] = id
        piece["type"] = "function"
        piece["function"]["name"] = name
    return chunk({"tool_calls": [piece]})


FS_READ = ToolSpec(
    name="fs.read",
    description="Read a file in the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
SHELL_RUN = ToolSpec(name="shell.run", description="Run a command.", risk="effectful")


def request(base_url: str, *, tools: list[ToolSpec] | None = None, messages: list[Message] | None = None, **kw):
    return ModelRequest(
        profile=profile(base_url, **kw),
        system="You are terse.",
        messages=messages or [Message(role="user", text="Hello!")],
        tools=tools or [],
    )


async def test_streamed_text_arrives_in_order_through_on_delta(server: LoopbackServer) -> None:
    server.reply(text_stream("Hello", " there", ", how", " can I help?"))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    req = request(server.url)
    response = await OpenAIProvider(req.profile, "sk-test").complete(req, on_delta)

    assert deltas == ["Hello", " there", ", how", " can I help?"]
    assert response.text == "Hello there, how can I help?"
    assert response.stop_reason == "stop"
    assert response.tool_calls == []


async def test_usage_is_read_from_the_final_chunk(server: LoopbackServer) -> None:
    server.reply(text_stream("Hi", usage={"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38}))
    req = request(server.url)

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert (response.usage.input_tokens, response.usage.output_tokens) == (31, 7)


async def test_tool_call_arguments_split_across_chunks_are_joined(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_data(
                chunk({"role": "assistant", "content": None}),
                tool_piece(0, id="call_abc", name="fs__read"),
                tool_piece(0, arguments='{"pa'),
                tool_piece(0, arguments='th": "REA'),
                tool_piece(0, arguments='DME.md"}'),
                chunk({}, finish_reason="tool_calls"),
                chunk(None, usage={"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}),
                "[DONE]",
            )
        )
    )
    req = request(server.url, tools=[FS_READ])

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert response.tool_calls == [ToolCall(id="call_abc", name="fs.read", arguments={"path": "README.md"})]
    assert response.stop_reason == "tool_calls"


async def test_two_tool_calls_in_one_response_are_kept_apart_by_index(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_data(
                tool_piece(0, id="call_1", name="fs__read"),
                tool_piece(0, arguments='{"path": '),
                tool_piece(1, id="call_2", name="shell__run"),
                tool_piece(0, arguments='"a.txt"}'),
                tool_piece(1, arguments='{"cmd": "ls"}'),
                chunk({}, finish_reason="tool_calls"),
                "[DONE]",
            )
        )
    )
    req = request(server.url, tools=[FS_READ, SHELL_RUN])

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_1", "fs.read", {"path": "a.txt"}),
        ("call_2", "shell.run", {"cmd": "ls"}),
    ]


async def test_malformed_tool_arguments_become_arguments_error(server: LoopbackServer) -> None:
    server.reply(
        Reply(
            chunks=sse_data(
                tool_piece(0, id="call_bad", name="fs__read", arguments='{"path": "README.md"'),
                chunk({}, finish_reason="tool_calls"),
                "[DONE]",
            )
        )
    )
    req = request(server.url, tools=[FS_READ])

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    (call,) = response.tool_calls
    assert call.arguments is None
    assert call.arguments_raw == '{"path": "README.md"'
    assert call.arguments_error is not None and "not valid JSON" in call.arguments_error


async def test_empty_tool_arguments_mean_an_empty_object(server: LoopbackServer) -> None:
    server.reply(
        Reply(chunks=sse_data(tool_piece(0, id="call_0", name="fs__read"), chunk({}, finish_reason="tool_calls"), "[DONE]"))
    )
    req = request(server.url, tools=[FS_READ])

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert response.tool_calls[0].arguments == {}


async def test_request_body_carries_wire_tool_names_converted_messages_and_auth(server: LoopbackServer) -> None:
    server.reply(text_stream("done"))
    history = [
        Message(role="user", text="Read the readme"),
        Message(
            role="assistant",
            text="",
            tool_calls=[ToolCall(id="call_1", name="fs.read", arguments={"path": "README.md"})],
        ),
        Message(role="tool", tool_call_id="call_1", name="fs.read", text="# agentrt"),
    ]
    req = request(server.url, tools=[FS_READ], messages=history, max_output_tokens=256, temperature=0.2)

    await OpenAIProvider(req.profile, "sk-test").complete(req)

    sent = server.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["accept"] == "text/event-stream"
    body = sent.json
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "fs__read",
                "description": "Read a file in the workspace.",
                "parameters": FS_READ.parameters,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Read the readme"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "fs__read", "arguments": json.dumps({"path": "README.md"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "# agentrt"},
    ]


def body_for(model: str, **kw) -> dict:
    prof = ModelProfile(name="t", provider="openai", model=model, max_output_tokens=100, **kw)
    return OpenAIProvider(prof, "sk").request_body(
        ModelRequest(profile=prof, messages=[Message(role="user", text="x")]), ToolNames([])
    )


@pytest.mark.parametrize(
    "model", ["o1", "o1-mini", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "openai/o3-mini", "GPT-5.1", "codex-mini-latest"]
)
def test_openai_reasoning_models_get_max_completion_tokens_and_no_temperature(model: str) -> None:
    body = body_for(model, temperature=0.2)

    assert body["max_completion_tokens"] == 100
    assert "max_tokens" not in body
    assert "temperature" not in body


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "deepseek-reasoner", "llama-3.3-70b", "openai/gpt-oss-120b", "gpt-5-chat-latest"])
def test_other_models_get_max_tokens_and_temperature_whatever_the_host(model: str) -> None:
    body = body_for(model, temperature=0.2)

    assert body["max_tokens"] == 100
    assert "max_completion_tokens" not in body
    assert body["temperature"] == 0.2


def test_token_limit_parameter_overrides_the_model_family() -> None:
    azure_deployment = body_for("my-prod-deployment", token_limit_parameter="max_completion_tokens")
    forced_old_field = body_for("o3-mini", token_limit_parameter="max_tokens")

    assert azure_deployment["max_completion_tokens"] == 100 and "max_tokens" not in azure_deployment
    assert forced_old_field["max_tokens"] == 100 and "max_completion_tokens" not in forced_old_field


def test_reasoning_effort_is_sent_only_when_the_profile_sets_it() -> None:
    assert body_for("o4-mini", reasoning_effort="high")["reasoning_effort"] == "high"
    assert "reasoning_effort" not in body_for("o4-mini")


def test_vendor_endpoint_is_the_default_base_url() -> None:
    prof = ModelProfile(name="t", provider="openai", model="gpt-4o")

    assert OpenAIProvider(prof, "sk").url == "https://api.openai.com/v1/chat/completions"


async def test_local_server_without_key_sends_no_authorization(server: LoopbackServer) -> None:
    server.reply(text_stream("ok"))
    req = request(server.url)

    await OpenAIProvider(req.profile, None).complete(req)

    assert "authorization" not in server.last.headers


async def test_429_with_retry_after_is_retryable_after_that_delay(server: LoopbackServer) -> None:
    body = {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini on requests per min (RPM).",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    server.reply(json_reply(429, body, {"Retry-After": "7"}))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == 429
    assert caught.value.retry_after == 7.0
    error = application_error_from(caught.value)
    assert error.non_retryable is False
    assert error.next_retry_delay == timedelta(seconds=7)
    assert error.type == "ProviderHTTPError"


async def test_retry_after_ms_header_is_honoured(server: LoopbackServer) -> None:
    server.reply(json_reply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "1500"}))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.retry_after == 1.5


async def test_400_keeps_body_and_url_and_is_not_retryable(server: LoopbackServer) -> None:
    body = {
        "error": {
            "message": "Invalid 'messages[1].tool_call_id': no tool call with that id.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": None,
        }
    }
    server.reply(json_reply(400, body))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == 400
    assert caught.value.url == f"{server.url}/v1/chat/completions"
    assert json.loads(caught.value.body) == body
    assert caught.value.retry_after is None
    error = application_error_from(caught.value)
    assert error.non_retryable is True
    assert error.details == ({"status": 400, "url": caught.value.url, "body": caught.value.body},)


async def test_500_is_retryable(server: LoopbackServer) -> None:
    server.reply(json_reply(500, {"error": {"message": "The server had an error", "type": "server_error"}}))
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == 500
    assert application_error_from(caught.value).non_retryable is False


async def test_error_chunk_inside_a_200_stream_is_an_http_error(server: LoopbackServer) -> None:
    server.reply(
        Reply(chunks=sse_data(chunk({"content": "Hel"}), {"error": {"message": "overloaded", "type": "server_error"}}))
    )
    req = request(server.url)

    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.status == 500
    assert "overloaded" in caught.value.body


async def test_connection_refused_is_a_transport_error(closed_port_url: str) -> None:
    req = request(closed_port_url)

    with pytest.raises(ProviderTransportError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.url == f"{closed_port_url}/v1/chat/completions"
    assert caught.value.__cause__ is not None
    assert application_error_from(caught.value).non_retryable is False


async def test_stream_closed_before_done_is_a_transport_error(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_data(chunk({"content": "Hello"}), chunk({"content": " wor"}))))
    req = request(server.url)

    with pytest.raises(ProviderTransportError, match="stream ended"):
        await OpenAIProvider(req.profile, "sk-test").complete(req)


async def test_body_cut_short_of_its_content_length_is_a_transport_error(server: LoopbackServer) -> None:
    chunks = sse_data(chunk({"content": "Hello"}))
    server.reply(Reply(chunks=chunks, content_length=sum(map(len, chunks)) + 500))
    req = request(server.url)

    with pytest.raises(ProviderTransportError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert caught.value.__cause__ is not None


async def test_provider_that_never_answers_times_out_as_a_transport_error(server: LoopbackServer) -> None:
    server.reply(Reply(hang=True))
    req = request(server.url, timeout_seconds=0.2)

    with pytest.raises(ProviderTransportError, match="timed out|no complete answer"):
        await OpenAIProvider(req.profile, "sk-test").complete(req)


async def test_200_that_is_not_an_event_stream_is_a_transport_error(server: LoopbackServer) -> None:
    server.reply(json_reply(200, {"id": "chatcmpl-1", "choices": []}))
    req = request(server.url)

    with pytest.raises(ProviderTransportError, match="not an event stream"):
        await OpenAIProvider(req.profile, "sk-test").complete(req)
