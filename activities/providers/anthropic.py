"""Adapter for Anthropic's Messages API, streamed."""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentrt.activities.providers._base import (
    OnDelta,
    ToolNames,
    deadline,
    load_event_json,
    stream_sse,
    tool_call_from_text,
    wire_arguments,
)
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ProviderHTTPError,
    ProviderTransportError,
    Usage,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"

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

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider", "DEFAULT_BASE_URL", "ERROR_TYPE_STATUS"]


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    start_input: dict[str, Any] | None = None


class AnthropicProvider:
    """Streams one Messages call: ``POST {base_url}/v1/messages`` with ``stream: true``.

    - ``base_url``: ``profile.base_url`` or ``https://api.anthropic.com``; headers
      ``x-api-key`` and ``anthropic-version: 2023-06-01``.
    - Request: ``model``, ``max_tokens`` (``profile.max_output_tokens``, tokens), top-level
      ``system``, ``messages`` (see ``to_wire_messages``), ``tools`` as ``{name,
      description, input_schema}`` with wire-safe names, ``temperature`` when set.
    - Events: ``message_start`` (``usage.input_tokens``, plus cache read/creation tokens),
      ``content_block_start`` (``text`` or ``tool_use`` with ``id``/``name``),
      ``content_block_delta`` (``text_delta`` → ``on_delta``; ``input_json_delta``
      ``partial_json`` joined per block), ``content_block_stop``, ``message_delta``
      (``stop_reason``, cumulative ``usage.output_tokens``), ``message_stop`` (end),
      ``ping``; other block kinds (thinking) are skipped.
    - Errors: ``ProviderHTTPError`` for a non-2xx status, or an ``error`` event inside the
      stream, whose ``error.type`` gives the status (``overloaded_error`` → 529, see
      ``ERROR_TYPE_STATUS``); ``ProviderTransportError`` when the stream ends before
      ``message_stop`` or no answer arrives.

    Sources: https://docs.anthropic.com/en/api/messages,
    https://docs.anthropic.com/en/api/messages-streaming and
    https://docs.anthropic.com/en/api/errors
    """

    def __init__(self, profile: ModelProfile, api_key: str | None, *, client: httpx.AsyncClient | None = None) -> None:
        self.profile = profile
        self.api_key = api_key
        self.base_url = (profile.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/v1/messages"
        self._client = client

    def request_body(self, request: ModelRequest, names: ToolNames) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so the wire shape can be inspected)."""
        system, messages = to_wire_messages(request.system, request.messages, names)
        body: dict[str, Any] = {
            "model": self.profile.model,
            "max_tokens": self.profile.max_output_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            body["system"] = system
        if self.profile.temperature is not None:
            body["temperature"] = self.profile.temperature
        if request.tools:
            body["tools"] = [
                {"name": names.to_wire(tool.name), "description": tool.description, "input_schema": tool.parameters}
                for tool in request.tools
            ]
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        names = ToolNames(tool.name for tool in request.tools)
        body = self.request_body(request, names)
        blocks: dict[int, _Block] = {}
        input_tokens = 0
        output_tokens = 0
        stop_reason: str | None = None
        stopped = False
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
                        data = load_event_json(self.url, event)
                        kind = data.get("type") or event.event
                        if kind == "message_start":
                            usage = (data.get("message") or {}).get("usage") or {}
                            input_tokens = _input_tokens(usage)
                            output_tokens = int(usage.get("output_tokens") or 0)
                        elif kind == "content_block_start":
                            block = data.get("content_block") or {}
                            blocks[int(data.get("index", len(blocks)))] = _Block(
                                kind=str(block.get("type", "")),
                                id=str(block.get("id", "")),
                                name=str(block.get("name", "")),
                                start_input=block.get("input") if isinstance(block.get("input"), dict) else None,
                                text=[block["text"]] if block.get("text") else [],
                            )
                        elif kind == "content_block_delta":
                            target = blocks.get(int(data.get("index", -1)))
                            delta = data.get("delta") or {}
                            if target is None:
                                continue
                            if delta.get("type") == "text_delta" and target.kind == "text" and delta.get("text"):
                                target.text.append(delta["text"])
                                if on_delta is not None:
                                    await on_delta(delta["text"])
                            elif delta.get("type") == "input_json_delta" and target.kind == "tool_use":
                                target.text.append(delta.get("partial_json") or "")
                        elif kind == "message_delta":
                            stop_reason = (data.get("delta") or {}).get("stop_reason") or stop_reason
                            usage = data.get("usage") or {}
                            if usage.get("output_tokens") is not None:
                                output_tokens = int(usage["output_tokens"])
                            if usage.get("input_tokens") is not None:
                                input_tokens = _input_tokens(usage)
                        elif kind == "message_stop":
                            stopped = True
                            break
                        elif kind == "error":
                            raise _stream_error(self.url, data)
                        # ping, content_block_stop and unknown events need nothing.
        except ProviderError as err:
            # Usage the provider reported before the failure (message_start carries input tokens).
            err.partial_usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
            raise
        if not stopped:
            raise ProviderTransportError(self.url, "stream ended before message_stop")
        text = "".join("".join(b.text) for _, b in sorted(blocks.items()) if b.kind == "text")
        tool_calls = []
        for _, block in sorted(blocks.items()):
            if block.kind != "tool_use":
                continue
            raw = "".join(block.text)
            if not raw and block.start_input:
                raw = json.dumps(block.start_input)
            tool_calls.append(tool_call_from_text(block.id, names.to_name(block.name), raw))
        return ModelResponse(
            text=text,
            tool_calls=tool_calls,
            usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
            stop_reason=stop_reason,
        )


def _input_tokens(usage: dict[str, Any]) -> int:
    """All prompt tokens: uncached plus cache reads and cache writes (Anthropic counts them apart)."""
    return sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _stream_error(url: str, data: dict[str, Any]) -> ProviderHTTPError:
    error = data.get("error")
    error_type = error.get("type") if isinstance(error, dict) else None
    return ProviderHTTPError(ERROR_TYPE_STATUS.get(str(error_type), 500), url, json.dumps(data))


def to_wire_messages(
    system: str | None, messages: list[Message], names: ToolNames
) -> tuple[str | None, list[dict[str, Any]]]:
    """agentrt messages as Messages-API ``(system, messages)``.

    ``system`` messages join the top-level ``system`` text. ``user`` → a ``text`` block;
    ``assistant`` → a ``text`` block (when non-empty) and ``tool_use`` blocks (``id``,
    ``name``, ``input``); ``tool`` → a ``tool_result`` block (``tool_use_id``, ``content``,
    ``is_error``) in a ``user`` message. Consecutive messages of one role are merged into
    one message, so consecutive tool results become ONE user message and a user text
    that follows them joins it. An assistant message with nothing to say is left out.
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
            blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
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
