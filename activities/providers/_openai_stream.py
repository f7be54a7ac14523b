"""Decoding a Chat Completions stream (``chat.completion.chunk`` objects) into one
``ModelResponse``: the answer text, reasoning blocks by each vendor's field (``reasoning``,
``reasoning_content``, Mistral's thinking parts, ``<think>`` blocks in the text), tool calls
assembled from their pieces, usage, and errors sent inside a 200 stream."""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from agentrt.activities.providers._base import (
    NotAnEventObject,
    OnDelta,
    ToolNames,
    event_object,
    is_token_count,
    tool_call_from_text,
    valid_text,
    with_distinct_ids,
)
from agentrt.activities.providers._think import ThinkSplitter
from agentrt.schemas import ModelResponse, ProviderHTTPError, ProviderProtocolError, ReasoningBlock, Usage


@dataclass
class _PendingCall:
    id: str
    line: str  # the event data that started the call, for a protocol error
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChatStreamDecoder:
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
            error = stream_error(self.url, data, chunk["error"] if chunk.get("error") is not None else chunk)
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


def error_object(data: str) -> Any:
    """The error an ``event: error`` event carries: its ``error`` member, the object itself, or the raw text."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return data
    if isinstance(value, dict) and value.get("error") is not None:
        return value["error"]
    return value


def stream_error(url: str, data: str, error: Any) -> ProviderHTTPError:
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
