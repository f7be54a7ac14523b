"""Adapter for Anthropic's Messages API, streamed: thinking kept and sent back, prompt caching, strict event parsing.
Here: the request (body, cache breakpoints, messages on the wire) and the call; the stream is read by
``_anthropic_stream.MessageStream``."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import httpx

from agentrt.activities.providers._anthropic_stream import ERROR_TYPE_STATUS, PROVIDER, MessageStream
from agentrt.activities.providers._base import (
    OnDelta,
    ToolNames,
    check_api_key,
    deadline,
    offers_output_tool,
    stream_sse,
    wire_arguments,
)
from agentrt.schemas import OUTPUT_TOOL, Message, ModelProfile, ModelRequest, ModelResponse, ProviderError, ProviderTransportError

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"

# "You can define up to 4 cache breakpoints" (prompt-caching guide).
MAX_CACHE_BREAKPOINTS = 4

# Blocks that may not carry ``cache_control`` ("thinking blocks cannot be explicitly marked").
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_BASE_URL",
    "ERROR_TYPE_STATUS",
    "MAX_CACHE_BREAKPOINTS",
    "AnthropicProvider",
    "to_wire_messages",
]


class AnthropicProvider:
    """Streams one Messages call: ``POST {base_url}/v1/messages`` with ``stream: true``.

    - ``base_url``: ``profile.base_url`` or ``https://api.anthropic.com``; headers
      ``x-api-key`` and ``anthropic-version: 2023-06-01``.
    - Request: ``model``, ``max_tokens`` (``profile.max_output_tokens``, tokens), ``system``
      as a list of one text block, ``messages`` (see ``to_wire_messages``), ``tools`` as
      ``{name, description, input_schema}`` with wire-safe names, ``temperature`` when set.
    - Extended thinking: when ``profile.thinking_budget_tokens`` is set the request carries
      ``thinking: {"type": "enabled", "budget_tokens": N}`` and no ``temperature`` (the API
      refuses a temperature with thinking; ``max_tokens`` exceeds the budget, the profile
      checks it). Earlier assistant messages then open with their own ``thinking`` /
      ``redacted_thinking`` blocks, unchanged ("preserving thinking blocks" during tool
      use). Without thinking, no thinking block is sent: the API would ignore earlier
      turns' blocks, and they only make the request bigger.
    - Structured output: a call with an output spec offers the output tool ``final_result``
      (its ``input_schema`` the spec's schema; the activity adds it) and forces a tool call:
      ``tool_choice: {"type": "tool", "name": "final_result"}`` when it is the only tool,
      ``{"type": "any"}`` beside others; with thinking no ``tool_choice`` (the API refuses a
      forced tool then) and the model is told by the tool's description.
    - Prompt caching (``profile.prompt_cache``: ``5m`` default, ``1h``, ``off``):
      ``cache_control: {"type": "ephemeral"}`` (with ``"ttl": "1h"`` for ``1h``) on the
      system block, the last tool, the last block of the last message (the conversation so
      far) and the last block of the message before the last assistant reply (where the
      previous call put its breakpoint, so a long tool round still reads the cache whatever
      the 20-block lookback). At most ``MAX_CACHE_BREAKPOINTS`` (4); none for ``off``;
      never on a thinking block.
    - Events, in stream order: ``message_start`` (``message.usage``), ``content_block_start``
      (``text``; ``tool_use`` with ``id``/``name``; ``thinking`` with ``thinking`` and
      ``signature``; ``redacted_thinking`` with ``data``), ``content_block_delta``
      (``text_delta`` → answer text and ``on_delta``; ``input_json_delta`` ``partial_json``
      joined per block; ``thinking_delta`` and ``signature_delta`` joined into the block's
      reasoning, never into the answer nor ``on_delta``; ``citations_delta`` read and
      dropped), ``content_block_stop``, ``message_delta`` (``stop_reason``; cumulative
      ``usage``: each count it carries replaces the one before), ``message_stop`` (end),
      ``ping``, ``error``. Event types not listed are skipped, as messages-streaming asks
      ("handle unknown event types gracefully"); so are block kinds other than text,
      tool_use, thinking and redacted_thinking (server tools, compaction) with their deltas,
      and delta types not listed, which the API adds over time (versioning).
    - Response: ``text`` (text blocks joined), ``tool_calls``, ``reasoning`` (one
      ``ReasoningBlock`` per thinking / redacted_thinking block, ``provider="anthropic"``,
      in block order), ``stop_reason`` and ``usage``: ``input_tokens`` = ``input_tokens`` +
      ``cache_read_input_tokens`` + ``cache_creation_input_tokens``, ``cache_read_tokens``
      = ``cache_read_input_tokens``, ``cache_write_tokens`` = ``cache_creation_input_tokens``,
      ``output_tokens``, ``reasoning_tokens`` = ``output_tokens_details.thinking_tokens``
      when the usage carries it (newer streams do), else 0 (tokens).
    - Errors: ``ProviderHTTPError`` for a non-2xx status, or an ``error`` event inside the
      stream, whose ``error.type`` gives the status (``overloaded_error`` → 529, see
      ``ERROR_TYPE_STATUS``; an unknown type → 500) and whose data is the body (at most
      4,096 characters); ``ProviderProtocolError`` for event data that is not a JSON object
      or a listed event whose fields have the wrong type (``index`` not an int,
      ``content_block`` / ``delta`` / ``usage`` not an object, ``partial_json`` not a
      string, a token count not an int in 0..2**53-1 ...), a delta or stop for a block never
      started, or a block started twice; ``ProviderTransportError`` when the stream ends
      before ``message_stop``. Every error carries the usage reported so far in
      ``partial_usage``.

    Sources: https://docs.anthropic.com/en/api/messages,
    https://docs.anthropic.com/en/api/messages-streaming,
    https://docs.anthropic.com/en/api/errors,
    https://docs.anthropic.com/en/api/versioning,
    https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking and
    https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
    """

    def __init__(self, profile: ModelProfile, api_key: str | None, *, client: httpx.AsyncClient | None = None) -> None:
        check_api_key(profile, api_key)
        self.profile = profile
        self.api_key = api_key
        self.base_url = (profile.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/v1/messages"
        self._client = client

    def request_body(self, request: ModelRequest, names: ToolNames) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so the wire shape can be inspected)."""
        thinking = self.profile.thinking_budget_tokens
        system, messages = to_wire_messages(request.system, request.messages, names, thinking=thinking is not None)
        body: dict[str, Any] = {
            "model": self.profile.model,
            "max_tokens": self.profile.max_output_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            body["system"] = [{"type": "text", "text": system}]
        if thinking is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
        elif self.profile.temperature is not None:
            body["temperature"] = self.profile.temperature
        if request.tools:
            body["tools"] = [
                {"name": names.to_wire(tool.name), "description": tool.description, "input_schema": tool.parameters}
                for tool in request.tools
            ]
            if offers_output_tool(request) and thinking is None:
                # The answer must be the output tool's call (the API refuses a forced tool with thinking).
                only = len(request.tools) == 1
                body["tool_choice"] = {"type": "tool", "name": OUTPUT_TOOL} if only else {"type": "any"}
        _mark_cache_breakpoints(body, self.profile.prompt_cache)
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        names = ToolNames(tool.name for tool in request.tools)
        body = self.request_body(request, names)
        stream = MessageStream(self.profile.model, self.url)
        try:
            async with deadline(self.url, self.profile.timeout_seconds):
                events = stream_sse(
                    self.url,
                    headers=self.headers(),
                    body=body,
                    timeout_seconds=self.profile.timeout_seconds,
                    idle_timeout_seconds=self.profile.stream_idle_timeout_seconds,
                    client=self._client,
                )
                async with aclosing(events):
                    async for event in events:
                        if not event.data.strip():
                            continue
                        text = stream.feed(event.event, event.data)
                        if text and on_delta is not None:
                            await on_delta(text)
                        if stream.stopped:
                            break
        except ProviderError as err:
            # Usage the provider reported before the failure (message_start carries input tokens).
            err.partial_usage = stream.usage()
            raise
        if not stream.stopped:
            err = ProviderTransportError(self.url, "stream ended before message_stop")
            err.partial_usage = stream.usage()
            raise err
        return stream.response(names)


# --- the request -------------------------------------------------------------------------


def _mark_cache_breakpoints(body: dict[str, Any], ttl: str) -> None:
    """Put ``cache_control`` on the system block, the last tool, the end of the conversation and
    the end of the previous call's conversation, at most ``MAX_CACHE_BREAKPOINTS``; nothing for ``off``."""
    if ttl == "off":
        return
    marks: list[dict[str, Any]] = []
    if body.get("system"):
        marks.append(body["system"][-1])
    if body.get("tools"):
        marks.append(body["tools"][-1])
    messages: list[dict[str, Any]] = body["messages"]
    last = _cacheable_block(messages[-1]) if messages else None
    if last is not None:
        marks.append(last)
    # The previous call ended with the message before the last assistant reply and put its
    # breakpoint on that message's last block: marking it again reads that cache entry
    # exactly, however many blocks the reply and its tool results added since.
    assistant_at = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
    if assistant_at > 0:
        previous = _cacheable_block(messages[assistant_at - 1])
        if previous is not None and previous is not last:
            marks.append(previous)
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl == "1h":
        control["ttl"] = "1h"
    for block in marks[:MAX_CACHE_BREAKPOINTS]:
        block["cache_control"] = dict(control)


def _cacheable_block(message: dict[str, Any]) -> dict[str, Any] | None:
    for block in reversed(message["content"]):
        if block["type"] not in _UNCACHEABLE:
            return block
    return None


def _reasoning_blocks(message: Message) -> list[dict[str, Any]]:
    """The message's Anthropic thinking blocks as the API wants them back, unchanged.

    A ``thinking`` block without a signature is left out: the API refuses one, and only a
    stream cut before its ``signature_delta`` could produce it. Blocks of other providers
    are never sent.
    """
    blocks: list[dict[str, Any]] = []
    for block in message.reasoning:
        if block.provider != PROVIDER:
            continue
        if block.type == "thinking" and block.signature:
            blocks.append({"type": "thinking", "thinking": block.text, "signature": block.signature})
        elif block.type == "redacted_thinking" and block.data:
            blocks.append({"type": "redacted_thinking", "data": block.data})
    return blocks


def to_wire_messages(
    system: str | None, messages: list[Message], names: ToolNames, *, thinking: bool = False
) -> tuple[str | None, list[dict[str, Any]]]:
    """agentrt messages as Messages-API ``(system, messages)``.

    ``system`` messages join the top-level ``system`` text. ``user`` → a ``text`` block;
    ``assistant`` → with ``thinking``, its Anthropic ``thinking`` (``thinking``,
    ``signature``) and ``redacted_thinking`` (``data``) blocks first, then a ``text`` block
    (when non-empty) and ``tool_use`` blocks (``id``, ``name``, ``input``); ``tool`` → a
    ``tool_result`` block (``tool_use_id``, ``content``, ``is_error``) in a ``user``
    message. Consecutive messages of one role are merged into one message, so consecutive
    tool results become ONE user message and a user text that follows them joins it. An
    assistant message with nothing to say is left out.
    """
    systems = [system] if system else []
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "system":
            if message.text:
                systems.append(message.text)
        elif message.role == "user":
            add("user", [{"type": "text", "text": message.text}] if message.text else [])
        elif message.role == "assistant":
            blocks = _reasoning_blocks(message) if thinking else []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks += [
                {"type": "tool_use", "id": call.id, "name": names.to_wire(call.name), "input": wire_arguments(call)}
                for call in message.tool_calls
            ]
            add("assistant", blocks)
        else:
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id or "",
                        "content": message.text,
                        "is_error": message.is_error,
                    }
                ],
            )
    return ("\n\n".join(systems) or None), wire
