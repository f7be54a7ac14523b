"""Adapter for Anthropic's Messages API, streamed: thinking kept and sent back, prompt caching, strict event parsing."""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentrt.activities.providers._base import (
    NotAnEventObject,
    OnDelta,
    ToolNames,
    check_api_key,
    deadline,
    event_object,
    is_token_count,
    stream_sse,
    tool_call_from_text,
    valid_text,
    wire_arguments,
    with_distinct_ids,
)
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTransportError,
    ReasoningBlock,
    Usage,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
PROVIDER = "anthropic"

# Error types of https://docs.anthropic.com/en/api/errors and the HTTP status each one
# comes with, for ``error`` events that arrive inside a 200 stream.
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# "You can define up to 4 cache breakpoints" (prompt-caching guide).
MAX_CACHE_BREAKPOINTS = 4


# Blocks that may not carry ``cache_control`` ("thinking blocks cannot be explicitly marked").
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

# Content block kinds this adapter reads; any other kind (server tools, compaction, kinds
# added later) is skipped with its deltas, as the API's versioning policy allows.
_KNOWN_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})

# Delta type → the block kind it belongs to and the field carrying its payload.
_DELTAS = {
    "text_delta": ("text", "text"),
    "input_json_delta": ("tool_use", "partial_json"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("thinking", "signature"),
    "citations_delta": ("text", "citation"),
}

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

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
        stream = _MessageStream(self.profile.model, self.url)
        try:
            async with deadline(self.url, self.profile.timeout_seconds):
                events = stream_sse(
                    self.url,
                    headers=self.headers(),
                    body=body,
                    timeout_seconds=self.profile.timeout_seconds,
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


# --- reading the stream ------------------------------------------------------------------


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    data: str = ""
    start_input: dict[str, Any] | None = None
    closed: bool = False


class _MessageStream:
    """The state of one streamed message, fed one event at a time; raises typed errors only."""

    def __init__(self, model: str, url: str) -> None:
        self.model = model
        self.url = url
        self.blocks: dict[int, _Block] = {}
        self.counts = dict.fromkeys((*_USAGE_KEYS, "thinking_tokens"), 0)
        self.stop_reason: str | None = None
        self.stopped = False
        self._line = ""

    def usage(self) -> Usage:
        c = self.counts
        read, write = c["cache_read_input_tokens"], c["cache_creation_input_tokens"]
        return Usage(
            input_tokens=c["input_tokens"] + read + write,
            output_tokens=c["output_tokens"],
            cache_read_tokens=read,
            cache_write_tokens=write,
            reasoning_tokens=min(c["thinking_tokens"], c["output_tokens"]),
        )

    def fail(self, reason: str) -> ProviderProtocolError:
        return ProviderProtocolError(PROVIDER, self.model, self.url, self._line, reason)

    def feed(self, event_name: str, raw: str) -> str | None:
        """Take one event's data; returns answer text to stream (a ``text_delta``), else None."""
        self._line = raw
        try:
            data = event_object(raw)
        except NotAnEventObject as e:
            raise self.fail(str(e)) from e
        kind = data.get("type", event_name)
        if not isinstance(kind, str):
            raise self.fail("type is not a string")
        if kind == "message_start":
            message = self._object(data, "message")
            self._read_usage(message.get("usage"))
        elif kind == "content_block_start":
            self._start_block(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "content_block_stop":
            self._block(data).closed = True
        elif kind == "message_delta":
            delta = self._object(data, "delta", optional=True)
            stop_reason = delta.get("stop_reason")
            if stop_reason is not None and not isinstance(stop_reason, str):
                raise self.fail("delta.stop_reason is not a string")
            self.stop_reason = valid_text(stop_reason) if stop_reason else self.stop_reason
            self._read_usage(data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            error = self._object(data, "error")
            error_type = self._string(error, "type", "error.type")
            raise ProviderHTTPError(ERROR_TYPE_STATUS.get(error_type, 500), self.url, raw)
        # ping and event types added after this adapter was written need nothing.
        return None

    def _start_block(self, data: dict[str, Any]) -> None:
        index = self._index(data)
        if index in self.blocks:
            raise self.fail(f"content block {index} started twice")
        start = self._object(data, "content_block")
        kind = self._string(start, "type", "content_block.type")
        block = _Block(kind=kind)
        if kind == "text":
            block.text.append(self._string(start, "text", "content_block.text", default=""))
        elif kind == "thinking":
            block.text.append(self._string(start, "thinking", "content_block.thinking", default=""))
            block.signature.append(self._string(start, "signature", "content_block.signature", default=""))
        elif kind == "redacted_thinking":
            block.data = self._string(start, "data", "content_block.data")
        elif kind == "tool_use":
            block.id = self._string(start, "id", "content_block.id")
            block.name = self._string(start, "name", "content_block.name")
            block.start_input = self._object(start, "input", "content_block.input", optional=True)
        self.blocks[index] = block

    def _delta(self, data: dict[str, Any]) -> str | None:
        block = self._block(data)
        delta = self._object(data, "delta")
        delta_type = self._string(delta, "type", "delta.type")
        if delta_type not in _DELTAS or block.kind not in _KNOWN_BLOCKS:
            return None
        if block.closed:
            raise self.fail(f"{delta_type} after content_block_stop")
        kind, key = _DELTAS[delta_type]
        if block.kind != kind:
            raise self.fail(f"{delta_type} for a {block.kind} block")
        if delta_type == "citations_delta":
            self._object(delta, key, f"delta.{key}")
            return None
        piece = self._string(delta, key, f"delta.{key}")
        if delta_type == "signature_delta":
            block.signature.append(piece)
            return None
        block.text.append(piece)
        return piece if delta_type == "text_delta" else None

    def _read_usage(self, usage: Any) -> None:
        if usage is None:
            return
        if not isinstance(usage, dict):
            raise self.fail("usage is not an object")
        for key in _USAGE_KEYS:
            value = usage.get(key)
            if value is None:
                continue
            self.counts[key] = self._count(value, f"usage.{key}")
        details = usage.get("output_tokens_details")
        if details is None:
            return
        if not isinstance(details, dict):
            raise self.fail("usage.output_tokens_details is not an object")
        thinking = details.get("thinking_tokens")
        if thinking is not None:
            self.counts["thinking_tokens"] = self._count(thinking, "usage.output_tokens_details.thinking_tokens")

    def _count(self, value: Any, where: str) -> int:
        if not is_token_count(value):
            raise self.fail(f"{where} is not a token count")
        return value

    def _block(self, data: dict[str, Any]) -> _Block:
        index = self._index(data)
        block = self.blocks.get(index)
        if block is None:
            raise self.fail(f"content block {index} was never started")
        return block

    def _index(self, data: dict[str, Any]) -> int:
        index = data.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise self.fail("index is not a non-negative integer")
        return index

    def _object(self, data: dict[str, Any], key: str, where: str = "", *, optional: bool = False) -> dict[str, Any]:
        value = data.get(key)
        if value is None and optional:
            return {}
        if not isinstance(value, dict):
            raise self.fail(f"{where or key} is not an object")
        return value

    def _string(self, data: dict[str, Any], key: str, where: str, *, default: str | None = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise self.fail(f"{where} is not a string")
        return valid_text(value)

    def response(self, names: ToolNames) -> ModelResponse:
        ordered = [block for _, block in sorted(self.blocks.items())]
        reasoning: list[ReasoningBlock] = []
        tool_calls = []
        for block in ordered:
            if block.kind == "thinking":
                reasoning.append(
                    ReasoningBlock(
                        type="thinking",
                        provider=PROVIDER,
                        text="".join(block.text),
                        signature="".join(block.signature) or None,
                    )
                )
            elif block.kind == "redacted_thinking":
                reasoning.append(ReasoningBlock(type="redacted_thinking", provider=PROVIDER, data=block.data))
            elif block.kind == "tool_use":
                raw = "".join(block.text)
                if not raw and block.start_input:
                    raw = json.dumps(block.start_input)
                tool_calls.append(tool_call_from_text(block.id, names.to_name(block.name), raw))
        return ModelResponse(
            text="".join("".join(b.text) for b in ordered if b.kind == "text"),
            tool_calls=with_distinct_ids(tool_calls),
            usage=self.usage(),
            stop_reason=self.stop_reason,
            reasoning=reasoning,
        )


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
