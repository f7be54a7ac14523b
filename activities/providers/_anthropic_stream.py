"""Reading a Messages API stream (https://docs.anthropic.com/en/api/messages-streaming), one
event at a time, into one ``ModelResponse``: text, ``thinking`` and ``redacted_thinking``
blocks kept as they came (signatures included), tool calls, usage, and ``error`` events inside
a 200 stream as the ``ProviderHTTPError`` their type says. Anything the API does not define
raises ``ProviderProtocolError``; block kinds added later are skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentrt.activities.providers._base import (
    NotAnEventObject,
    ToolNames,
    event_object,
    is_token_count,
    tool_call_from_text,
    valid_text,
    with_distinct_ids,
)
from agentrt.schemas import ModelResponse, ProviderHTTPError, ProviderProtocolError, ReasoningBlock, Usage

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


class MessageStream:
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
