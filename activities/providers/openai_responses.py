"""Adapter for OpenAI's Responses API, streamed and stateless, so reasoning models keep their reasoning across tool rounds."""

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
    is_reasoning_family,
    is_token_count,
    json_schema_format,
    native_output,
    offers_output_tool,
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
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTransportError,
    ReasoningBlock,
    ToolCall,
    Usage,
)

PROVIDER = "openai-responses"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Error codes (``error`` events, ``response.failed``'s ``response.error.code``) and the HTTP
# status the same failure has as a plain response (https://platform.openai.com/docs/guides/error-codes).
# Codes not listed: ``image_*`` and ``invalid_*`` are 400, anything else 500 (retried).
ERROR_CODE_STATUS = {
    "invalid_prompt": 400,
    "invalid_request": 400,
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
    "authentication_error": 401,
    "permission_error": 403,
    "model_not_found": 404,
    "not_found_error": 404,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "api_error": 500,
    "server_is_overloaded": 503,
    "vector_store_timeout": 504,
}

__all__ = ["DEFAULT_BASE_URL", "ERROR_CODE_STATUS", "OpenAIResponsesProvider"]


class _Malformed(Exception):
    """A known event whose body the API does not define; becomes ``ProviderProtocolError``."""


@dataclass
class _Item:
    """One output item as it streams: a function call, a reasoning item or anything else."""

    kind: str
    id: str = ""
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    final_arguments: str | None = None
    summary: dict[int, list[str]] = field(default_factory=dict)
    final_summary: dict[int, str] = field(default_factory=dict)
    encrypted_content: str | None = None


class OpenAIResponsesProvider:
    """Streams one Responses call: ``POST {base_url}/responses`` with ``stream: true``, ``store: false``.

    - ``base_url``: ``profile.base_url`` or ``https://api.openai.com/v1``; ``api_key`` goes in
      ``Authorization: Bearer`` (omitted when None).
    - Request: ``model``, ``instructions`` (the system prompt and every ``system`` message),
      ``input`` items (see ``to_wire_input``), ``tools`` as ``{"type": "function", "name",
      "description", "parameters", "strict": false}`` with wire-safe names (the API defaults
      ``strict`` to true, which rejects most hand-written schemas), ``max_output_tokens``
      (``profile.max_output_tokens``, tokens), ``temperature`` when set (never for the
      reasoning families o1/o3/o4/gpt-5, which refuse it), ``reasoning: {"effort",
      "summary": "auto"}`` when ``profile.reasoning_effort`` is set. Stateless: nothing is
      stored server-side, every request carries the whole input; a reasoning model (or any
      model given a ``reasoning_effort``) gets ``include: ["reasoning.encrypted_content"]``
      so its reasoning items come back encrypted and are sent back in the next round.
    - An output spec: ``text.format`` ``json_schema``; with ``output_mode = "tool"``, the tool
      ``final_result`` and ``tool_choice: "required"``.
    - Events: ``response.output_text.delta`` (answer text, passed to ``on_delta``;
      ``response.refusal.delta`` likewise: a refusal is the answer);
      ``response.output_item.added``/``.done`` (``function_call``: ``call_id``, ``name``,
      ``arguments``; ``reasoning``: ``id``, ``summary``, ``encrypted_content``);
      ``response.function_call_arguments.delta``/``.done``;
      ``response.reasoning_summary_text.delta``/``.done``; ``response.completed`` (end,
      with ``response.usage``: ``input_tokens``, ``output_tokens``,
      ``input_tokens_details.cached_tokens``, ``output_tokens_details.reasoning_tokens``)
      and ``response.incomplete`` (end, ``response.incomplete_details.reason``). Other
      event types are ignored (the API adds new ones); reasoning items with neither
      summary nor encrypted content are dropped (nothing to show, nothing to send back).
    - Response: ``text`` the answer; ``tool_calls`` in output order (``id`` is the
      ``call_id``); ``reasoning`` one ``ReasoningBlock(type="reasoning_item",
      provider="openai-responses", id, text=summary, data=encrypted_content)`` per item;
      items announced at an ``output_index`` already taken by an item of another kind,
      ``id`` or ``call_id`` are kept apart (in announcement order within the index);
      ``stop_reason`` ``"tool_calls"`` when there are calls, else the response status
      (``"completed"``) or the incomplete reason (``"max_output_tokens"``,
      ``"content_filter"``).
    - Errors: ``ProviderHTTPError`` for a non-2xx status, an ``error`` event or
      ``response.failed`` (status from the error code, ``ERROR_CODE_STATUS``; body cut to
      4,096 characters); ``ProviderTransportError`` when the stream ends before
      ``response.completed``/``response.incomplete`` or no answer arrives;
      ``ProviderProtocolError`` for a known event whose body the API does not define
      (wrong field types, a delta for an item never announced, data that is not JSON).

    Sources: https://platform.openai.com/docs/api-reference/responses/create,
    https://platform.openai.com/docs/api-reference/responses-streaming and
    https://platform.openai.com/docs/guides/reasoning#keeping-reasoning-items-in-context
    """

    def __init__(self, profile: ModelProfile, api_key: str | None, *, client: httpx.AsyncClient | None = None) -> None:
        check_api_key(profile, api_key)
        self.profile = profile
        self.api_key = api_key
        self.base_url = (profile.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/responses"
        self._client = client

    def request_body(self, request: ModelRequest, names: ToolNames) -> dict[str, Any]:
        """The JSON body sent for ``request`` (public so the wire shape can be inspected)."""
        instructions, items = to_wire_input(request.system, request.messages, names)
        reasoning_model = is_reasoning_family(self.profile.model)
        body: dict[str, Any] = {
            "model": self.profile.model,
            "input": items,
            "stream": True,
            "store": False,
            "max_output_tokens": self.profile.max_output_tokens,
        }
        if instructions:
            body["instructions"] = instructions
        if reasoning_model or self.profile.reasoning_effort is not None:
            body["include"] = ["reasoning.encrypted_content"]
        if self.profile.reasoning_effort is not None:
            body["reasoning"] = {"effort": self.profile.reasoning_effort, "summary": "auto"}
        if self.profile.temperature is not None and not reasoning_model:
            body["temperature"] = self.profile.temperature
        if request.tools:
            body["tools"] = [
                {"type": "function", "name": names.to_wire(tool.name), "description": tool.description,
                 "parameters": tool.parameters, "strict": False}
                for tool in request.tools
            ]
            if offers_output_tool(request):
                body["tool_choice"] = "required"  # output_mode "tool": the answer is a call of the output tool
        if (output := native_output(request)) is not None:
            body["text"] = {"format": {"type": "json_schema", **json_schema_format(output)}}
        return body

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        names = ToolNames(tool.name for tool in request.tools)
        stream = _Stream()
        async with deadline(self.url, self.profile.timeout_seconds):
            events = stream_sse(
                self.url,
                headers=self.headers(),
                body=self.request_body(request, names),
                timeout_seconds=self.profile.timeout_seconds,
                idle_timeout_seconds=self.profile.stream_idle_timeout_seconds,
                client=self._client,
            )
            async with aclosing(events):
                async for event in events:
                    line = event.data
                    if not line.strip() or line.strip() == "[DONE]":
                        continue
                    try:
                        data = _load(line)
                        kind = data.get("type", event.event)
                        if not isinstance(kind, str):
                            raise _Malformed("type is not a string")
                        if kind in ("error", "response.failed"):
                            raise _stream_error(self.url, kind, data, line)
                        delta = stream.apply(kind, data)
                    except _Malformed as e:
                        raise ProviderProtocolError(PROVIDER, self.profile.model, self.url, line, str(e)) from e
                    if delta and on_delta is not None:
                        await on_delta(delta)
                    if stream.finished:
                        break
        if not stream.finished:
            raise ProviderTransportError(self.url, "stream ended before response.completed")
        return stream.response(names)


class _Stream:
    """What the events of one response have said so far."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.items: list[tuple[int, _Item]] = []  # every item with its output_index, as announced
        self.at: dict[int, _Item] = {}  # output_index -> the item its events continue
        self.by_id: dict[str, _Item] = {}
        self.usage = Usage()
        self.status: str | None = None
        self.finished = False

    def apply(self, kind: str, data: dict[str, Any]) -> str:
        """Take one event in; returns the answer text it adds ("" for none)."""
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = _str(data, "delta")
            self.text.append(delta)
            return delta
        if kind in ("response.output_item.added", "response.output_item.done"):
            self._item(data, done=kind.endswith(".done"))
        elif kind == "response.function_call_arguments.delta":
            self._target(data, "function_call").arguments.append(_str(data, "delta"))
        elif kind == "response.function_call_arguments.done":
            self._target(data, "function_call").final_arguments = _str(data, "arguments")
        elif kind == "response.reasoning_summary_text.delta":
            item = self._target(data, "reasoning")
            item.summary.setdefault(_index(data, "summary_index"), []).append(_str(data, "delta"))
        elif kind == "response.reasoning_summary_text.done":
            item = self._target(data, "reasoning")
            item.final_summary[_index(data, "summary_index")] = _str(data, "text")
        elif kind in ("response.completed", "response.incomplete"):
            response = _obj(data, "response")
            usage = _obj(response, "usage", optional=True)
            self.usage = _usage(usage) if usage is not None else Usage()
            if kind == "response.completed":
                self.status = _str(response, "status", optional=True) or "completed"
            else:
                details = _obj(response, "incomplete_details", optional=True) or {}
                self.status = _str(details, "reason", optional=True) or "incomplete"
            self.finished = True
        return ""

    def _item(self, data: dict[str, Any], *, done: bool) -> None:
        index = _index(data, "output_index")
        body = _obj(data, "item")
        kind = _str(body, "type")
        item_id = _str(body, "id", optional=True)
        call_id = _str(body, "call_id", optional=True) if kind == "function_call" else None
        item = self.by_id.get(item_id) if item_id else None
        if item is None or item.kind != kind:
            # A server may number several items alike (Ollama and LiteLLM send parallel Chat
            # Completions calls all at index 0): an item of another kind, id or call_id is a new one.
            item = self.at.get(index)
            if (
                item is None
                or item.kind != kind
                or (item_id and item.id and item_id != item.id)
                or (call_id and item.call_id and call_id != item.call_id)
            ):
                item = self.at[index] = _Item(kind=kind)
                self.items.append((index, item))
        if item_id:
            item.id = item_id
            self.by_id[item_id] = item
        if kind == "function_call":
            item.call_id = _str(body, "call_id")
            item.name = _str(body, "name")
            if not item.call_id or not item.name:
                raise _Malformed("function_call without call_id or name")
            if done:
                item.final_arguments = _str(body, "arguments")
            else:
                _str(body, "arguments", optional=True)
        elif kind == "reasoning":
            if not item.id:
                raise _Malformed("reasoning item without id")
            encrypted = _str(body, "encrypted_content", optional=True)
            if encrypted is not None:
                item.encrypted_content = encrypted
            summary = _list(body, "summary", optional=True) or []
            for k, part in enumerate(summary):
                if not isinstance(part, dict):
                    raise _Malformed("summary part is not an object")
                if part.get("type") == "summary_text":
                    item.final_summary[k] = _str(part, "text")

    def _target(self, data: dict[str, Any], kind: str) -> _Item:
        """The item a delta/done event names, by ``item_id`` or else ``output_index``."""
        item_id = _str(data, "item_id", optional=True)
        item = self.by_id.get(item_id) if item_id else None
        if item is None:
            index = _index(data, "output_index", optional=True)
            item = self.at.get(index) if index is not None else None
        if item is None:
            raise _Malformed("event for an output item that was never announced")
        if item.kind != kind:
            raise _Malformed(f"{kind} event for a {item.kind} item")
        return item

    def response(self, names: ToolNames) -> ModelResponse:
        calls: list[ToolCall] = []
        reasoning: list[ReasoningBlock] = []
        for _, item in sorted(self.items, key=lambda pair: pair[0]):
            if item.kind == "function_call":
                raw = item.final_arguments if item.final_arguments is not None else "".join(item.arguments)
                calls.append(tool_call_from_text(item.call_id, names.to_name(item.name), raw))
            elif item.kind == "reasoning":
                parts = {k: "".join(v) for k, v in item.summary.items()} | item.final_summary
                summary = "\n\n".join(text for _, text in sorted(parts.items()) if text)
                if summary or item.encrypted_content:
                    reasoning.append(
                        ReasoningBlock(
                            type="reasoning_item",
                            provider=PROVIDER,
                            id=item.id,
                            text=summary,
                            data=item.encrypted_content,
                        )
                    )
        return ModelResponse(
            text="".join(self.text),
            tool_calls=with_distinct_ids(calls),
            usage=self.usage,
            stop_reason="tool_calls" if calls else self.status,
            reasoning=reasoning,
        )


def to_wire_input(
    system: str | None, messages: list[Message], names: ToolNames
) -> tuple[str | None, list[dict[str, Any]]]:
    """agentrt messages as Responses ``(instructions, input)``.

    ``system`` and ``system`` messages join ``instructions``. ``user`` → ``{"role": "user",
    "content": [{"type": "input_text", "text"}]}``; ``assistant`` → its ``openai-responses``
    reasoning items that carry encrypted content first (``{"type": "reasoning", "id",
    "summary": [{"type": "summary_text", "text"}], "encrypted_content"}``; without the
    content a stateless request cannot name them), then ``{"role": "assistant", "content":
    [{"type": "output_text", "text"}]}`` when it has text, then one ``{"type":
    "function_call", "call_id", "name", "arguments": JSON text}`` per call; ``tool`` →
    ``{"type": "function_call_output", "call_id", "output"}``. Reasoning blocks of other
    providers are never sent.
    """
    instructions = [system] if system else []
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                instructions.append(message.text)
        elif message.role == "user":
            items.append({"role": "user", "content": [{"type": "input_text", "text": message.text}]})
        elif message.role == "assistant":
            for block in message.reasoning:
                if block.provider == PROVIDER and block.type == "reasoning_item" and block.id and block.data:
                    summary = [{"type": "summary_text", "text": block.text}] if block.text else []
                    items.append(
                        {"type": "reasoning", "id": block.id, "summary": summary, "encrypted_content": block.data}
                    )
            if message.text:
                items.append({"role": "assistant", "content": [{"type": "output_text", "text": message.text}]})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": names.to_wire(call.name),
                    "arguments": json.dumps(wire_arguments(call)),
                }
                for call in message.tool_calls
            )
        else:
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.text}
            )
    return ("\n\n".join(instructions) or None), items


# --- reading event bodies: every field checked, every failure a _Malformed ----------------


def _load(line: str) -> dict[str, Any]:
    try:
        return event_object(line)
    except NotAnEventObject as e:
        raise _Malformed(str(e)) from e


def _str(obj: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    """``obj[key]`` as text, lone surrogates replaced (see ``valid_text``)."""
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Malformed(f"{key} is {type(value).__name__}, not a string")
    return valid_text(value)


def _obj(obj: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise _Malformed(f"{key} is {type(value).__name__}, not an object")
    return value


def _list(obj: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, list):
        raise _Malformed(f"{key} is {type(value).__name__}, not a list")
    return value


def _count(obj: dict[str, Any], key: str) -> int:
    """A token count or index: a non-negative JSON integer (absent or null reads 0)."""
    value = obj.get(key)
    if value is None:
        return 0
    if not is_token_count(value):
        raise _Malformed(f"{key} is not a count (an integer from 0 to 2**53 - 1)")
    return value


def _index(obj: dict[str, Any], key: str, *, optional: bool = False) -> Any:
    if obj.get(key) is None and optional:
        return None
    return _count(obj, key)


def _usage(usage: dict[str, Any]) -> Usage:
    cached = _obj(usage, "input_tokens_details", optional=True) or {}
    reasoning = _obj(usage, "output_tokens_details", optional=True) or {}
    return Usage(
        input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        cache_read_tokens=_count(cached, "cached_tokens"),
        reasoning_tokens=_count(reasoning, "reasoning_tokens"),
    )


def _stream_error(url: str, kind: str, data: dict[str, Any], line: str) -> ProviderHTTPError:
    """An ``error`` event or ``response.failed``: the status its code has as a plain response.

    ``error`` carries ``code`` (and ``message``, ``param``) at the top level, or inside an
    ``error`` object; ``response.failed`` carries ``response.error.code``. Fields of the
    wrong type are passed over: the event already says the call failed. The usage a failed
    response reports is kept as ``partial_usage``.
    """
    candidates: list[object] = []
    usage: Usage | None = None
    if kind == "error":
        candidates.append(data.get("code"))
        nested = data.get("error")
        if isinstance(nested, dict):
            candidates += [nested.get("code"), nested.get("type")]
    else:
        response = data.get("response")
        if isinstance(response, dict):
            error = response.get("error")
            if isinstance(error, dict):
                candidates += [error.get("code"), error.get("type")]
            if isinstance(response.get("usage"), dict):
                try:
                    usage = _usage(response["usage"])
                except _Malformed:
                    usage = None
    err = ProviderHTTPError(_status(candidates), url, line)
    err.partial_usage = usage
    return err


def _status(codes: list[object]) -> int:
    names = [code.lower() for code in codes if isinstance(code, str)]
    for name in names:
        if name in ERROR_CODE_STATUS:
            return ERROR_CODE_STATUS[name]
    for name in names:
        if name.startswith(("image_", "invalid_")) or "image" in name:
            return 400
    return 500
