"""Real recorded Chat Completions streams (OpenAI, Azure, Groq, Mistral, DeepSeek, OpenRouter,
Qwen, llama.cpp) replayed byte for byte from the loopback server through ``OpenAIProvider``.

Each recording is served whole, line by line, and in 7-byte pieces (cutting events, JSON and
UTF-8 characters anywhere), and must decode the same way every time. Where a case expects
reasoning, the expected text is read from the recording with a plain JSON walk, independent
of the adapter. See ``recordings/README.md`` for where each stream comes from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentrt.activities.providers import OpenAIProvider, application_error_from
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderHTTPError,
    ToolSpec,
    Usage,
)
from tests.activities.providers._loopback import LoopbackServer, Reply

RECORDINGS = Path(__file__).parent / "recordings"


@dataclass
class Case:
    path: str
    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: str | None = None
    reasoning: Callable[[dict[str, Any]], Any] | None = None  # delta -> the reasoning text it carries
    error_status: int | None = None


def _reasoning_content(delta: dict[str, Any]) -> Any:
    return delta.get("reasoning_content")


def _reasoning(delta: dict[str, Any]) -> Any:
    return delta.get("reasoning")


def _mistral_thinking(delta: dict[str, Any]) -> str:
    content = delta.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(t["text"] for part in content if part["type"] == "thinking" for t in part["thinking"])


ADD_AND_MULTIPLY = [("add", {"a": 2, "b": 3}), ("multiply", {"a": 2, "b": 3})]

CASES = [
    Case(
        "openai/chat-text-include-usage.sse",
        text="Olá!",
        usage=Usage(input_tokens=20, output_tokens=2),
        stop="stop",
    ),
    Case(
        "openai/chat-o4-mini-text.sse",
        text="Olá!",
        usage=Usage(input_tokens=19, output_tokens=84, reasoning_tokens=64),
        stop="stop",
    ),
    Case(
        "openai/chat-tool-call.sse",
        calls=[("call_7kE4IjtnwXcGbX6hDM7xFu8T", "weather", {"location": "Florence, Italy"})],
        usage=Usage(input_tokens=61, output_tokens=16),
        stop="tool_calls",
    ),
    Case(
        "openai/chat-parallel-tool-calls.sse",
        calls=[
            ("call_cclGbjTQkZDEnnHrRiU0n7NO", *ADD_AND_MULTIPLY[0]),
            ("call_Nob2SzTcxIjro1HvSBPQS6XG", *ADD_AND_MULTIPLY[1]),
        ],
        usage=Usage(input_tokens=106, output_tokens=50),
        stop="tool_calls",
    ),
    Case(
        "openai/chat-gpt5-reasoning-parallel-tool-calls.sse",
        calls=[
            ("call_8ElDxJj6u7IUDEwQIrwFbveM", *ADD_AND_MULTIPLY[0]),
            ("call_HEZOX3JzspqFubADMNdWn12E", *ADD_AND_MULTIPLY[1]),
        ],
        usage=Usage(input_tokens=190, output_tokens=379, reasoning_tokens=320),
        stop="tool_calls",
    ),
    Case(
        "azure/chat-o4-mini-text.sse",
        text="Oi!",
        usage=Usage(input_tokens=19, output_tokens=149, reasoning_tokens=128),
        stop="stop",
    ),
    Case(
        "azure/chat-gpt-5-mini-tool-call.sse",
        calls=[("call_tWA8BJziGlCyhQEXhEHn6eXK", "weather", {"location": "Florence, Italy"})],
        usage=Usage(input_tokens=145, output_tokens=154, reasoning_tokens=128),
        stop="tool_calls",
    ),
    Case(
        "groq/kimi-k2-parallel-tool-calls.sse",
        text="I'll perform both addition and multiplication on the numbers 2 and 3 for you.",
        calls=[("functions.add:0", *ADD_AND_MULTIPLY[0]), ("functions.multiply:1", *ADD_AND_MULTIPLY[1])],
        usage=Usage(input_tokens=201, output_tokens=58),
        stop="tool_calls",
    ),
    Case(
        "groq/gpt-oss-reasoning-tool-call.sse",
        calls=[("fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name", {"name": "example"})],
        usage=Usage(input_tokens=304, output_tokens=49, reasoning_tokens=23),
        stop="tool_calls",
        reasoning=_reasoning,
    ),
    Case("groq/gpt-oss-tool-use-failed-error.sse", error_status=400),
    Case("groq/gpt-oss-tool-choice-required-error.sse", error_status=400),
    Case(
        "mistral/magistral-reasoning-parts.sse",
        text="2 + 2 = 4",
        usage=Usage(input_tokens=10, output_tokens=46),
        stop="stop",
        reasoning=_mistral_thinking,
    ),
    Case(
        "mistral/magistral-thinking-then-text.sse",
        text="",  # checked against the recording's string content below
        usage=Usage(input_tokens=10, output_tokens=232),
        stop="stop",
        reasoning=_mistral_thinking,
    ),
    Case(
        "mistral/mistral-small-tool-call.sse",
        calls=[("gSIMJiOkT", "weather", {"location": "San Francisco"})],
        usage=Usage(input_tokens=124, output_tokens=22),
        stop="tool_calls",
    ),
    Case(
        "deepseek/reasoner-text.sse",
        text="Hello there! 😊 How can I help you today?",
        usage=Usage(input_tokens=6, output_tokens=212, reasoning_tokens=198),
        stop="stop",
        reasoning=_reasoning_content,
    ),
    Case(
        "deepseek/reasoner-tool-call.sse",
        calls=[("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})],
        usage=Usage(input_tokens=339, output_tokens=83, cache_read_tokens=320, reasoning_tokens=39),
        stop="tool_calls",
        reasoning=_reasoning_content,
    ),
    Case(
        "openrouter/claude-haiku-parallel-tool-calls.sse",
        calls=[
            ("toolu_bdrk_01L6Xsux1sqgXSsd2xi64poF", *ADD_AND_MULTIPLY[0]),
            ("toolu_bdrk_014pCKe2FHbyMZerLY1JxG4a", *ADD_AND_MULTIPLY[1]),
        ],
        usage=Usage(input_tokens=685, output_tokens=120),
        stop="tool_calls",
    ),
    Case(
        "openrouter/claude-sonnet-reasoning.sse",
        text="2 + 2 = 4",
        usage=Usage(input_tokens=43, output_tokens=36, reasoning_tokens=13),
        stop="stop",
        reasoning=_reasoning,
    ),
    Case(
        "openrouter/grok-reasoning-parallel-tool-calls.sse",
        calls=[("call_67055809", *ADD_AND_MULTIPLY[0]), ("call_54693838", *ADD_AND_MULTIPLY[1])],
        usage=Usage(input_tokens=441, output_tokens=267, cache_read_tokens=153, reasoning_tokens=199),
        stop="tool_calls",
        reasoning=_reasoning,
    ),
    Case("openrouter/minimax-stream-error.sse", error_status=400),
    Case(
        "alibaba/qwen3-max-tool-call-empty-id.sse",
        calls=[("call_eee11723464a4b9eb8cee71d", "weather", {"location": "San Francisco"})],
        usage=Usage(input_tokens=295, output_tokens=22),
        stop="tool_calls",
    ),
    Case(
        "local/llamacpp-gpt-oss-text.sse",
        text="Olá!",
        usage=Usage(input_tokens=84, output_tokens=57),
        stop="stop",
        reasoning=_reasoning_content,
    ),
    Case(
        "local/llamacpp-gpt-oss-tool-call.sse",
        calls=[("g2KOIWzn722hzEaZQmNVP4roUPEiYafL", "weather", {"location": "Florence, Italy"})],
        usage=Usage(input_tokens=139, output_tokens=41),
        stop="tool_calls",
        reasoning=_reasoning_content,
    ),
]


def deltas_of(body: bytes) -> list[dict[str, Any]]:
    """Choice 0's delta of every JSON chunk in a recording (a plain walk, not the adapter)."""
    deltas = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line[6:].strip() not in ("", "[DONE]"):
            for choice in json.loads(line[6:]).get("choices") or []:
                deltas.append(choice.get("delta") or {})
    return deltas


def split(body: bytes, mode: str) -> list[bytes]:
    if mode == "whole":
        return [body]
    if mode == "lines":
        return body.splitlines(keepends=True)
    return [body[i : i + 7] for i in range(0, len(body), 7)]


async def replay(server: LoopbackServer, case: Case, mode: str) -> tuple[ModelResponse | ProviderHTTPError, list[str]]:
    body = (RECORDINGS / case.path).read_bytes()
    sidecar = json.loads((RECORDINGS / case.path).with_suffix(".json").read_text())
    tools = [
        ToolSpec(name=tool["function"]["name"], description="")
        for tool in ((sidecar.get("request") or {}).get("tools") or [])
    ]
    profile = ModelProfile(name="t", provider="openai", model=sidecar["model"], base_url=f"{server.url}/v1")
    request = ModelRequest(profile=profile, messages=[Message(role="user", text="Hi")], tools=tools)
    server.reply(Reply(headers={"Content-Type": sidecar["content_type"]}, chunks=split(body, mode)))
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    try:
        return await OpenAIProvider(profile, None).complete(request, on_delta), deltas
    except ProviderHTTPError as e:
        return e, deltas


@pytest.mark.parametrize("mode", ["whole", "lines", "7-bytes"])
@pytest.mark.parametrize("case", CASES, ids=[c.path for c in CASES])
async def test_a_recorded_stream_decodes_to_its_answer_calls_usage_and_reasoning(
    server: LoopbackServer, case: Case, mode: str
) -> None:
    result, deltas = await replay(server, case, mode)

    if case.error_status is not None:
        assert isinstance(result, ProviderHTTPError)
        assert result.status == case.error_status
        assert application_error_from(result).non_retryable is True
        return
    assert isinstance(result, ModelResponse)
    body = (RECORDINGS / case.path).read_bytes()
    text = case.text or "".join(d["content"] for d in deltas_of(body) if isinstance(d.get("content"), str))
    assert result.text == text
    assert "".join(deltas) == text
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == case.calls
    assert result.usage == case.usage
    assert result.stop_reason == case.stop
    if case.reasoning is None:
        assert result.reasoning == []
    else:
        expected = "".join(case.reasoning(d) or "" for d in deltas_of(body))
        assert expected
        assert [(b.type, b.provider, b.text) for b in result.reasoning] == [("reasoning", "openai", expected)]
        assert not any(expected[:20] in d for d in deltas)


async def test_groq_answer_text_streamed_before_an_in_stream_error_reached_on_delta(server: LoopbackServer) -> None:
    result, deltas = await replay(server, Case("groq/gpt-oss-tool-choice-required-error.sse"), "lines")

    assert isinstance(result, ProviderHTTPError)
    assert deltas == ["maybe"]
    assert json.loads(result.body)["error"]["code"] == "tool_use_failed"


async def test_openrouter_usage_beside_a_mid_stream_error_is_kept_as_partial_usage(server: LoopbackServer) -> None:
    result, _ = await replay(server, Case("openrouter/minimax-stream-error.sse"), "whole")

    assert isinstance(result, ProviderHTTPError)
    assert result.partial_usage == Usage(input_tokens=43, output_tokens=10, reasoning_tokens=11)
    assert "Token limit reached" in result.body
