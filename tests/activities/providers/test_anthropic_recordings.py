"""Real Anthropic Messages streams, recorded by other projects against the live API, replayed byte
for byte from a loopback server through AnthropicProvider.

The recordings and their sidecars (source repository, path, commit, model, request) are in
``recordings/anthropic``. Each is served whole, one line per write and in 7-byte writes (which
cut events, lines and UTF-8 characters apart). No Anthropic error stream was recorded: the
``error`` event is covered by hand-made streams in test_anthropic.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrt.activities.providers import AnthropicProvider
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderTransportError,
    ReasoningBlock,
    ToolCall,
    ToolSpec,
    Usage,
)
from tests.activities.providers._loopback import LoopbackServer, Reply

RECORDINGS = Path(__file__).parent / "recordings" / "anthropic"
NAMES = sorted(path.stem for path in RECORDINGS.glob("*.sse"))


def body(name: str) -> bytes:
    return (RECORDINGS / f"{name}.sse").read_bytes()


def sidecar(name: str) -> dict:
    return json.loads((RECORDINGS / f"{name}.json").read_text())


def events(name: str) -> list[dict]:
    """The recording's event data, parsed here apart from the adapter, to state what it must find."""
    return [json.loads(line[5:]) for line in body(name).decode().splitlines() if line.startswith("data:")]


def deltas(name: str, delta_type: str, key: str) -> list[str]:
    return [
        e["delta"][key] for e in events(name) if e["type"] == "content_block_delta" and e["delta"]["type"] == delta_type
    ]


def whole(raw: bytes) -> list[bytes]:
    return [raw]


def by_line(raw: bytes) -> list[bytes]:
    return raw.splitlines(keepends=True)


def seven_bytes(raw: bytes) -> list[bytes]:
    return [raw[i : i + 7] for i in range(0, len(raw), 7)]


SPLITS = [whole, by_line, seven_bytes]


def replay(name: str, split: Callable[[bytes], list[bytes]] = whole) -> Reply:
    meta = sidecar(name)
    return Reply(status=meta["status"], headers={"Content-Type": meta["content_type"]}, chunks=split(body(name)))


def profile(server: LoopbackServer, name: str, **kw) -> ModelProfile:
    return ModelProfile(name="t", provider="anthropic", model=sidecar(name)["model"], base_url=server.url, **kw)


def tools_of(name: str) -> list[ToolSpec]:
    request = sidecar(name)["request"] or {}
    return [
        ToolSpec(name=t["name"], description=t["description"], parameters=t["input_schema"])
        for t in request.get("tools", [])
    ]


async def complete(server: LoopbackServer, name: str, split=whole, **kw) -> tuple[ModelResponse, list[str]]:
    server.reply(replay(name, split))
    req = ModelRequest(
        profile=profile(server, name, **kw), messages=[Message(role="user", text="Hi")], tools=tools_of(name)
    )
    streamed: list[str] = []

    async def on_delta(text: str) -> None:
        streamed.append(text)

    response = await AnthropicProvider(req.profile, "sk-ant-test").complete(req, on_delta)
    return response, streamed


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", NAMES)
async def test_every_recording_gives_the_same_answer_however_it_is_cut(
    server: LoopbackServer, name: str, split: Callable[[bytes], list[bytes]]
) -> None:
    expected, _ = await complete(server, name)

    response, streamed = await complete(server, name, split)

    assert response == expected
    assert "".join(streamed) == response.text == "".join(deltas(name, "text_delta", "text"))


async def test_recorded_text_streams_its_pieces_and_usage(server: LoopbackServer) -> None:
    response, streamed = await complete(server, "text")

    assert streamed == deltas("text", "text_delta", "text")
    assert response.text.startswith("Olá! (That's")
    assert (response.stop_reason, response.reasoning, response.tool_calls) == ("end_turn", [], [])
    assert response.usage == Usage(input_tokens=16, output_tokens=38)


async def test_recorded_parallel_tool_use_gives_the_text_and_both_calls(server: LoopbackServer) -> None:
    response, _ = await complete(server, "parallel-tool-use")

    assert response.text == "I'll add and multiply the numbers 2 and 3 for you."
    assert response.tool_calls == [
        ToolCall(id="toolu_01UYxUYC2zRPY8wiutnF48eP", name="add", arguments={"a": 2, "b": 3}),
        ToolCall(id="toolu_01VaRx1jpWCvPhi7L4kywAcd", name="multiply", arguments={"a": 2, "b": 3}),
    ]
    assert (response.stop_reason, response.usage) == ("tool_use", Usage(input_tokens=502, output_tokens=137))


async def test_recorded_thinking_is_one_signed_reasoning_block_and_no_answer_text(server: LoopbackServer) -> None:
    response, streamed = await complete(server, "thinking-tool-use", thinking_budget_tokens=4000)

    (signature,) = deltas("thinking-tool-use", "signature_delta", "signature")
    assert response.reasoning == [
        ReasoningBlock(
            type="thinking",
            provider="anthropic",
            text="".join(deltas("thinking-tool-use", "thinking_delta", "thinking")),
            signature=signature,
        )
    ]
    assert response.reasoning[0].text.startswith("The user is asking for weather information for Florence")
    assert (response.text, streamed) == ("", [])
    assert response.tool_calls == [
        ToolCall(id="toolu_01Js4AMfx5qpTLhwTusnvT68", name="weather", arguments={"location": "Florence, Italy"})
    ]


def raw_json_strings(raw: bytes, key: str) -> list[bytes]:
    """The JSON string tokens (quotes included) of ``key`` as they stand in ``raw``."""
    return re.findall(rb'"' + key.encode() + rb'":\s*("(?:[^"\\]|\\.)*")', raw)


async def next_request_after_tool_result(server: LoopbackServer, name: str, **kw) -> dict:
    """Parse recording ``name``, then send the next call (its reply, the tool's result) and return its body."""
    first, _ = await complete(server, name, **kw)
    history = [
        Message(role="user", text="Hi"),
        Message(role="assistant", text=first.text, tool_calls=first.tool_calls, reasoning=first.reasoning),
        *(Message(role="tool", tool_call_id=c.id, name=c.name, text="Sunny, 24 °C") for c in first.tool_calls),
    ]
    if not first.tool_calls:
        history.append(Message(role="user", text="Go on."))
    server.reply(replay("text"))
    req = ModelRequest(
        profile=profile(server, name, **kw),
        system="You are a helpful assistant",
        messages=history,
        tools=tools_of(name),
    )
    await AnthropicProvider(req.profile, "sk-ant-test").complete(req)
    return server.last.json


async def test_recorded_thinking_goes_back_first_and_byte_equal_after_the_tool_result(server: LoopbackServer) -> None:
    sent = await next_request_after_tool_result(
        server, "thinking-tool-use", thinking_budget_tokens=4000, max_output_tokens=4096, prompt_cache="1h"
    )

    assert (sent["thinking"], "temperature" in sent) == ({"type": "enabled", "budget_tokens": 4000}, False)
    user, assistant, results = sent["messages"]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    thinking = assistant["content"][0]
    assert thinking == {
        "type": "thinking",
        "thinking": "".join(deltas("thinking-tool-use", "thinking_delta", "thinking")),
        "signature": deltas("thinking-tool-use", "signature_delta", "signature")[0],
    }
    # The signature's JSON token is the same bytes on the wire as in the recorded stream.
    (recorded,) = raw_json_strings(body("thinking-tool-use"), "signature")[1:]  # [0] is the start's ""
    assert raw_json_strings(server.last.body, "signature") == [recorded]
    assert results["content"][0]["tool_use_id"] == "toolu_01Js4AMfx5qpTLhwTusnvT68"
    marks = [
        block["cache_control"]
        for block in [*sent["system"], *sent["tools"], *user["content"], *assistant["content"], *results["content"]]
        if "cache_control" in block
    ]
    assert marks == [{"type": "ephemeral", "ttl": "1h"}] * 4
    assert "cache_control" not in thinking


async def test_recorded_redacted_thinking_is_kept_and_goes_back_byte_equal(server: LoopbackServer) -> None:
    starts = [e["content_block"] for e in events("redacted-thinking") if e["type"] == "content_block_start"]
    recorded = [block["data"] for block in starts if block["type"] == "redacted_thinking"]
    response, streamed = await complete(server, "redacted-thinking", thinking_budget_tokens=1024)

    assert response.reasoning == [
        ReasoningBlock(type="redacted_thinking", provider="anthropic", data=data) for data in recorded
    ]
    assert response.text.startswith("I notice that you've sent") and streamed[0] == "I notice that you've sent what"

    sent = await next_request_after_tool_result(server, "redacted-thinking", thinking_budget_tokens=1024)

    assistant = sent["messages"][1]["content"]
    assert len(recorded) == 2
    assert assistant[:2] == [{"type": "redacted_thinking", "data": data} for data in recorded]
    assert assistant[2]["type"] == "text"
    assert raw_json_strings(server.last.body, "data") == raw_json_strings(body("redacted-thinking"), "data")


async def test_recorded_cache_read_tokens_of_message_start_are_reported(server: LoopbackServer) -> None:
    raw = body("cache-read-compaction")
    # Only the message_start event, then the connection closes: a cut stream.
    server.reply(Reply(chunks=[raw[: raw.index(b"event: content_block_start")]]))
    req = ModelRequest(profile=profile(server, "cache-read-compaction"), messages=[Message(role="user", text="Hi")])

    with pytest.raises(ProviderTransportError) as caught:
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)

    assert caught.value.partial_usage == Usage(input_tokens=55196, output_tokens=7, cache_read_tokens=55096)


async def test_recorded_compaction_block_is_skipped_and_the_last_usage_wins(server: LoopbackServer) -> None:
    response, _ = await complete(server, "cache-read-compaction")

    assert (response.text, response.reasoning, response.tool_calls) == ("Hello! 👋", [], [])
    # message_delta's usage replaces message_start's: with compaction (a beta agentrt does not
    # ask for) it covers the last iteration only; usage.iterations is not read.
    assert response.usage == Usage(input_tokens=181, output_tokens=8)


async def test_recorded_cache_writes_and_reads_come_from_the_cumulative_message_delta(server: LoopbackServer) -> None:
    response, _ = await complete(server, "cache-write-code-execution")

    # server_tool_use and its result are server-side tools' blocks: skipped, not tool calls.
    assert (response.text, response.tool_calls) == (
        "The sum of the squares of the numbers 1 through 12 is **650**.",
        [],
    )
    assert response.usage == Usage(
        input_tokens=6 + 3337 + 6289, output_tokens=198, cache_read_tokens=6289, cache_write_tokens=3337
    )
