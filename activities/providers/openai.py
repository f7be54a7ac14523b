"""Adapter for OpenAI Chat Completions and every server that speaks it (Azure, Groq, Mistral,
DeepSeek, OpenRouter, Ollama, vLLM, llama.cpp), decoding each vendor's additions by their rules."""

from __future__ import annotations

import json
from contextlib import aclosing, suppress
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
    is_reasoning_family,
    is_token_count,
    stream_sse,
    tool_call_from_text,
    valid_text,
    wire_arguments,
    with_distinct_ids,
)
from agentrt.activities.providers._think import ThinkSplitter
from agentrt.schemas import (
    Message,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTransportError,
    ReasoningBlock,
    Usage,
)

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
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        names = ToolNames(tool.name for tool in request.tools)
        body = self.request_body(request, names)
        decoder = _StreamDecoder(self.profile.model, self.url, on_delta)
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
                    if event.event == "error":
                        raise _stream_error(self.url, event.data, _error_object(event.data))
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


@dataclass
class _PendingCall:
    id: str
    line: str  # the event data that started the call, for a protocol error
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamDecoder:
    """The state of one streamed completion: answer text, reasoning blocks, tool calls, usage."""

    def __init__(self, model: str, url: str, on_delta: OnDelta | None) -> None:
        self.model = model
        self.url = url
        self.on_delta = on_delta
        self.finish_reason: str | None = None
        self.usage = Usage()
        self._text: list[str] = []
        self._think = ThinkSplitter()
        self._reasoning: list[list[str]] = []
        self._reasoning_sources: list[str | None] = []  # the wire field each block came in
        self._in_reasoning = False  # the last thing decoded was reasoning: the next piece joins its block
        self._calls: list[_PendingCall] = []
        self._current: dict[int, _PendingCall] = {}  # index -> the call its pieces continue
        self._line = ""

    def _error(self, reason: str) -> ProviderProtocolError:
        return ProviderProtocolError("openai", self.model, self.url, self._line, reason)

    async def chunk(self, data: str) -> None:
        self._line = data
        try:
            chunk = event_object(data)
        except NotAnEventObject as e:
            raise self._error(str(e)) from e
        if chunk.get("error") is not None or chunk.get("object") == "error":
            # ``object: error``: a vLLM-style error object sent as the chunk itself.
            error = _stream_error(self.url, data, chunk["error"] if chunk.get("error") is not None else chunk)
            with suppress(ProviderProtocolError):
                self._usage(chunk)  # OpenRouter reports the usage so far beside the error
            if self.usage != Usage():
                error.partial_usage = self.usage
            raise error
        self._usage(chunk)
        choices = chunk.get("choices")
        if choices is None:
            return
        if not isinstance(choices, list):
            raise self._error(f"choices is a {type(choices).__name__}, not a list")
        for choice in choices:
            if not isinstance(choice, dict):
                raise self._error(f"a choice is a {type(choice).__name__}, not an object")
            if self._index(choice, "choice index") == 0:
                await self._choice(choice)

    async def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if delta is None:
            delta = {}  # Azure's content-filter chunks carry no delta
        if not isinstance(delta, dict):
            raise self._error(f"delta is a {type(delta).__name__}, not an object")
        self._reasoning_fields(delta)
        await self._content(delta.get("content"))
        refusal = delta.get("refusal")
        if refusal is not None:
            await self._answer(self._string(refusal, "refusal"))
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            if not isinstance(tool_calls, list):
                raise self._error(f"tool_calls is a {type(tool_calls).__name__}, not a list")
            for piece in tool_calls:
                self._tool_piece(piece)
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None:
            self.finish_reason = self._string(finish_reason, "finish_reason") or self.finish_reason

    # --- text and reasoning -------------------------------------------------------------

    async def _content(self, content: Any) -> None:
        if content is None:
            return
        if isinstance(content, str):
            await self._answer(valid_text(content))
            return
        if not isinstance(content, list):
            raise self._error(f"content is a {type(content).__name__}, not a string or a list of parts")
        for part in content:
            if not isinstance(part, dict):
                raise self._error(f"a content part is a {type(part).__name__}, not an object")
            kind = part.get("type")
            if kind == "text":
                await self._answer(self._string(part.get("text"), "text part's text"))
            elif kind == "thinking":
                self._thinking(part.get("thinking"))
            else:
                raise self._error(f"content part of unknown type {str(kind)[:40]!r}")

    def _thinking(self, thinking: Any) -> None:
        if thinking is None or isinstance(thinking, str):
            self._add_reasoning(valid_text(thinking or ""))
            return
        if not isinstance(thinking, list):
            raise self._error(f"thinking is a {type(thinking).__name__}, not a list of parts")
        for part in thinking:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise self._error("a thinking part is not a {'type': 'text'} object")
            self._add_reasoning(self._string(part.get("text"), "thinking part's text"))

    def _reasoning_fields(self, delta: dict[str, Any]) -> None:
        texts = [self._string(delta.get(key), key) for key in ("reasoning_content", "reasoning")]
        details = delta.get("reasoning_details")
        if details is not None and not isinstance(details, list):
            raise self._error(f"reasoning_details is a {type(details).__name__}, not a list")
        detail_texts: list[str] = []
        for detail in details or []:
            if not isinstance(detail, dict):
                raise self._error(f"a reasoning detail is a {type(detail).__name__}, not an object")
            kind = detail.get("type")
            if kind == "reasoning.text":
                detail_texts.append(self._string(detail.get("text"), "reasoning detail text"))
            elif kind == "reasoning.summary":
                detail_texts.append(self._string(detail.get("summary"), "reasoning detail summary"))
            # reasoning.encrypted and other detail types carry no readable text.
        # The same text may come in several fields (OpenRouter: reasoning and reasoning_details;
        # vLLM: reasoning_content and reasoning): the first that has any is read.
        for source, text in zip(("reasoning_content", "reasoning", "reasoning_details"), (*texts, "".join(detail_texts))):
            if text:
                self._add_reasoning(text, source=source)
                return

    def _add_reasoning(self, text: str, *, block: bool = False, source: str | None = None) -> None:
        if not text:
            return
        if self._in_reasoning and not block and self._reasoning_sources[-1] == source:
            self._reasoning[-1].append(text)
        else:
            self._reasoning.append([text])
            self._reasoning_sources.append(source)
        self._in_reasoning = not block

    async def _answer(self, text: str) -> None:
        for piece in self._think.feed(text):
            await self._emit(piece.kind, piece.value)

    async def _emit(self, kind: str, value: str) -> None:
        if kind == "reasoning":
            self._add_reasoning(value, block=True)
            return
        self._in_reasoning = False
        self._text.append(value)
        if self.on_delta is not None:
            await self.on_delta(value)

    # --- tool calls ---------------------------------------------------------------------

    def _tool_piece(self, piece: Any) -> None:
        if not isinstance(piece, dict):
            raise self._error(f"a tool call is a {type(piece).__name__}, not an object")
        index = self._index(piece, "tool call index")
        call_id = self._string(piece.get("id"), "tool call id")
        function = piece.get("function")
        if function is None:
            function = {}
        if not isinstance(function, dict):
            raise self._error(f"function is a {type(function).__name__}, not an object")
        name = self._string(function.get("name"), "function name")
        arguments = self._string(function.get("arguments"), "function arguments")
        current = self._current.get(index)
        if current is None or (call_id and current.id and call_id != current.id):
            current = _PendingCall(id=call_id, line=self._line)
            self._calls.append(current)
            self._current[index] = current
        elif call_id and not current.id:
            current.id = call_id
        if name:
            current.name = name
        if arguments:
            current.arguments.append(arguments)
        self._in_reasoning = False

    # --- shapes -------------------------------------------------------------------------

    def _string(self, value: Any, what: str) -> str:
        """``value`` as text (lone surrogates replaced): None is empty, any other non-string is a protocol error."""
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._error(f"{what} is a {type(value).__name__}, not a string")
        return valid_text(value)

    def _index(self, obj: dict[str, Any], what: str) -> int:
        value = obj.get("index", 0)
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._error(f"{what} is a {type(value).__name__}, not an integer")
        return value

    def _usage(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if usage is None:
            groq = chunk.get("x_groq")
            if groq is not None and not isinstance(groq, dict):
                raise self._error(f"x_groq is a {type(groq).__name__}, not an object")
            usage = (groq or {}).get("usage")
            if usage is None:
                return
        if not isinstance(usage, dict):
            raise self._error(f"usage is a {type(usage).__name__}, not an object")
        prompt = self._details(usage, "prompt_tokens_details")
        completion = self._details(usage, "completion_tokens_details")
        cached = prompt.get("cached_tokens")
        if cached is None:
            cached = usage.get("prompt_cache_hit_tokens")
        self.usage = Usage(
            input_tokens=self._count(usage.get("prompt_tokens"), "prompt_tokens"),
            output_tokens=self._count(usage.get("completion_tokens"), "completion_tokens"),
            cache_read_tokens=self._count(cached, "cached_tokens"),
            reasoning_tokens=self._count(completion.get("reasoning_tokens"), "reasoning_tokens"),
        )

    def _details(self, usage: dict[str, Any], key: str) -> dict[str, Any]:
        value = usage.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self._error(f"{key} is a {type(value).__name__}, not an object")
        return value

    def _count(self, value: Any, what: str) -> int:
        """A token count: a non-negative integer up to ``MAX_TOKEN_COUNT`` (an integral float is accepted)."""
        if value is None:
            return 0
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not is_token_count(value):
            raise self._error(f"{what} is not a token count: {str(value)[:40]}")
        return value

    # --- the end ------------------------------------------------------------------------

    async def response(self, names: ToolNames) -> ModelResponse:
        for piece in self._think.finish():
            await self._emit(piece.kind, piece.value)
        tool_calls = []
        for call in self._calls:
            if not call.name:
                self._line = call.line
                raise self._error("a tool call never got a function name")
            tool_calls.append(tool_call_from_text(call.id, names.to_name(call.name), "".join(call.arguments)))
        return ModelResponse(
            text="".join(self._text),
            tool_calls=with_distinct_ids(tool_calls),
            usage=self.usage,
            stop_reason=self.finish_reason,
            reasoning=[
                ReasoningBlock(type="reasoning", provider="openai", text="".join(b), source=source)
                for b, source in zip(self._reasoning, self._reasoning_sources)
            ],
        )


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


def _error_object(data: str) -> Any:
    """The error an ``event: error`` event carries: its ``error`` member, the object itself, or the raw text."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return data
    if isinstance(value, dict) and value.get("error") is not None:
        return value["error"]
    return value


def _stream_error(url: str, data: str, error: Any) -> ProviderHTTPError:
    """An error sent inside a 200 stream, as the ``ProviderHTTPError`` its status says.

    The status is ``status_code`` or ``status`` when present (Groq), else a numeric ``code``
    (OpenRouter, vLLM), else 400 when ``type`` is ``invalid_request_error``, else 500
    (retryable). Only 4xx/5xx values count. The body is the event data, cut to 4 KB.
    """
    status = 500
    if isinstance(error, dict):
        found = next(
            (s for s in map(_http_status, (error.get("status_code"), error.get("status"), error.get("code"))) if s),
            None,
        )
        if found is not None:
            status = found
        elif error.get("type") == "invalid_request_error":
            status = 400
    return ProviderHTTPError(status, url, data)


def _http_status(value: Any) -> int | None:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) == 3:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
        return value
    return None
