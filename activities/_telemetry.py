"""Spans and measurements of model and tool calls, after the OpenTelemetry GenAI semantic conventions.

Only the OpenTelemetry API: in a process without tracer and meter providers (telemetry off) every
span here is a no-op and every measurement is dropped; ``agentrt.worker.setup_telemetry`` installs
them. A span is a child of the activity's span when Temporal's tracing interceptor runs.

Names follow https://opentelemetry.io/docs/specs/semconv/gen-ai/ (spans ``chat {model}`` and
``execute_tool {name}``, metrics ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration``); they are written out here because the Python
semantic-conventions package marks its ``gen_ai`` names as moved out of it. ``agentrt.*`` names
are agentrt's own. Spans carry no prompt, reply, tool argument, tool result or error message:
``error.type`` names what went wrong, and values a model chose (tool names and call ids, finish reasons) are
cut to ``MODEL_VALUE_CHARS``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, StatusCode
from temporalio.exceptions import ApplicationError

from agentrt.schemas import ModelProfile, ToolExecuteInput, ToolExecuteResult, Usage

SCOPE = "agentrt.activities"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
CONVERSATION_ID = "gen_ai.conversation.id"
TOKEN_TYPE = "gen_ai.token.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"
SESSION_ID = "agentrt.session.id"
TURN_ID = "agentrt.turn.id"
ROUND = "agentrt.round"
ATTEMPT = "agentrt.attempt"
PURPOSE = "agentrt.model_call.purpose"
COST_USD = "agentrt.cost.usd"
TOOL_OUTCOME = "agentrt.tool.outcome"
TOOL_LOCAL = "agentrt.tool.local"

TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
# The conventions' advised bucket boundaries (tokens; seconds).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)

# The ``gen_ai.provider.name`` of each agentrt provider whose API has a well-known name.
PROVIDER_NAMES = {"openai-responses": "openai"}
# What a tool result that the sandbox refused counts as (``agentrt.tool.outcome``).
DENIED_ERROR_TYPES = frozenset({"WorkspaceEscapeError", "SandboxUnavailable"})
# A value the model chose, as much of it as a span keeps (characters).
MODEL_VALUE_CHARS = 128


def _tracer() -> trace.Tracer:
    return trace.get_tracer(SCOPE)


class _Instruments:
    """The histograms and counter of model calls, made on one meter."""

    def __init__(self, meter: metrics.Meter) -> None:
        self.token_usage = meter.create_histogram(
            TOKEN_USAGE, unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            OPERATION_DURATION, unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.cost = meter.create_counter(
            COST_USD, unit="USD", description="What model calls cost, by the profile's price (US dollars)."
        )


@functools.lru_cache(maxsize=1)
def _instruments(provider: metrics.MeterProvider) -> _Instruments:
    """The instruments of ``provider``, made once: made again only when the process's provider
    was replaced (tests install their own)."""
    return _Instruments(provider.get_meter(SCOPE))


def _error_type(err: BaseException) -> str:
    """``error.type``: an ``ApplicationError``'s type (``ProviderHTTPError``...), else the class name."""
    if isinstance(err, ApplicationError) and err.type:
        return err.type
    return type(err).__name__


def _model_value(value: str) -> str:
    return value[:MODEL_VALUE_CHARS]


class ModelCall:
    """The span of one model call attempt, told what it learns as the call goes on."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self._measured: dict[str, str] = {OPERATION: "chat"}

    def request(self, profile: ModelProfile) -> None:
        """The profile is known: name the span ``chat {model}``; provider, model and output bound."""
        provider = PROVIDER_NAMES.get(profile.provider, profile.provider)
        self.span.update_name(f"chat {profile.model}")
        self.span.set_attributes({PROVIDER: provider, REQUEST_MODEL: profile.model})
        if profile.max_output_tokens is not None:
            self.span.set_attribute(REQUEST_MAX_TOKENS, profile.max_output_tokens)
        self._measured.update({PROVIDER: provider, REQUEST_MODEL: profile.model})

    def reply(self, usage: Usage, stop_reason: str | None, profile: ModelProfile) -> None:
        """The model answered: token counts (span and ``gen_ai.client.token.usage``), finish reason
        and cost (``agentrt.cost.usd``, when the profile has a price)."""
        attributes: dict[str, int | float | tuple[str, ...]] = {
            USAGE_INPUT_TOKENS: usage.input_tokens, USAGE_OUTPUT_TOKENS: usage.output_tokens,
        }
        for name, value in (
            (USAGE_CACHE_READ_TOKENS, usage.cache_read_tokens),
            (USAGE_CACHE_CREATION_TOKENS, usage.cache_write_tokens),
            (USAGE_REASONING_TOKENS, usage.reasoning_tokens),
        ):
            if value:
                attributes[name] = value
        if stop_reason:
            attributes[RESPONSE_FINISH_REASONS] = (_model_value(stop_reason),)
        instruments = _instruments(metrics.get_meter_provider())
        instruments.token_usage.record(usage.input_tokens, {**self._measured, TOKEN_TYPE: "input"})
        instruments.token_usage.record(usage.output_tokens, {**self._measured, TOKEN_TYPE: "output"})
        if profile.price is not None:
            cost = profile.price.cost(usage)
            attributes[COST_USD] = cost
            instruments.cost.add(cost, self._measured)
        self.span.set_attributes(attributes)

    def _failed(self, err: BaseException) -> None:
        kind = _error_type(err)
        self.span.set_status(StatusCode.ERROR)
        self.span.set_attribute(ERROR_TYPE, kind)
        self._measured[ERROR_TYPE] = kind

    def _took(self, seconds: float) -> None:
        _instruments(metrics.get_meter_provider()).duration.record(seconds, self._measured)


@contextmanager
def model_call(
    session_id: str | None, attempt: int, *, turn_id: str | None = None, round: int | None = None, purpose: str = "reply"
) -> Iterator[ModelCall]:
    """The span ``chat {model}`` (kind CLIENT) of one model call attempt, current for the block,
    and its duration in ``gen_ai.client.operation.duration``. Attributes: ``gen_ai.operation.name``
    ``chat``, ``gen_ai.conversation.id`` and ``agentrt.session.id`` (the session), ``agentrt.turn.id``,
    ``agentrt.round``, ``agentrt.attempt`` (the activity's attempt, from 1) and
    ``agentrt.model_call.purpose`` (``reply`` or ``summary`` for a session's call; ``advisor``,
    ``review`` or ``plan`` for a second opinion, whose ``session_id`` may be a task's or a graph's
    workflow id, or None); the rest through ``ModelCall``. An exception leaving the block sets
    status ERROR and ``error.type``."""
    attributes: dict[str, str | int] = {OPERATION: "chat", ATTEMPT: attempt, PURPOSE: purpose}
    if session_id is not None:
        attributes[CONVERSATION_ID] = attributes[SESSION_ID] = session_id
    if turn_id is not None:
        attributes[TURN_ID] = turn_id
    if round is not None:
        attributes[ROUND] = round
    span = _tracer().start_span("chat", kind=SpanKind.CLIENT, attributes=attributes)
    call = ModelCall(span)
    began = time.monotonic()
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield call
        except BaseException as err:
            call._failed(err)
            raise
        finally:
            call._took(time.monotonic() - began)


class ToolCall:
    """The span of one tool call attempt."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def result(self, result: ToolExecuteResult) -> ToolExecuteResult:
        """Record how the call ended (``agentrt.tool.outcome`` ``ok``, ``denied`` when the sandbox
        refused it, else ``error`` with ``error.type`` and status ERROR); returns ``result``."""
        if result.ok:
            self.span.set_attribute(TOOL_OUTCOME, "ok")
            return result
        kind = result.error_type or "ToolError"
        outcome = "denied" if kind in DENIED_ERROR_TYPES else "error"
        self.span.set_attributes({TOOL_OUTCOME: outcome, ERROR_TYPE: kind})
        self.span.set_status(StatusCode.ERROR)
        return result


@contextmanager
def tool_call(input: ToolExecuteInput, attempt: int, *, local: bool) -> Iterator[ToolCall]:
    """The span ``execute_tool {name}`` (kind INTERNAL) of one ``tool.execute`` attempt, current
    for the block. Attributes: ``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name``,
    ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` ``function``, ``gen_ai.conversation.id``,
    ``agentrt.session.id``, ``agentrt.turn.id``, ``agentrt.attempt``, ``agentrt.tool.local`` (run as
    a local activity); the outcome through ``ToolCall.result``. An exception leaving the block
    (an effect of unknown outcome, a store failure) sets outcome ``error``, ``error.type`` and
    status ERROR."""
    name = _model_value(input.call.name)
    attributes: dict[str, str | int | bool] = {
        OPERATION: "execute_tool",
        TOOL_NAME: name,
        TOOL_CALL_ID: _model_value(input.call.id),
        TOOL_TYPE: "function",
        CONVERSATION_ID: input.session_id,
        SESSION_ID: input.session_id,
        TURN_ID: input.turn_id,
        ATTEMPT: attempt,
        TOOL_LOCAL: local,
    }
    span = _tracer().start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes)
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield ToolCall(span)
        except BaseException as err:
            span.set_attributes({TOOL_OUTCOME: "error", ERROR_TYPE: _error_type(err)})
            span.set_status(StatusCode.ERROR)
            raise
