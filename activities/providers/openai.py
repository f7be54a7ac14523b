"""Adapter for OpenAI Chat Completions and every server that speaks it (vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

import json
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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
    ProviderHTTPError,
    ProviderTransportError,
    Usage,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"

__all__ = ["DEFAULT_BASE_URL", "OpenAIProvider"]


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIProvider:
    """Streams one Chat Completion: ``POST {base_url}/chat/completions`` with ``stream: true``.

    - ``base_url``: ``profile.base_url`` or ``https://api.openai.com/v1``; ``api_key`` goes in
      ``Authorization: Bearer`` (omitted when None, for local servers).
    - Request: ``model``, ``messages`` (see ``to_wire_messages``), ``tools`` as
      ``{"type": "function", "function": {name, description, parameters}}`` with wire-safe
      names, ``stream_options: {"include_usage": true}``, the output bound
      (``profile.max_output_tokens``, tokens) as ``max_completion_tokens`` for
      api.openai.com and as ``max_tokens`` for compatible servers, which mostly know only
      that one; ``temperature`` when the profile sets it.
    - Response: text deltas (each passed to ``on_delta``), tool calls whose ``arguments``
      arrive in pieces keyed by ``index``, ``usage`` from the last chunk
      (``prompt_tokens``/``completion_tokens``), ``finish_reason`` as ``stop_reason``; the
      stream ends at ``data: [DONE]``.
    - Errors: ``ProviderHTTPError`` for a non-2xx status or an ``{"error": ...}`` chunk;
      ``ProviderTransportError`` when no complete answer arrives.

    Sources: https://platform.openai.com/docs/api-reference/chat/create and
    https://platform.openai.com/docs/api-reference/chat/streaming
    """

    def __init__(self, profile: ModelProfile, api_key: str | None, *, client: httpx.AsyncClient | None = None) -> None:
        self.profile = profile
        self.api_key = api_key
        self.base_url = (profile.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self._client = client

    def request_body(self, request: ModelRequest, names: ToolNames) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so the wire shape can be inspected)."""
        body: dict[str, Any] = {
            "model": self.profile.model,
            "messages": to_wire_messages(request.system, request.messages, names),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if urlsplit(self.base_url).hostname == "api.openai.com":
            body["max_completion_tokens"] = self.profile.max_output_tokens
        else:
            body["max_tokens"] = self.profile.max_output_tokens
        if self.profile.temperature is not None:
            body["temperature"] = self.profile.temperature
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": names.to_wire(tool.name),
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        names = ToolNames(tool.name for tool in request.tools)
        body = self.request_body(request, names)
        text: list[str] = []
        calls: dict[int, _PendingCall] = {}
        usage = Usage()
        finish_reason: str | None = None
        done = False
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
                    if event.data.strip() == "[DONE]":
                        done = True
                        break
                    if not event.data.strip():
                        continue
                    chunk = load_event_json(self.url, event)
                    if chunk.get("error"):
                        raise _stream_error(self.url, chunk)
                    if chunk.get("usage"):
                        usage = Usage(
                            input_tokens=int(chunk["usage"].get("prompt_tokens") or 0),
                            output_tokens=int(chunk["usage"].get("completion_tokens") or 0),
                        )
                    for choice in chunk.get("choices") or []:
                        if choice.get("index", 0) != 0:
                            continue
                        delta = choice.get("delta") or {}
                        content = delta.get("content")
                        if content:
                            text.append(content)
                            if on_delta is not None:
                                await on_delta(content)
                        for piece in delta.get("tool_calls") or []:
                            pending = calls.setdefault(int(piece.get("index", 0)), _PendingCall())
                            pending.id = piece.get("id") or pending.id
                            function = piece.get("function") or {}
                            pending.name = function.get("name") or pending.name
                            if function.get("arguments"):
                                pending.arguments.append(function["arguments"])
                        if choice.get("finish_reason"):
                            finish_reason = choice["finish_reason"]
        if not done and finish_reason is None:
            raise ProviderTransportError(self.url, "stream ended before the completion finished")
        tool_calls = [
            tool_call_from_text(pending.id or f"call_{index}", names.to_name(pending.name), "".join(pending.arguments))
            for index, pending in sorted(calls.items())
        ]
        return ModelResponse(text="".join(text), tool_calls=tool_calls, usage=usage, stop_reason=finish_reason)


def to_wire_messages(system: str | None, messages: list[Message], names: ToolNames) -> list[dict[str, Any]]:
    """agentrt messages as Chat Completions messages.

    ``system`` (and ``system`` messages) → ``{"role": "system"}``; ``user`` → ``{"role":
    "user", "content"}``; ``assistant`` → ``content`` (null when empty and there are tool
    calls) and ``tool_calls: [{"id", "type": "function", "function": {"name", "arguments":
    JSON text}}]``; ``tool`` → ``{"role": "tool", "tool_call_id", "content"}``.
    """
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        if message.role in ("system", "user"):
            wire.append({"role": message.role, "content": message.text})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": names.to_wire(call.name), "arguments": json.dumps(wire_arguments(call))},
                    }
                    for call in message.tool_calls
                ]
            else:
                entry["content"] = message.text
            wire.append(entry)
        else:
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text})
    return wire


def _stream_error(url: str, chunk: dict[str, Any]) -> ProviderHTTPError:
    """An ``{"error": ...}`` chunk inside a 200 stream (sent by some compatible servers).

    Its ``code`` is the status when it is a 4xx/5xx number, else 500 (retryable).
    """
    error = chunk.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 500
    if not 400 <= status <= 599:
        status = 500
    return ProviderHTTPError(status, url, json.dumps(chunk))
