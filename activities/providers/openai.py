"""Adapter for OpenAI Chat Completions and every server that speaks it (Azure, Groq, Mistral,
DeepSeek, OpenRouter, Ollama, vLLM, llama.cpp), decoding each vendor's additions by their rules.
Here: the request (body, headers, messages on the wire) and the call; the stream's decoding is in
``_openai_stream``."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import httpx

from agentrt.activities.providers._base import (
    OnDelta,
    ToolNames,
    check_api_key,
    deadline,
    is_reasoning_family,
    json_schema_format,
    native_output,
    offers_output_tool,
    stream_sse,
    wire_arguments,
)
from agentrt.activities.providers._openai_stream import ChatStreamDecoder, error_object, stream_error
from agentrt.schemas import Message, ModelProfile, ModelRequest, ModelResponse, ProviderTransportError

DEFAULT_BASE_URL = "https://api.openai.com/v1"

__all__ = ["DEFAULT_BASE_URL", "OpenAIProvider"]


class OpenAIProvider:
    """Streams one Chat Completion: ``POST {base_url}/chat/completions`` with ``stream: true``.

    Request
      - ``base_url``: ``profile.base_url`` or ``https://api.openai.com/v1``; ``api_key`` goes in
        ``Authorization: Bearer`` (omitted when None, for local servers).
      - ``model``, ``messages`` (see ``to_wire_messages``; reasoning is never sent back),
        ``stream_options: {"include_usage": true}``, ``tools`` as ``{"type": "function",
        "function": {name, description, parameters}}`` with wire-safe names (``ToolNames``).
      - The output bound (``profile.max_output_tokens``, tokens) goes by model family, not by
        host: ``max_completion_tokens`` for OpenAI reasoning models (names starting ``o1``,
        ``o3``, ``o4``, ``gpt-5``, also behind a prefix such as ``openai/o3-mini``), which refuse
        ``max_tokens``; ``max_tokens`` for every other model, the field compatible servers know.
        ``profile.token_limit_parameter`` overrides the choice (an Azure deployment name says
        nothing about the model behind it).
      - ``temperature`` when the profile sets it, except for the reasoning families: they reject
        any temperature but 1, so it is left out for them.
      - ``reasoning_effort`` when ``profile.reasoning_effort`` is set.
      - A call with an output spec: ``response_format: {"type": "json_schema", "json_schema":
        {name, description, schema, strict}}``; with ``output_mode = "tool"``, the output tool
        ``final_result`` among the tools and ``tool_choice: "required"`` instead.

    Stream (chunks of ``chat.completion.chunk``; only choice 0 is read)
      - Answer text: ``delta.content`` as a string, or as a list of parts (Mistral reasoning
        models): ``{"type": "text", "text"}`` is answer, ``{"type": "thinking", "thinking":
        [{"type": "text", "text"}]}`` is reasoning; another part type is a protocol error (it
        could be reasoning, which must never be shown as the answer). ``delta.refusal`` is answer
        text too. Answer text is passed to ``on_delta`` as it arrives.
      - ``<think>``/``<thinking>`` at the start of the answer (DeepSeek-R1 distills, QwQ, local
        models) is reasoning: held back (only text that may still be a tag is buffered), never
        given to ``on_delta``; the text after the closing tag is the answer. A block still open
        when the stream ends was not reasoning the model finished: its text (tag included)
        becomes answer text.
      - Reasoning: ``delta.reasoning_content`` (DeepSeek, GLM, Qwen on vLLM, llama.cpp),
        ``delta.reasoning`` (OpenRouter, Groq ``reasoning_format=parsed``) and, when neither
        carries text, OpenRouter ``delta.reasoning_details`` (``reasoning.text`` /
        ``reasoning.summary``; ``reasoning.encrypted`` has no text). OpenRouter sends the same
        text in both ``reasoning`` and ``reasoning_details``: one of them is read. Consecutive
        pieces make one ``ReasoningBlock(type="reasoning", provider="openai")``; answer text or a
        tool call in between starts a new block. They are never sent back: DeepSeek answers 400
        when ``reasoning_content`` appears in input messages.
      - Tool calls: pieces of ``delta.tool_calls`` keyed by ``(index, id)``. A piece with a
        non-empty ``id`` different from the current call at its ``index`` starts a new call
        (Ollama, LiteLLM and some gateways send parallel calls all at index 0); a piece with no
        ``id`` or ``"id": ""`` (Qwen) continues the current call at its index. A missing
        ``index`` is 0 (Mistral). A call left without an id, or with one an earlier call has,
        gets a fresh one (``with_distinct_ids``). Calls keep the order they started in; ``arguments`` pieces are
        joined (``tool_call_from_text``); a wire name the request did not offer comes back as
        the model wrote it.
      - Usage from the last chunk carrying it (top-level ``usage``, else Groq ``x_groq.usage``):
        ``prompt_tokens`` → ``input_tokens``, ``completion_tokens`` → ``output_tokens``,
        ``prompt_tokens_details.cached_tokens`` (else DeepSeek ``prompt_cache_hit_tokens``) →
        ``cache_read_tokens``, ``completion_tokens_details.reasoning_tokens`` →
        ``reasoning_tokens``.
      - ``finish_reason`` (on any chunk, repeated or alone) is ``stop_reason``; the stream ends
        at ``data: [DONE]``. Normal and ignored: Azure's first chunk with ``choices: []`` and
        ``prompt_filter_results``, ``content_filter_results``, ``usage: null``, SSE comments
        (``: OPENROUTER PROCESSING``), empty keep-alive events.

    Errors
      - ``ProviderHTTPError``: a non-2xx status; an ``{"error": ...}`` chunk or an ``event:
        error`` event inside the 200 stream (Groq ``tool_use_failed``, OpenRouter mid-stream
        errors). Its status is ``error.status_code`` / ``error.status`` when present, else a
        numeric ``error.code`` (4xx/5xx), else 400 for ``"type": "invalid_request_error"`` and
        500 otherwise; the body kept is the event data (at most 4 KB); ``partial_usage`` is
        the usage reported before (or beside) the error, when there was any.
      - ``ProviderProtocolError`` (not retried): a chunk the API does not define: data that
        is not JSON (other than ``[DONE]``), JSON that is not an object, ``choices`` not a
        list, a choice, ``delta``, tool call or ``function`` not an object, ``tool_calls`` not
        a list, an ``index`` not an integer, ``content``/``name``/``arguments``/``id``/reasoning
        fields of the wrong type, a token count that is not a non-negative integer, a tool call
        that never got a name. ``line`` is the event data.
      - ``ProviderTransportError``: no complete answer (connect failure, timeout, the stream
        closed before ``[DONE]`` or a ``finish_reason``).

    Sources: https://platform.openai.com/docs/api-reference/chat/create,
    https://platform.openai.com/docs/api-reference/chat/streaming,
    https://platform.openai.com/docs/guides/reasoning,
    https://api-docs.deepseek.com/guides/reasoning_model,
    https://api-docs.deepseek.com/guides/kv_cache,
    https://docs.mistral.ai/capabilities/reasoning/,
    https://console.groq.com/docs/errors, https://console.groq.com/docs/reasoning,
    https://openrouter.ai/docs/use-cases/reasoning-tokens,
    https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter.
    """

    def __init__(self, profile: ModelProfile, api_key: str | None, *, client: httpx.AsyncClient | None = None) -> None:
        check_api_key(profile, api_key)
        self.profile = profile
        self.api_key = api_key
        self.base_url = (profile.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self._client = client

    def request_body(self, request: ModelRequest, names: ToolNames) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so the wire shape can be inspected)."""
        profile = self.profile
        reasoning_family = is_reasoning_family(profile.model)
        body: dict[str, Any] = {
            "model": profile.model,
            "messages": to_wire_messages(request.system, request.messages, names),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        limit = profile.token_limit_parameter or ("max_completion_tokens" if reasoning_family else "max_tokens")
        body[limit] = profile.max_output_tokens
        if profile.temperature is not None and not reasoning_family:
            body["temperature"] = profile.temperature
        if profile.reasoning_effort is not None:
            body["reasoning_effort"] = profile.reasoning_effort
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
            if offers_output_tool(request):
                body["tool_choice"] = "required"  # output_mode "tool": the answer is a call of the output tool
        output = native_output(request)
        if output is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": json_schema_format(output)}
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        names = ToolNames(tool.name for tool in request.tools)
        body = self.request_body(request, names)
        decoder = ChatStreamDecoder(self.profile.model, self.url, on_delta)
        done = False
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
                    if event.event == "error":
                        raise stream_error(self.url, event.data, error_object(event.data))
                    data = event.data.strip()
                    if not data:
                        continue
                    if data == "[DONE]":
                        done = True
                        break
                    await decoder.chunk(event.data)
        if not done and decoder.finish_reason is None:
            raise ProviderTransportError(self.url, "stream ended before the completion finished")
        return await decoder.response(names)


def to_wire_messages(system: str | None, messages: list[Message], names: ToolNames) -> list[dict[str, Any]]:
    """agentrt messages as Chat Completions messages.

    ``system`` (and ``system`` messages) → ``{"role": "system"}``; ``user`` → ``{"role":
    "user", "content"}``; ``assistant`` → ``content`` (null when empty and there are tool
    calls) and ``tool_calls: [{"id", "type": "function", "function": {"name", "arguments":
    JSON text}}]``, named by ``names.to_wire``; ``tool`` → ``{"role": "tool", "tool_call_id",
    "content"}``. An assistant message's reasoning goes back only as ``reasoning_content``, and
    only on a message that called tools whose reasoning came as ``reasoning_content``: DeepSeek's
    thinking mode answers 400 without it there ("for turns that do perform tool calls, the
    reasoning_content must be fully passed back to the API in all subsequent requests",
    https://api-docs.deepseek.com/guides/thinking_mode) and ignores it elsewhere, while its older
    deepseek-reasoner (which calls no tools) refused it in any input message
    (https://api-docs.deepseek.com/guides/reasoning_model). Other reasoning (``reasoning``,
    ``<think>`` blocks, Mistral's thinking parts) is never sent.
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
                carried = [
                    block.text for block in message.reasoning
                    if block.provider == "openai" and block.source == "reasoning_content"
                ]
                if carried:
                    entry["reasoning_content"] = "".join(carried)
            else:
                entry["content"] = message.text
            wire.append(entry)
        else:
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text})
    return wire
