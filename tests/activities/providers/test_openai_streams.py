"""Wire tests for the shapes compatible servers add to Chat Completions streams: parallel calls
at one index, content parts, reasoning fields, ``<think>`` blocks, in-stream errors, usage
details, and hostile chunks that must end in a typed error.

The streams here are hand-made where no recording shows the shape (each test says so); the
recorded streams are replayed in ``test_openai_recordings.py``.
"""

from __future__ import annotations

import json
import re

import pytest

from agentrt.activities.providers import OpenAIProvider, ToolNames, application_error_from
from agentrt.schemas import (
    Message,
    ModelRequest,
    ProviderHTTPError,
    ProviderProtocolError,
    ReasoningBlock,
    ToolCall,
    Usage,
)
from tests.activities.providers._loopback import LoopbackServer, Reply, sse_data
from tests.activities.providers.test_openai import FS_READ, SHELL_RUN, chunk, request


def reasoning(*texts: str, source: str | None = None) -> list[ReasoningBlock]:
    return [ReasoningBlock(type="reasoning", provider="openai", text=t, source=source) for t in texts]


async def run(server: LoopbackServer, *payloads: dict | str, tools=None):
    """Serve ``payloads`` as one stream; return (response, on_delta pieces)."""
    server.reply(Reply(chunks=sse_data(*payloads)))
    req = request(server.url, tools=tools)
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await OpenAIProvider(req.profile, "sk-test").complete(req, on_delta)
    return response, deltas


def calls(*pieces: dict) -> dict:
    return chunk({"tool_calls": list(pieces)})


def call(index: int | None, id: str | None = None, name: str | None = None, arguments: str | None = None) -> dict:
    piece: dict = {}
    if index is not None:
        piece["index"] = index
    if id is not None:
        piece["id"] = id
    function: dict = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    piece["function"] = function
    return piece


STOP = chunk({}, finish_reason="stop")
TOOL_CALLS = chunk({}, finish_reason="tool_calls")


# --- 1. tool calls keyed by (index, id) -------------------------------------------------


async def test_parallel_calls_sent_at_index_0_with_different_ids_are_separate_calls(server: LoopbackServer) -> None:
    # Hand-made (no Ollama recording yet): Ollama and LiteLLM send every parallel call whole at index 0.
    response, _ = await run(
        server,
        calls(call(0, "call_a", "fs__read", '{"path": "a.txt"}')),
        calls(call(0, "call_b", "shell__run", '{"cmd": "ls"}')),
        TOOL_CALLS,
        "[DONE]",
        tools=[FS_READ, SHELL_RUN],
    )

    assert response.tool_calls == [
        ToolCall(id="call_a", name="fs.read", arguments={"path": "a.txt"}),
        ToolCall(id="call_b", name="shell.run", arguments={"cmd": "ls"}),
    ]


async def test_pieces_with_an_empty_or_missing_id_continue_the_current_call_at_their_index(
    server: LoopbackServer,
) -> None:
    response, _ = await run(
        server,
        calls(call(0, "call_a", "fs__read", "")),
        calls(call(0, "", None, '{"path": ')),
        calls(call(0, None, None, '"a.txt"}')),
        TOOL_CALLS,
        "[DONE]",
        tools=[FS_READ],
    )

    assert response.tool_calls == [ToolCall(id="call_a", name="fs.read", arguments={"path": "a.txt"})]


async def test_a_piece_repeating_the_current_id_continues_that_call(server: LoopbackServer) -> None:
    response, _ = await run(
        server,
        calls(call(0, "call_a", "fs__read", '{"path": ')),
        calls(call(0, "call_a", None, '"a.txt"}')),
        TOOL_CALLS,
        "[DONE]",
        tools=[FS_READ],
    )

    assert response.tool_calls == [ToolCall(id="call_a", name="fs.read", arguments={"path": "a.txt"})]


async def test_calls_keep_the_order_they_started_in_across_indexes_and_ids(server: LoopbackServer) -> None:
    response, _ = await run(
        server,
        calls(call(1, "call_1", "fs__read", '{"path": "one"}')),
        calls(call(0, "call_0", "fs__read", '{"path": ')),
        calls(call(0, "call_0b", "shell__run", '{"cmd": ')),
        calls(call(0, None, None, '"ls"}')),
        TOOL_CALLS,
        "[DONE]",
        tools=[FS_READ, SHELL_RUN],
    )

    assert [(c.id, c.name, c.arguments, c.arguments_raw) for c in response.tool_calls] == [
        ("call_1", "fs.read", {"path": "one"}, ""),
        ("call_0", "fs.read", None, '{"path": '),
        ("call_0b", "shell.run", {"cmd": "ls"}, ""),
    ]


async def test_a_call_that_never_got_an_id_gets_a_fresh_one(server: LoopbackServer) -> None:
    response, _ = await run(
        server, calls(call(None, None, "fs__read", '{"path": "a"}')), TOOL_CALLS, "[DONE]", tools=[FS_READ]
    )

    (made,) = response.tool_calls
    assert re.fullmatch(r"call_[0-9a-f]{24}", made.id)
    assert made == ToolCall(id=made.id, name="fs.read", arguments={"path": "a"})


async def test_a_tool_name_the_request_did_not_offer_comes_back_as_the_model_wrote_it(server: LoopbackServer) -> None:
    response, _ = await run(
        server,
        calls(call(0, "call_a", "fs__write", "{}")),
        calls(call(1, "call_b", "web.search", "{}")),
        TOOL_CALLS,
        "[DONE]",
        tools=[FS_READ],
    )

    assert [c.name for c in response.tool_calls] == ["fs__write", "web.search"]


def test_history_names_offered_tools_by_wire_name_and_a_hallucinated_one_as_the_model_wrote_it() -> None:
    req = ModelRequest(
        profile=request("http://127.0.0.1:1").profile,
        messages=[
            Message(role="user", text="go"),
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="c1", name="fs.read", arguments={"path": "a"}),
                    ToolCall(id="c2", name="fs__write", arguments={}),
                ],
            ),
            Message(role="tool", tool_call_id="c1", name="fs.read", text="A"),
            Message(role="tool", tool_call_id="c2", name="fs__write", text="unknown tool", is_error=True),
        ],
        tools=[FS_READ],
    )
    provider = OpenAIProvider(req.profile, None)

    body = provider.request_body(req, ToolNames(t.name for t in req.tools))

    assert [c["function"]["name"] for c in body["messages"][1]["tool_calls"]] == ["fs__read", "fs__write"]
    assert body["tools"][0]["function"]["name"] == "fs__read"


async def test_a_tool_call_that_never_gets_a_name_is_a_protocol_error(server: LoopbackServer) -> None:
    with pytest.raises(ProviderProtocolError, match="never got a function name") as caught:
        await run(server, calls(call(0, "call_a", None, "{}")), TOOL_CALLS, "[DONE]")

    assert '"call_a"' in caught.value.line


# --- 2. content as a list of parts (Mistral) -------------------------------------------


async def test_text_parts_are_answer_and_thinking_parts_are_one_reasoning_block(server: LoopbackServer) -> None:
    response, deltas = await run(
        server,
        chunk({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "2+2"}]}]}),
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " is 4."}]}]}),
        chunk({"content": [{"type": "text", "text": "It is "}, {"type": "text", "text": "4."}]}),
        STOP,
        "[DONE]",
    )

    assert deltas == ["It is ", "4."]
    assert response.text == "It is 4."
    assert response.reasoning == reasoning("2+2 is 4.")


@pytest.mark.parametrize(
    "part",
    [
        {"type": "reference", "reference_ids": [1]},
        {"type": "image_url", "image_url": "x"},
        {"text": "no type"},
        {"type": "thinking", "thinking": [{"type": "image", "url": "x"}]},
        {"type": "thinking", "thinking": 5},
        {"type": "text", "text": ["a"]},
        "a bare string",
    ],
)
async def test_a_content_part_of_an_unknown_shape_is_a_protocol_error(server: LoopbackServer, part: object) -> None:
    with pytest.raises(ProviderProtocolError):
        await run(server, chunk({"content": [part]}))


# --- 3. reasoning fields ----------------------------------------------------------------


async def test_reasoning_content_is_reasoning_and_never_reaches_the_answer(server: LoopbackServer) -> None:
    # Hand-made in the shape of the DeepSeek recording, with answer text between two reasoning runs.
    response, deltas = await run(
        server,
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"content": None, "reasoning_content": "Think"}),
        chunk({"content": None, "reasoning_content": "ing."}),
        chunk({"content": "Hi", "reasoning_content": None}),
        chunk({"content": None, "reasoning_content": "More."}),
        chunk({"content": "!", "reasoning_content": None}),
        STOP,
        "[DONE]",
    )

    assert deltas == ["Hi", "!"]
    assert response.text == "Hi!"
    assert response.reasoning == reasoning("Thinking.", "More.", source="reasoning_content")


async def test_reasoning_sent_in_both_reasoning_and_reasoning_details_is_read_once(server: LoopbackServer) -> None:
    def both(text: str) -> dict:
        return chunk({"content": "", "reasoning": text, "reasoning_details": [{"type": "reasoning.text", "text": text}]})

    response, deltas = await run(server, both("a"), both("b"), chunk({"content": "ok"}), STOP, "[DONE]")

    assert response.reasoning == reasoning("ab", source="reasoning")
    assert deltas == ["ok"]


async def test_reasoning_details_alone_give_summary_text_and_skip_encrypted_data(server: LoopbackServer) -> None:
    response, _ = await run(
        server,
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": "Plan"}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "opaque=="}]}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": " done", "signature": "sig"}]}),
        chunk({"content": "ok"}),
        STOP,
        "[DONE]",
    )

    assert response.reasoning == reasoning("Plan done", source="reasoning_details")


def test_reasoning_content_goes_back_only_on_a_reply_that_called_tools() -> None:
    # DeepSeek's thinking mode answers 400 when a tool-calling reply comes back without it.
    req = ModelRequest(
        profile=request("http://127.0.0.1:1").profile,
        messages=[
            Message(role="user", text="hi"),
            Message(role="assistant", text="hello", reasoning=reasoning("small talk", source="reasoning_content")),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c1", name="fs.read", arguments={})],
                reasoning=reasoning("I need ", "the file", source="reasoning_content")
                + reasoning("not this", source="reasoning"),
            ),
        ],
    )

    body = OpenAIProvider(req.profile, None).request_body(req, ToolNames([]))

    assert body["messages"][1] == {"role": "assistant", "content": "hello"}
    assert body["messages"][2]["reasoning_content"] == "I need the file"
    assert "small talk" not in json.dumps(body) and "not this" not in json.dumps(body)


def test_reasoning_blocks_of_earlier_replies_are_never_sent_back() -> None:
    req = ModelRequest(
        profile=request("http://127.0.0.1:1").profile,
        messages=[
            Message(role="user", text="hi"),
            Message(role="assistant", text="hello", reasoning=reasoning("secret")),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c1", name="fs.read", arguments={})],
                reasoning=[ReasoningBlock(type="thinking", provider="anthropic", text="x", signature="s")],
            ),
        ],
    )

    body = OpenAIProvider(req.profile, None).request_body(req, ToolNames([]))

    assert "secret" not in json.dumps(body) and "reasoning" not in json.dumps(body)
    assert body["messages"][1] == {"role": "assistant", "content": "hello"}
    assert set(body["messages"][2]) == {"role", "content", "tool_calls"}


# --- 4. <think> blocks in content -------------------------------------------------------


async def test_a_leading_think_block_cut_across_chunks_is_reasoning_and_on_delta_gets_only_the_answer(
    server: LoopbackServer,
) -> None:
    # Hand-made: DeepSeek-R1 distills and QwQ on vLLM/Ollama without a reasoning parser.
    pieces = ["<th", "ink>\nThe user", " greets me.</th", "ink>", "\n\n", "Hello", "!"]
    response, deltas = await run(server, *(chunk({"content": p}) for p in pieces), STOP, "[DONE]")

    assert "".join(deltas) == "Hello!"
    assert all("think" not in d and "greets" not in d for d in deltas)
    assert response.text == "Hello!"
    assert response.reasoning == reasoning("The user greets me.")


async def test_an_unclosed_think_block_becomes_answer_text_when_the_stream_ends(server: LoopbackServer) -> None:
    response, deltas = await run(
        server,
        chunk({"content": "<thinking>Let me"}),
        chunk({"content": " count"}),
        chunk({}, finish_reason="length"),
        "[DONE]",
    )

    assert deltas == ["<thinking>Let me count"]
    assert response.text == "<thinking>Let me count"
    assert response.reasoning == []
    assert response.stop_reason == "length"


# --- 5. errors inside the stream --------------------------------------------------------


def raw_events(*events: str) -> Reply:
    return Reply(chunks=[e.encode() for e in events])


async def fail(server: LoopbackServer, reply: Reply) -> ProviderHTTPError:
    server.reply(reply)
    req = request(server.url)
    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)
    return caught.value


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ({"message": "m", "type": "invalid_request_error", "code": "tool_use_failed", "status_code": 400}, 400),
        ({"message": "m", "type": "invalid_request_error", "code": "tool_use_failed"}, 400),
        ({"message": "m", "code": 429}, 429),
        ({"message": "m", "code": "503"}, 503),
        ({"message": "m", "status": 413, "code": 500}, 413),
        ({"message": "m", "code": 400, "status": "INVALID_ARGUMENT"}, 400),
        ({"message": "m", "type": "server_error", "code": None}, 500),
        ({"message": "m", "code": 200}, 500),
        ({"message": "m", "status_code": True, "code": "rate_limit"}, 500),
        ({"message": "m", "code": 10**30}, 500),
        ("a bare string", 500),
        ([], 500),
    ],
)
async def test_an_error_chunk_takes_its_status_from_status_code_then_code_then_type(
    server: LoopbackServer, error: object, status: int
) -> None:
    caught = await fail(server, Reply(chunks=sse_data(chunk({"content": "Hi"}), {"error": error})))

    assert caught.status == status


async def test_groq_tool_use_failed_is_a_400_that_is_not_retried(server: LoopbackServer) -> None:
    error = {"message": "Failed to call a function.", "type": "invalid_request_error", "code": "tool_use_failed"}
    caught = await fail(server, raw_events(f"event: error\ndata: {json.dumps({'error': error})}\n\n"))

    assert caught.status == 400
    assert application_error_from(caught).non_retryable is True
    assert "tool_use_failed" in caught.body


async def test_an_error_event_whose_data_is_not_json_is_a_retryable_500(server: LoopbackServer) -> None:
    caught = await fail(server, raw_events("event: error\ndata: upstream went away\n\n"))

    assert caught.status == 500
    assert caught.body == "upstream went away"
    assert application_error_from(caught).non_retryable is False


async def test_an_error_object_sent_as_the_chunk_itself_is_an_http_error(server: LoopbackServer) -> None:
    caught = await fail(
        server, Reply(chunks=sse_data({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}))
    )

    assert caught.status == 400


async def test_a_huge_error_body_is_kept_to_4_kb(server: LoopbackServer) -> None:
    caught = await fail(server, Reply(chunks=sse_data({"error": {"message": "x" * 100_000, "code": 502}})))

    assert caught.status == 502
    assert len(caught.body) == 4096


# --- 6. shapes the API allows, and shapes it does not -----------------------------------


async def test_azure_filter_chunks_null_usage_comments_and_keep_alives_are_normal(server: LoopbackServer) -> None:
    # Hand-made from the shapes of the Azure and OpenRouter recordings, all in one stream.
    azure_first = {"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": []}
    filter_only = {"choices": [{"index": 0, "finish_reason": None, "content_filter_results": {}}], "usage": None}
    server.reply(
        Reply(
            chunks=[
                b": OPENROUTER PROCESSING\n\n",
                *sse_data(azure_first, filter_only),
                b"data: \n\n",
                b"data:\n\n",
                *sse_data(chunk({"content": "Hi"}), chunk({"content": None}, finish_reason="stop")),
                *sse_data(chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 1}), "[DONE]"),
            ]
        )
    )
    req = request(server.url)

    response = await OpenAIProvider(req.profile, "sk-test").complete(req)

    assert (response.text, response.stop_reason, response.usage) == ("Hi", "stop", Usage(input_tokens=3, output_tokens=1))


HOSTILE = [
    pytest.param("this is not json", id="not-json"),
    pytest.param('{"choices": [', id="cut-json"),
    pytest.param("[" * 100_000 + "]" * 100_000, id="nested-too-deep"),
    pytest.param("[1, 2]", id="json-array"),
    pytest.param('"text"', id="json-string"),
    pytest.param("null", id="json-null"),
    pytest.param({"choices": "abc"}, id="choices-string"),
    pytest.param({"choices": {"0": {}}}, id="choices-object"),
    pytest.param({"choices": [1]}, id="choice-number"),
    pytest.param({"choices": [{"index": "x", "delta": {}}]}, id="choice-index-string"),
    pytest.param({"choices": [{"index": True, "delta": {}}]}, id="choice-index-bool"),
    pytest.param({"choices": [{"index": 0, "delta": []}]}, id="delta-list"),
    pytest.param({"choices": [{"index": 0, "delta": "Hi"}]}, id="delta-string"),
    pytest.param({"choices": [{"index": 0, "delta": {"content": 5}}]}, id="content-number"),
    pytest.param({"choices": [{"index": 0, "delta": {"content": {"text": "x"}}}]}, id="content-object"),
    pytest.param({"choices": [{"index": 0, "delta": {"refusal": 1}}]}, id="refusal-number"),
    pytest.param({"choices": [{"index": 0, "delta": {"reasoning_content": 1}}]}, id="reasoning-content-number"),
    pytest.param({"choices": [{"index": 0, "delta": {"reasoning": ["x"]}}]}, id="reasoning-list"),
    pytest.param({"choices": [{"index": 0, "delta": {"reasoning_details": "x"}}]}, id="reasoning-details-string"),
    pytest.param({"choices": [{"index": 0, "delta": {"reasoning_details": [3]}}]}, id="reasoning-detail-number"),
    pytest.param(
        {"choices": [{"index": 0, "delta": {"reasoning_details": [{"type": "reasoning.text", "text": 3}]}}]},
        id="reasoning-detail-text-number",
    ),
    pytest.param({"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]}, id="tool-calls-object"),
    pytest.param({"choices": [{"index": 0, "delta": {"tool_calls": [5]}}]}, id="tool-call-number"),
    pytest.param({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "x"}]}}]}, id="tool-index-string"),
    pytest.param({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0.5}]}}]}, id="tool-index-float"),
    pytest.param({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": 7}]}}]}, id="tool-id-number"),
    pytest.param(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]}, id="function-string"
    ),
    pytest.param(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 12}}]}}]},
        id="arguments-number",
    ),
    pytest.param(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]}}]},
        id="arguments-object",
    ),
    pytest.param(
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": ["a"]}}]}}]},
        id="name-list",
    ),
    pytest.param({"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]}, id="finish-reason-number"),
    pytest.param({"choices": [], "usage": "lots"}, id="usage-string"),
    pytest.param({"choices": [], "usage": {"prompt_tokens": "12"}}, id="usage-count-string"),
    pytest.param({"choices": [], "usage": {"prompt_tokens": -1}}, id="usage-count-negative"),
    pytest.param({"choices": [], "usage": {"completion_tokens": 10**30}}, id="usage-count-huge"),
    pytest.param('{"choices": [], "usage": {"prompt_tokens": 1e400}}', id="usage-count-infinite"),
    pytest.param({"choices": [], "usage": {"prompt_tokens": 1.5}}, id="usage-count-fraction"),
    pytest.param({"choices": [], "usage": {"prompt_tokens": True}}, id="usage-count-bool"),
    pytest.param({"choices": [], "usage": {"prompt_tokens_details": []}}, id="usage-details-list"),
    pytest.param({"choices": [], "usage": {"completion_tokens_details": {"reasoning_tokens": "9"}}}, id="reasoning-str"),
    pytest.param({"choices": [], "x_groq": "x"}, id="x-groq-string"),
]


@pytest.mark.parametrize("payload", HOSTILE)
async def test_a_chunk_the_api_does_not_define_is_a_protocol_error(server: LoopbackServer, payload: object) -> None:
    # The hostile chunk comes last: the adapter stops reading at it.
    server.reply(Reply(chunks=sse_data(chunk({"content": "Hi"}), payload)))  # type: ignore[arg-type]
    req = request(server.url)

    with pytest.raises(ProviderProtocolError) as caught:
        await OpenAIProvider(req.profile, "sk-test").complete(req)

    error = caught.value
    assert (error.provider, error.model, error.url) == ("openai", "gpt-4o-mini", f"{server.url}/v1/chat/completions")
    sent = payload if isinstance(payload, str) else json.dumps(payload)
    assert error.line == (sent if len(sent) <= error.LINE_CHARS else sent[: error.LINE_CHARS] + "…")
    assert application_error_from(error).non_retryable is True


# --- 7. usage ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 30},
            },
            Usage(input_tokens=100, output_tokens=50, cache_read_tokens=64, reasoning_tokens=30),
        ),
        (
            {"prompt_tokens": 339, "completion_tokens": 83, "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 19},
            Usage(input_tokens=339, output_tokens=83, cache_read_tokens=320),
        ),
        (
            {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": None, "completion_tokens_details": None},
            Usage(input_tokens=10, output_tokens=5),
        ),
        ({"prompt_tokens": 10.0, "completion_tokens": 5}, Usage(input_tokens=10, output_tokens=5)),
    ],
    ids=["openai-details", "deepseek-cache-hit", "null-details", "integral-float"],
)
async def test_usage_fields_map_to_input_output_cache_read_and_reasoning_tokens(
    server: LoopbackServer, usage: dict, expected: Usage
) -> None:
    response, _ = await run(server, chunk({"content": "Hi"}), STOP, chunk(None, usage=usage), "[DONE]")

    assert response.usage == expected


async def test_groq_usage_in_x_groq_is_read_when_there_is_no_top_level_usage(server: LoopbackServer) -> None:
    last = chunk({}, finish_reason="stop")
    del last["usage"]
    last["x_groq"] = {"id": "req_1", "usage": {"prompt_tokens": 7, "completion_tokens": 2, "queue_time": 0.01}}

    response, _ = await run(server, chunk({"content": "Hi"}), last, "[DONE]")

    assert response.usage == Usage(input_tokens=7, output_tokens=2)


async def test_a_lone_surrogate_escape_in_streamed_text_becomes_a_replacement_character(server: LoopbackServer) -> None:
    # Hand-made: "\ud800" is valid JSON syntax but no text; kept, the reply could be neither
    # stored nor returned from the activity (UTF-8 refuses it).
    response, deltas = await run(
        server,
        chunk({"content": "a\ud800", "reasoning_content": "r\udc00"}),
        chunk({"content": [{"type": "thinking", "thinking": "t\udfff"}, {"type": "text", "text": "b\ud83d"}]}),
        calls(call(0, "call\ud800", "fs__read\udc00", '{"path": "x"}')),
        chunk({}, finish_reason="stop\ud800"),
        "[DONE]",
        tools=[FS_READ],
    )

    assert response.text == "a\ufffdb\ufffd" and deltas == ["a\ufffd", "b\ufffd"]
    assert [b.text for b in response.reasoning] == ["r\ufffd", "t\ufffd"]
    assert (response.tool_calls[0].id, response.tool_calls[0].name) == ("call\ufffd", "fs__read\ufffd")
    assert response.stop_reason == "stop\ufffd"
    response.model_dump_json()


async def test_calls_without_an_id_get_ids_no_other_call_of_the_turn_has(server: LoopbackServer) -> None:
    # Hand-made: a server that sends no ids. A call's id is its effect's idempotency key within
    # the turn; the ids made up were call_0, call_1 ... again in every round, so the second
    # round's fs.write would have been taken for the first round's.
    first, _ = await run(server, calls(call(0, None, "fs__read", "{}")), TOOL_CALLS, "[DONE]", tools=[FS_READ])
    second, _ = await run(server, calls(call(0, None, "fs__read", "{}")), TOOL_CALLS, "[DONE]", tools=[FS_READ])

    assert first.tool_calls[0].id and second.tool_calls[0].id
    assert first.tool_calls[0].id != second.tool_calls[0].id


async def test_calls_a_server_gives_one_id_get_distinct_ids(server: LoopbackServer) -> None:
    # Hand-made: two calls at two indexes with the same id stay two calls, with two ids.
    response, _ = await run(
        server,
        calls(call(0, "call_a", "fs__read", '{"path": "a"}'), call(1, "call_a", "fs__read", '{"path": "b"}')),
        TOOL_CALLS,
        "[DONE]",
        tools=[FS_READ],
    )

    ids = [c.id for c in response.tool_calls]
    assert ids[0] == "call_a" and len(set(ids)) == 2
    assert [c.arguments for c in response.tool_calls] == [{"path": "a"}, {"path": "b"}]
