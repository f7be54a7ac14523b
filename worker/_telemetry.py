"""OpenTelemetry for agentrt processes: the ``[telemetry]`` section, the tracer and meter providers,
the SDK's tracing interceptor, and the measurements read from a session's events and from visibility.

Off by default. With it on, ``AgentrtPlugin`` gives clients and workers Temporal's
``TracingInterceptor`` (client, workflow and activity spans; workflow spans are skipped while a
workflow replays its history) and an activity interceptor that counts turns and tool calls from the
events sessions write; a worker that runs sessions also reports how many of them wait for an
approval. Model and tool call spans come from ``agentrt.activities`` through the OpenTelemetry API.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import temporalio.client
import temporalio.worker
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from temporalio.contrib.opentelemetry import TracingInterceptor

from agentrt.schemas import (
    SESSION_STATUS,
    SESSION_WORKFLOW,
    ConfigurationError,
    Event,
    StoreAppendInput,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    TurnEnded,
)

log = logging.getLogger("agentrt.worker")

TELEMETRY_KEYS = {"enabled", "otlp_endpoint", "service_name"}
DEFAULT_SERVICE_NAME = "agentrt"
# The OpenTelemetry instrumentation scope of what this module measures.
SCOPE = "agentrt.worker"

# Environment overrides, lowest precedence first after the file: the standard OTLP endpoint (read
# only when telemetry is on), then agentrt's own.
TELEMETRY_ENV = "AGENTRT_TELEMETRY"
OTLP_ENDPOINT_ENV = "AGENTRT_OTLP_ENDPOINT"
# One export to the collector, its retries included, gives up after this (seconds): a collector
# that went away must not hold a stopping worker for the exporters' default backoff.
EXPORT_TIMEOUT_SECONDS = 5
STANDARD_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})

# Instruments (names and units after the OpenTelemetry conventions; ``agentrt.*`` are agentrt's own).
TURNS = "agentrt.turns"
TOOL_CALLS = "agentrt.tool_calls"
SESSIONS_AWAITING_APPROVAL = "agentrt.sessions.awaiting_approval"
TOOL_NAME = "gen_ai.tool.name"
TOOL_OUTCOME = "agentrt.tool.outcome"
TURN_STATUS = "agentrt.turn.status"
ERROR_TYPE = "error.type"
# What a refused call counts as: the policy or a person said no (``ToolInvocationFailed.reason``).
DENIED_REASONS = frozenset({"denied", "denied_by_sandbox", "advisor_rejected"})
# A call of a tool no one registered carries a name the model made up: one series for all of them.
UNKNOWN_TOOL = "(unknown)"
# One visibility count per task queue per collection; a slow answer is skipped, not waited for.
COUNT_TIMEOUT = timedelta(seconds=5)


def _where(file: Path | None) -> str:
    return f"{file}: [telemetry]" if file is not None else "[telemetry]"


def _switch(value: str, where: str) -> bool:
    """``AGENTRT_TELEMETRY``: 1/true/yes/on or 0/false/no/off (any case)."""
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ConfigurationError(f"{where} must be 1 or 0 (true/false, yes/no, on/off), not {value!r}")


def _endpoint(value: object, where: str) -> str:
    """An OTLP/HTTP collector's base URL, without a trailing slash (``http://localhost:4318``)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{where} must be a URL such as http://localhost:4318, not {value!r}")
    text = value.strip()
    parsed = urlsplit(text)
    try:
        parsed.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as err:
        raise ConfigurationError(f"{where} {text!r} has an invalid port: {err}") from err
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise ConfigurationError(
            f"{where} must be the http:// or https:// URL of an OTLP/HTTP collector, such as "
            f"http://localhost:4318, not {text!r}"
        )
    base = text.rstrip("/")
    if base.endswith(("/v1/traces", "/v1/metrics")):
        raise ConfigurationError(
            f"{where} is the collector's base URL ({base.rsplit('/v1/', 1)[0]}): agentrt adds /v1/traces "
            f"and /v1/metrics itself, not {text!r}"
        )
    return base


def _service_name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{where} must be a non-empty string, not {value!r}")
    return value.strip()


@dataclass
class TelemetryConfig:
    """The ``[telemetry]`` section. Off by default.

    - ``enabled``: traces and metrics on (env ``AGENTRT_TELEMETRY=1``/``0`` overrides).
    - ``otlp_endpoint``: base URL of an OTLP/HTTP collector (``http://localhost:4318``); traces go
      to ``<url>/v1/traces``, metrics to ``<url>/v1/metrics``. Env ``OTEL_EXPORTER_OTLP_ENDPOINT``
      (read only when telemetry is on), then ``AGENTRT_OTLP_ENDPOINT``, override it. None leaves
      the endpoint to the OTLP exporters' own environment variables (default
      ``http://localhost:4318``).
    - ``service_name``: the ``service.name`` resource attribute (env ``OTEL_SERVICE_NAME`` overrides).

    Raises ``ConfigurationError`` for a value of the wrong type, an endpoint that is not an
    http(s) URL or that already names a signal path (``/v1/traces``), or an empty service name.
    """

    enabled: bool = False
    otlp_endpoint: str | None = None
    service_name: str = DEFAULT_SERVICE_NAME

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ConfigurationError(f"[telemetry] enabled must be true or false, not {self.enabled!r}")
        if self.otlp_endpoint is not None:
            self.otlp_endpoint = _endpoint(self.otlp_endpoint, "[telemetry] otlp_endpoint")
        self.service_name = _service_name(self.service_name, "[telemetry] service_name")


def telemetry_config(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> TelemetryConfig:
    """``[telemetry]`` with environment overrides; raises ``ConfigurationError`` for an unknown key
    or a bad value (naming the file or the environment variable it came from)."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{file}: telemetry must be a table ([telemetry]), not {raw!r}")
    unknown = sorted(set(raw) - TELEMETRY_KEYS)
    if unknown:
        raise ConfigurationError(f"{file}: unknown setting(s) {', '.join('telemetry.' + k for k in unknown)}")
    where = _where(file)
    enabled = raw.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigurationError(f"{where} enabled must be true or false, not {enabled!r}")
    endpoint = _endpoint(raw["otlp_endpoint"], f"{where} otlp_endpoint") if "otlp_endpoint" in raw else None
    service = _service_name(raw.get("service_name", DEFAULT_SERVICE_NAME), f"{where} service_name")
    if TELEMETRY_ENV in env:
        enabled = _switch(env[TELEMETRY_ENV], TELEMETRY_ENV)
    if enabled and env.get(STANDARD_ENDPOINT_ENV):
        endpoint = _endpoint(env[STANDARD_ENDPOINT_ENV], STANDARD_ENDPOINT_ENV)
    if env.get(OTLP_ENDPOINT_ENV):
        endpoint = _endpoint(env[OTLP_ENDPOINT_ENV], OTLP_ENDPOINT_ENV)
    if env.get(SERVICE_NAME_ENV):
        service = _service_name(env[SERVICE_NAME_ENV], SERVICE_NAME_ENV)
    return TelemetryConfig(enabled=enabled, otlp_endpoint=endpoint, service_name=service)


@dataclass
class TelemetryHandle:
    """What ``setup_telemetry`` installed: the process's tracer and meter providers (None when
    telemetry is off). ``flush`` exports what is buffered; ``shutdown`` flushes and stops both
    (the providers stay the process's, recording nothing more). The SDK also shuts them down
    when the process exits."""

    config: TelemetryConfig
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    _closed: bool = field(default=False, init=False, repr=False)

    @property
    def enabled(self) -> bool:
        return self.tracer_provider is not None

    def flush(self, timeout_seconds: float = 30.0) -> bool:
        """Export buffered spans and collect metrics now; False when the exporters did not finish in
        ``timeout_seconds``."""
        if self.tracer_provider is None or self.meter_provider is None or self._closed:
            return True
        millis = int(timeout_seconds * 1000)
        spans = self.tracer_provider.force_flush(millis)
        measures = self.meter_provider.force_flush(millis)
        return bool(spans and measures)

    def shutdown(self) -> None:
        """Flush and stop the providers (once; later calls do nothing)."""
        if self.tracer_provider is None or self.meter_provider is None or self._closed:
            return
        self._closed = True
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _global_providers_set() -> bool:
    """Whether this process already has a tracer or an SDK meter provider (agentrt's or its own)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) or isinstance(
        metrics.get_meter_provider(), (MeterProvider, metrics.NoOpMeterProvider)
    )


def _signal_url(base: str | None, signal: str) -> str | None:
    return f"{base}/v1/{signal}" if base else None


def _shown(url: str | None) -> str:
    """``url`` without a password, for the log."""
    if url is None:
        return "the OTLP exporters' default (OTEL_EXPORTER_OTLP_* or http://localhost:4318)"
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def setup_telemetry(
    config: TelemetryConfig, *, span_exporter: SpanExporter | None = None, metric_reader: MetricReader | None = None
) -> TelemetryHandle:
    """Install this process's OpenTelemetry tracer and meter providers for ``config``.

    Off (``config.enabled`` False): installs nothing and returns a handle whose ``enabled`` is
    False (every agentrt span is then a no-op). On: the providers carry the resource
    ``service.name=config.service_name`` (plus ``OTEL_RESOURCE_ATTRIBUTES``); spans go through a
    batch processor to OTLP/HTTP at ``<otlp_endpoint>/v1/traces`` and metrics every
    ``OTEL_METRIC_EXPORT_INTERVAL`` (default 60 s) to ``<otlp_endpoint>/v1/metrics``.
    ``span_exporter`` replaces the OTLP span exporter (each span exported as it ends, e.g. the
    SDK's ``InMemorySpanExporter``); ``metric_reader`` replaces the OTLP metric reader (e.g.
    ``InMemoryMetricReader``).

    A process has one pair of providers: raises ``ConfigurationError`` when it already has a
    tracer or meter provider (``AgentrtPlugin`` then uses those, and its spans go where the
    process sends its own).
    """
    if not config.enabled:
        return TelemetryHandle(config)
    if _global_providers_set():
        raise ConfigurationError(
            "this process already has an OpenTelemetry tracer or meter provider: agentrt's spans and "
            "measurements go to it; set up telemetry once per process"
        )
    resource = Resource.create({SERVICE_NAME: config.service_name})
    tracer_provider = TracerProvider(resource=resource)
    if span_exporter is not None:
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=_signal_url(config.otlp_endpoint, "traces"), timeout=EXPORT_TIMEOUT_SECONDS)
        ))
    if metric_reader is None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        metric_reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=_signal_url(config.otlp_endpoint, "metrics"), timeout=EXPORT_TIMEOUT_SECONDS)
        )
    meter_provider = MeterProvider(resource=resource, metric_readers=[metric_reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    if span_exporter is None:
        log.info("telemetry: traces and metrics of %s over OTLP/HTTP to %s", config.service_name, _shown(config.otlp_endpoint))
    return TelemetryHandle(config, tracer_provider, meter_provider)


def flush_telemetry(timeout_seconds: float = 5.0) -> bool:
    """Export what the process's SDK tracer and meter providers hold, waiting at most
    ``timeout_seconds`` for each; True when both finished (or the process has none). For a
    process about to exit without running ``atexit`` handlers (the ``agentrt`` command exits
    with ``os._exit``): ``running_worker`` and the CLI's runtime call it on their way out."""
    millis = int(timeout_seconds * 1000)
    done = True
    tracer_provider, meter_provider = trace.get_tracer_provider(), metrics.get_meter_provider()
    if isinstance(tracer_provider, TracerProvider):
        done = tracer_provider.force_flush(millis) and done
    if isinstance(meter_provider, MeterProvider):
        done = meter_provider.force_flush(millis) and done
    return done


_install_lock = threading.Lock()


def ensure_telemetry(config: TelemetryConfig) -> None:
    """Install the process's providers from ``config`` unless it has providers already (an
    earlier ``setup_telemetry``, or the process's own): ``AgentrtPlugin`` with telemetry on."""
    if not config.enabled:
        return
    with _install_lock:
        if not _global_providers_set():
            setup_telemetry(config)


def telemetry_interceptors(given: Iterable[object] = ()) -> list[temporalio.client.Interceptor | temporalio.worker.Interceptor]:
    """The interceptors telemetry adds: Temporal's ``TracingInterceptor`` (unless ``given`` has
    one) and ``EventMeasures``."""
    tracing: list[temporalio.client.Interceptor | temporalio.worker.Interceptor] = (
        [] if any(isinstance(i, TracingInterceptor) for i in given) else [TracingInterceptor()]
    )
    return [*tracing, EventMeasures()]


# ---------------------------------------------------------------- counted from a session's events


class _Instruments:
    """The counters of turns and tool calls, made on one meter."""

    def __init__(self, meter: metrics.Meter) -> None:
        self.turns = meter.create_counter(TURNS, unit="{turn}", description="Turns ended, by status.")
        self.tool_calls = meter.create_counter(
            TOOL_CALLS, unit="{call}", description="Tool calls a model asked for, by tool and outcome (ok, error, denied)."
        )


@functools.lru_cache(maxsize=1)
def _instruments(provider: metrics.MeterProvider) -> _Instruments:
    """The counters of ``provider``, made once: made again only when the process's provider was
    replaced (tests install their own)."""
    return _Instruments(provider.get_meter(SCOPE))


def count_events(events: Iterable[Event]) -> None:
    """Add ``events`` to ``agentrt.turns`` (``TurnEnded``, by ``agentrt.turn.status``) and
    ``agentrt.tool_calls`` (``ToolInvocationCompleted`` as ``ok``; ``ToolInvocationFailed`` as
    ``denied`` for a policy, approver, sandbox or advisor refusal, else ``error``, with
    ``error.type`` its reason; by ``gen_ai.tool.name``, ``(unknown)`` for a tool no one registered)."""
    instruments: _Instruments | None = None
    for event in events:
        if not isinstance(event, (TurnEnded, ToolInvocationCompleted, ToolInvocationFailed)):
            continue
        instruments = instruments or _instruments(metrics.get_meter_provider())
        if isinstance(event, TurnEnded):
            instruments.turns.add(1, {TURN_STATUS: event.status})
        elif isinstance(event, ToolInvocationCompleted):
            instruments.tool_calls.add(1, {TOOL_NAME: event.tool, TOOL_OUTCOME: "ok"})
        else:
            tool = UNKNOWN_TOOL if event.reason == "unknown_tool" else event.tool
            outcome = "denied" if event.reason in DENIED_REASONS else "error"
            instruments.tool_calls.add(1, {TOOL_NAME: tool, TOOL_OUTCOME: outcome, ERROR_TYPE: event.reason})


def _writes_in(args: Iterable[object]) -> Iterator[StoreAppendInput]:
    """The store writes an activity's arguments carry: ``store.append``'s input, or the staged
    writes (``store_writes``) of a model, tool, MCP or advisor call."""
    for arg in args:
        if isinstance(arg, StoreAppendInput):
            yield arg
        else:
            writes = getattr(arg, "store_writes", None)
            if isinstance(writes, StoreAppendInput):
                yield writes


class EventMeasures(temporalio.worker.Interceptor):
    """Counts turns and tool calls from the events an activity wrote to the store, once the
    activity succeeded.

    The events are the session's record of what happened, and every one reaches the store in an
    activity: ``store.append`` or the writes staged in the next model or tool call. A call that
    failed leaves its staged writes for the next one, so each event is counted with the write
    that succeeded. (A local activity run again after its worker died before completing the
    workflow task writes nothing new, and is counted again.)
    """

    def intercept_activity(self, next: temporalio.worker.ActivityInboundInterceptor) -> temporalio.worker.ActivityInboundInterceptor:
        return _EventMeasuresInbound(next)


class _EventMeasuresInbound(temporalio.worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        result = await super().execute_activity(input)
        for writes in _writes_in(input.args):
            count_events(writes.events)
        return result


# ---------------------------------------------------------------- read from visibility


def _in_thread_of(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class SessionsAwaitingApproval:
    """Observable gauge ``agentrt.sessions.awaiting_approval``: running sessions whose
    ``AgentSessionStatus`` is ``awaiting_approval``, per namespace and task queue a worker of
    this process serves (attributes ``temporal.namespace``, ``temporal.task_queue``).

    Counted by visibility (``count_workflows``) when the metrics are collected: the status the
    session workflow publishes is the durable record of its wait, so the value survives worker
    restarts and moves between workers, and never counts a wait twice. Every process serving a
    task queue reports the same number (a gauge: read it with ``max``). Visibility lags the
    workflow by up to a second or so. A collection on the thread of the worker's event loop
    (which the count needs) skips the queue rather than block it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[tuple[str, str], tuple[temporalio.client.Client, asyncio.AbstractEventLoop, int]] = {}
        self._providers: weakref.WeakSet[metrics.MeterProvider] = weakref.WeakSet()

    @contextmanager
    def watching(self, client: temporalio.client.Client, task_queue: str) -> Iterator[None]:
        """Report ``task_queue`` (on ``client``'s namespace) while the block runs, from the event loop running it."""
        loop = asyncio.get_running_loop()
        key = (client.namespace, task_queue)
        self._register(metrics.get_meter_provider())
        with self._lock:
            _, _, count = self._watched.get(key, (client, loop, 0))
            self._watched[key] = (client, loop, count + 1)
        try:
            yield
        finally:
            with self._lock:
                client, loop, count = self._watched[key]
                if count > 1:
                    self._watched[key] = (client, loop, count - 1)
                else:
                    del self._watched[key]

    def _register(self, provider: metrics.MeterProvider) -> None:
        with self._lock:
            if provider in self._providers:
                return
            self._providers.add(provider)
        provider.get_meter(SCOPE).create_observable_gauge(
            SESSIONS_AWAITING_APPROVAL,
            callbacks=[self._observe],
            unit="{session}",
            description="Running sessions waiting for an approval (visibility: AgentSessionStatus = awaiting_approval).",
        )

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            watched = [(key, client, loop) for key, (client, loop, _) in self._watched.items()]
        found = []
        for (namespace, task_queue), client, loop in watched:
            count = self._count(client, loop, task_queue)
            if count is not None:
                found.append(Observation(count, {"temporal.namespace": namespace, "temporal.task_queue": task_queue}))
        return found

    @staticmethod
    def _count(client: temporalio.client.Client, loop: asyncio.AbstractEventLoop, task_queue: str) -> int | None:
        if loop.is_closed() or not loop.is_running() or _in_thread_of(loop):
            return None
        query = (
            f"WorkflowType = '{SESSION_WORKFLOW}' AND ExecutionStatus = 'Running' AND "
            f"{SESSION_STATUS.name} = 'awaiting_approval' AND TaskQueue = '{task_queue}'"
        )
        future = asyncio.run_coroutine_threadsafe(client.count_workflows(query, rpc_timeout=COUNT_TIMEOUT), loop)
        try:
            return future.result(timeout=COUNT_TIMEOUT.total_seconds() + 1).count
        except Exception as err:  # noqa: BLE001 - a gauge skips a count it cannot make
            future.cancel()
            log.debug("could not count the sessions awaiting approval on %s: %s", task_queue, err)
            return None


sessions_awaiting_approval = SessionsAwaitingApproval()
