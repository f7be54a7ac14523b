"""What every provider adapter shares: the Protocol, tool-name mapping, argument parsing and the SSE transport."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeGuard, runtime_checkable

import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError, aconnect_sse

from agentrt.activities.providers._errors import retry_after_seconds
from agentrt.schemas import (
    ConfigurationError,
    ModelProfile,
    ModelRequest,
    OUTPUT_TOOL,
    ModelResponse,
    NotAJsonNumber,
    OutputSpec,
    ProviderHTTPError,
    ProviderTransportError,
    StreamStalled,
    ToolCall,
    strict_json,
)

# Token counts above this are not counts a model reports: the largest integer every JSON
# reader (and a signed 64-bit store column) holds exactly. Adapters refuse bigger ones.
MAX_TOKEN_COUNT = 2**53 - 1

# Model-name prefixes of OpenAI's reasoning families, which take ``max_completion_tokens``
# and refuse a temperature other than 1 (https://platform.openai.com/docs/guides/reasoning).
REASONING_FAMILIES = ("o1", "o3", "o4", "gpt-5", "codex")


def is_token_count(value: Any) -> TypeGuard[int]:
    """Whether ``value`` (a parsed JSON value) is a token count: an integer, not a bool, from 0
    to ``MAX_TOKEN_COUNT``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT


class NotAnEventObject(ValueError):
    """Event data that is not a JSON object; the message says why."""


def event_object(data: str) -> dict[str, Any]:
    """An event's data parsed as a JSON object. Raises ``NotAnEventObject`` for anything else:
    text that is not JSON, JSON nested too deep for the parser (``RecursionError``) or a number
    too long to convert (``ValueError``), a JSON array, string or number."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise NotAnEventObject(f"event data is not JSON ({type(e).__name__})") from e
    if not isinstance(value, dict):
        raise NotAnEventObject(f"event data is a JSON {type(value).__name__}, not an object")
    return value


def is_reasoning_family(model: str) -> bool:
    """True when ``model`` names an OpenAI reasoning model (o1, o3, o4, gpt-5, codex ...), also
    behind a routing prefix such as ``openai/o3-mini``; the ``-chat`` variants
    (``gpt-5-chat-latest``) do not reason."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    return name.startswith(REASONING_FAMILIES) and "-chat" not in name


# The most of an error response's body read (bytes): ProviderHTTPError keeps 4,096 characters of
# it, and a hostile or broken server may send gigabytes.
MAX_ERROR_BODY_BYTES = 64 * 1024

# The most of an event stream read (characters, after decompression): one line, and the whole
# stream. The biggest event a provider sends is Responses' ``response.completed``, which repeats
# the whole output; a 128k-token answer streams as about 50 MB of events.
MAX_LINE_CHARS = 16 * 1024 * 1024
MAX_STREAM_CHARS = 256 * 1024 * 1024

# The most a stream's end is waited for after its reader has what it needs (seconds): providers
# end the response right after ``[DONE]`` (or ``message_stop``).
DRAIN_SECONDS = 0.5

OnDelta = Callable[[str], Awaitable[None]]
"""Called with each non-empty piece of assistant text as it streams in, in order."""


@runtime_checkable
class Provider(Protocol):
    """One model call: ``request`` in, the complete ``ModelResponse`` out.

    ``on_delta`` (optional) receives the text as it streams. Errors: ``ProviderHTTPError``
    (non-2xx status, or an error event inside the stream), ``ProviderTransportError`` (no
    complete answer: connect failure, timeout, stream cut). Adapters never retry; Temporal's
    retry policy is the one retry loop.
    """

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse: ...


# --- tool names --------------------------------------------------------------------------

_WIRE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_WIRE_CHAR = re.compile(r"[^a-zA-Z0-9_-]")


def _sanitize(name: str) -> str:
    wire = _NOT_WIRE_CHAR.sub("_", name.replace(".", "__"))[:64]
    return wire or "tool"


class ToolNames:
    """Per-request mapping between agentrt tool names (``fs.read``) and wire names (``fs__read``).

    OpenAI and Anthropic both accept only ``^[a-zA-Z0-9_-]{1,64}$``. ``.`` becomes ``__``,
    any other disallowed character ``_``; names are cut to 64 characters and made unique
    within the request with a ``_2``, ``_3`` ... suffix. ``to_name`` maps a wire name the
    model sent back; an unknown wire name is returned unchanged.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._to_wire: dict[str, str] = {}
        self._to_name: dict[str, str] = {}
        names = list(dict.fromkeys(names))
        # Names already valid keep their spelling; they are claimed first so a mapped
        # name cannot take them.
        for name in sorted(names, key=lambda n: not _WIRE_NAME.fullmatch(n)):
            wire = name if _WIRE_NAME.fullmatch(name) else _sanitize(name)
            candidate, k = wire, 1
            while candidate in self._to_name:
                k += 1
                suffix = f"_{k}"
                candidate = wire[: 64 - len(suffix)] + suffix
            self._to_wire[name] = candidate
            self._to_name[candidate] = name

    def to_wire(self, name: str) -> str:
        """Wire name of ``name``; names outside the request's tool list (old calls) are sanitized."""
        if name in self._to_wire:
            return self._to_wire[name]
        return name if _WIRE_NAME.fullmatch(name) else _sanitize(name)

    def to_name(self, wire: str) -> str:
        return self._to_name.get(wire, wire)


# --- tool arguments ----------------------------------------------------------------------

# The deepest nesting of objects and arrays kept in tool arguments. No tool's schema comes near
# it; a model's arguments much deeper could not be read back from workflow history (pydantic's
# JSON reader stops at 200 levels, the envelope around the arguments included).
MAX_ARGUMENT_DEPTH = 64
# The longest argument text a tool call may have (characters): the arguments travel in workflow
# history (a payload above the server's 2 MiB limit fails the task) and in every later request.
# A call over it is refused before it costs history; only the start of a refused text is kept.
MAX_ARGUMENT_CHARS = 1024 * 1024
KEPT_RAW_ARGUMENT_CHARS = 2000

# A UTF-16 surrogate on its own: JSON lets ``"\\ud800"`` through, but it is not text and
# cannot be encoded as UTF-8 (history, the store and the API all need UTF-8).
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate (from a ``\\udXXX`` JSON escape) replaced by U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def arguments_problem(value: dict[str, Any]) -> str | None:
    """Why parsed arguments cannot be kept (nested too deep, a lone surrogate), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_ARGUMENT_DEPTH:
                return f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels"
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                item = item.values()
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str) and not item.isascii() and _SURROGATE.search(item):
            return "arguments contain a lone UTF-16 surrogate escape, which is not text"
    return None


def tool_call_from_text(call_id: str, name: str, raw: str) -> ToolCall:
    """Build a ``ToolCall`` from the argument text a model sent; never raises.

    Empty (or whitespace) text means ``{}``. Text longer than ``MAX_ARGUMENT_CHARS``, text that
    is not a JSON object (``NaN`` and ``Infinity`` are not JSON), an object nested deeper than
    ``MAX_ARGUMENT_DEPTH`` or one holding a lone surrogate gives ``arguments=None``, ``arguments_raw`` (the text, its first
    ``KEPT_RAW_ARGUMENT_CHARS`` when longer) and ``arguments_error`` saying why, so the error
    can be shown back to the model. When the text parses, ``arguments_raw`` is left
    empty: the parsed object already says everything and workflow history stays small.
    """
    raw = valid_text(raw)
    if not raw.strip():
        return ToolCall(id=call_id, name=name, arguments={})
    if len(raw) > MAX_ARGUMENT_CHARS:
        return ToolCall(
            id=call_id, name=name, arguments_raw=_kept(raw),
            arguments_error=f"arguments of {len(raw):,} characters are more than a tool call may have ({MAX_ARGUMENT_CHARS:,})",
        )
    try:
        value = strict_json(raw)
    except RecursionError:
        return ToolCall(
            id=call_id, name=name, arguments_raw=_kept(raw),
            arguments_error=f"arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels",
        )
    except NotAJsonNumber as e:
        return ToolCall(id=call_id, name=name, arguments_raw=_kept(raw), arguments_error=f"arguments hold {e}")
    except ValueError as e:
        return ToolCall(id=call_id, name=name, arguments_raw=_kept(raw), arguments_error=f"arguments are not valid JSON: {e}")
    if not isinstance(value, dict):
        return ToolCall(
            id=call_id,
            name=name,
            arguments_raw=_kept(raw),
            arguments_error=f"arguments must be a JSON object, got {type(value).__name__}",
        )
    problem = arguments_problem(value)
    if problem is not None:
        return ToolCall(id=call_id, name=name, arguments_raw=_kept(raw), arguments_error=problem)
    return ToolCall(id=call_id, name=name, arguments=value)


def _kept(raw: str) -> str:
    """The start of a refused argument text, as much as the model needs to see its mistake."""
    if len(raw) <= KEPT_RAW_ARGUMENT_CHARS:
        return raw
    return raw[:KEPT_RAW_ARGUMENT_CHARS] + f"… ({len(raw):,} characters in all)"


def with_distinct_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` with each missing or repeated id replaced by a fresh one (``call_`` and 24 hex digits).

    A call's id is its effect's idempotency key within the turn: two calls sharing one would
    run as one effect, and ids made up from positions (``call_0``) repeat in every round.
    """
    seen: set[str] = set()
    distinct = []
    for call in calls:
        if not call.id or call.id in seen:
            call = call.model_copy(update={"id": f"call_{secrets.token_hex(12)}"})
        seen.add(call.id)
        distinct.append(call)
    return distinct


def wire_arguments(call: ToolCall) -> dict[str, Any]:
    """The argument object to send back for a past call; ``{}`` when the model's text did not parse.

    Sending the unparsable text back would make some servers (and Anthropic, whose ``input``
    must be an object) reject the whole request; the tool result already tells the model
    what was wrong.
    """
    return call.arguments if call.arguments is not None else {}


# --- HTTP + SSE --------------------------------------------------------------------------


def check_api_key(profile: ModelProfile, api_key: str | None) -> None:
    """Raise ``ConfigurationError`` when ``api_key`` cannot be sent in a header: anything but
    printable ASCII, or whitespace at either end (a key read from a file or a Kubernetes
    secret often ends in a newline). The message names where the key came from, never the key.
    """
    if api_key is None or (api_key.isascii() and api_key.isprintable() and api_key == api_key.strip()):
        return
    source = f"${profile.api_key_env} (the worker's environment)" if profile.api_key_env else "its API key"
    raise ConfigurationError(
        f"model profile {profile.name!r}: the API key in {source} has characters an HTTP header cannot carry "
        "(a trailing newline, a space, a non-ASCII character); it was not sent"
    )


def new_client(timeout_seconds: float) -> httpx.AsyncClient:
    """An AsyncClient with no retries of its own (Temporal's retry policy is the only retry loop),
    no bound on connections (the worker's activity slots bound its calls; a pool bound would
    queue a call behind others for up to its whole timeout) and no cookies: a client is shared by
    every session of a profile, so nothing one response sets may ride on another session's request."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_seconds),
        transport=httpx.AsyncHTTPTransport(retries=0, limits=httpx.Limits(max_connections=None, max_keepalive_connections=64)),
        cookies=http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
    )


async def stream_sse(
    url: str,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    timeout_seconds: float,
    client: httpx.AsyncClient | None = None,
    idle_timeout_seconds: float | None = None,
) -> AsyncGenerator[ServerSentEvent, None]:
    """POST ``body`` as JSON to ``url`` and yield its server-sent events.

    ``idle_timeout_seconds``: the longest wait for the next bytes (the response's headers, then
    each chunk of the stream); past it the call raises ``StreamStalled`` (retryable). None: each
    read waits up to ``timeout_seconds``.

    Use under ``contextlib.aclosing`` so an early stop releases the connection. A non-2xx
    status raises ``ProviderHTTPError`` with the response body and Retry-After; httpx
    request errors (connect, timeout, protocol) and a 2xx that is not an event stream raise
    ``ProviderTransportError`` chained from the cause, as does a stream past ``MAX_LINE_CHARS``
    in one line or ``MAX_STREAM_CHARS`` in all. Errors raised by the consumer of
    the events are not translated.
    """
    owned = client is None
    http = client if client is not None else new_client(timeout_seconds)
    try:
        idle = httpx.Timeout(timeout_seconds, read=idle_timeout_seconds) if idle_timeout_seconds is not None else httpx.USE_CLIENT_DEFAULT
        async with aconnect_sse(http, "POST", url, headers=dict(headers), json=dict(body), timeout=idle) as source:
            response = source.response
            if not response.is_success:
                text = (await _read_at_most(response, MAX_ERROR_BODY_BYTES)).decode("utf-8", errors="replace")
                raise ProviderHTTPError(response.status_code, url, text, retry_after_seconds(response.headers))
            events = EventSource(_BoundedText(response, url)).aiter_sse()  # type: ignore[arg-type]
            try:
                async for event in events:
                    yield event
            except GeneratorExit:
                if not owned:
                    await _read_to_end(events)
                raise
    except SSEError as e:  # before RequestError: httpx-sse derives it from httpx.TransportError
        raise ProviderTransportError(url, f"response is not an event stream: {e}") from e
    except httpx.ReadTimeout as e:
        if idle_timeout_seconds is not None:
            raise StreamStalled(url, idle_timeout_seconds) from e
        raise ProviderTransportError(url, f"timed out ({type(e).__name__})") from e
    except httpx.TimeoutException as e:
        raise ProviderTransportError(url, f"timed out ({type(e).__name__})") from e
    except httpx.LocalProtocolError:
        # h11 quotes the offending header, which may be the API key: the message is not kept.
        raise ProviderTransportError(url, "the request could not be sent (LocalProtocolError; headers not shown)") from None
    except httpx.RequestError as e:
        raise ProviderTransportError(url, f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from e
    finally:
        if owned:
            await http.aclose()


async def _read_to_end(events: AsyncIterator[ServerSentEvent]) -> None:
    """The rest of a stream whose reader stopped early (at ``[DONE]``, or ``message_stop``), for at
    most ``DRAIN_SECONDS``: a response read to its end leaves its connection to the client's pool
    for the next call; one closed early closes the connection. Errors are dropped, and so is a
    cancellation meanwhile (the call's ``deadline`` passing): the answer is whole, and a call that
    has its answer is not failed, and billed again, for the rest of a connection."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in events:
                pass
    except (Exception, asyncio.CancelledError):  # noqa: BLE001 - only the connection is lost
        pass


class _BoundedText:
    """What ``EventSource`` reads of a response (headers, decoded text), the text bounded by
    ``MAX_LINE_CHARS`` per line and ``MAX_STREAM_CHARS`` in all: past either it raises
    ``ProviderTransportError`` instead of buffering (httpx-sse keeps a line until it ends)."""

    def __init__(self, response: httpx.Response, url: str) -> None:
        self.headers = response.headers
        self._response = response
        self._url = url

    async def aiter_text(self) -> AsyncIterator[str]:
        total = line = 0
        async for text in self._response.aiter_text():
            total += len(text)
            end = max(text.rfind("\n"), text.rfind("\r"))
            line = line + len(text) if end < 0 else len(text) - end - 1
            if line > MAX_LINE_CHARS:
                raise ProviderTransportError(self._url, f"a line of the event stream runs past {MAX_LINE_CHARS:,} characters")
            if total > MAX_STREAM_CHARS:
                raise ProviderTransportError(self._url, f"the event stream runs to more than {MAX_STREAM_CHARS:,} characters")
            yield text


async def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    """The first ``limit`` bytes of ``response``'s body; the rest is never read."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])


@asynccontextmanager
async def deadline(url: str, seconds: float) -> AsyncIterator[None]:
    """Bound a whole call (connect + full stream) to ``seconds``; overrun is a ``ProviderTransportError``.

    httpx's timeout bounds each read; this bounds the total, as ``ModelProfile.timeout_seconds``
    promises.
    """
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as e:
        raise ProviderTransportError(url, f"no complete answer within {seconds:g} s") from e


# --- structured output -------------------------------------------------------------------


def uses_output_tool(profile: ModelProfile) -> bool:
    """Whether a call with an output spec offers the output tool (``OUTPUT_TOOL``) instead of
    the provider's native mode: always for Anthropic (a forced tool is its way), and for a
    profile with ``output_mode = "tool"`` (a compatible server without ``json_schema``)."""
    return profile.provider == "anthropic" or profile.output_mode == "tool"


def native_output(request: ModelRequest) -> OutputSpec | None:
    """The spec to ask for natively (OpenAI ``response_format`` / Responses ``text.format``):
    the request's, unless its profile uses the output tool."""
    if request.output is None or uses_output_tool(request.profile):
        return None
    return request.output


def offers_output_tool(request: ModelRequest) -> bool:
    """A call with an output spec whose tools hold the output tool (the activity added it)."""
    return request.output is not None and any(tool.name == OUTPUT_TOOL for tool in request.tools)


def json_schema_format(output: OutputSpec) -> dict[str, Any]:
    """OpenAI's json_schema format fields (Chat ``response_format.json_schema``, Responses
    ``text.format``): ``name``, ``description`` when set, ``schema``, ``strict``.
    Sources: https://platform.openai.com/docs/guides/structured-outputs."""
    fields: dict[str, Any] = {"name": output.name}
    if output.description:
        fields["description"] = output.description
    fields["schema"] = output.json_schema
    fields["strict"] = output.strict
    return fields
