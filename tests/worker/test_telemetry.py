"""The ``[telemetry]`` section, setup_telemetry's providers and exporters, the plugin's interceptors,
and the counters read from a session's events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once
from temporalio.contrib.opentelemetry import TracingInterceptor

from agentrt.schemas import ConfigurationError, ToolInvocationCompleted, ToolInvocationFailed, TurnEnded, Usage
from agentrt.worker import AgentrtConfig, AgentrtPlugin, TelemetryConfig, flush_telemetry, setup_telemetry
from agentrt.worker._telemetry import EventMeasures, count_events, telemetry_config
from tests.activities.providers._loopback import LoopbackServer, Reply


def reset_opentelemetry() -> None:
    """Forget the process's tracer and meter providers, as OpenTelemetry's own tests do: a process
    sets them once, and each test here installs its own."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None


@pytest.fixture(autouse=True)
def fresh_opentelemetry() -> Iterator[None]:
    reset_opentelemetry()
    yield
    reset_opentelemetry()


def nothing_installed() -> bool:
    """The process has neither a tracer provider nor an SDK meter provider: every span is a no-op."""
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and not isinstance(
        metrics.get_meter_provider(), MeterProvider
    )


def measured(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, object], ...], float]:
    """``{sorted attributes: value}`` of metric ``name`` (sums' values; histograms' sums)."""
    found: dict[tuple[tuple[str, object], ...], float] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else []:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found[tuple(sorted(point.attributes.items()))] = point.value if hasattr(point, "value") else point.sum
    return found


# ---------------------------------------------------------------- configuration


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentrt.toml"
    path.write_text(text)
    return path


def test_telemetry_is_off_by_default(tmp_path: Path) -> None:
    config = AgentrtConfig.load(write_config(tmp_path, ""), env={})
    assert config.telemetry == TelemetryConfig(enabled=False, otlp_endpoint=None, service_name="agentrt")


def test_the_telemetry_section_is_read_from_agentrt_toml(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[telemetry]\nenabled = true\notlp_endpoint = "http://collector:4318/"\nservice_name = "agents"\n')
    assert AgentrtConfig.load(path, env={}).telemetry == TelemetryConfig(True, "http://collector:4318", "agents")


def test_agentrt_telemetry_env_turns_telemetry_on_and_off(tmp_path: Path) -> None:
    on = write_config(tmp_path, "[telemetry]\nenabled = true\n")
    assert telemetry_config({}, None, {"AGENTRT_TELEMETRY": "1"}).enabled is True
    assert AgentrtConfig.load(on, env={"AGENTRT_TELEMETRY": "0"}).telemetry.enabled is False


def test_the_standard_otlp_endpoint_env_is_read_only_when_telemetry_is_on() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"}
    assert telemetry_config({}, None, env).otlp_endpoint is None
    assert telemetry_config({"enabled": True}, None, env).otlp_endpoint == "http://otel:4318"


def test_agentrt_otlp_endpoint_env_beats_the_standard_one_and_the_file() -> None:
    env = {"AGENTRT_TELEMETRY": "on", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "AGENTRT_OTLP_ENDPOINT": "https://mine:4318"}
    assert telemetry_config({"otlp_endpoint": "http://file:4318"}, None, env).otlp_endpoint == "https://mine:4318"


def test_otel_service_name_env_names_the_service() -> None:
    assert telemetry_config({"service_name": "file"}, None, {"OTEL_SERVICE_NAME": "from-env"}).service_name == "from-env"


def test_an_endpoint_without_a_scheme_is_a_configuration_error_naming_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[telemetry]\nenabled = true\notlp_endpoint = "collector:4318"\n')
    with pytest.raises(ConfigurationError) as caught:
        AgentrtConfig.load(path, env={})
    assert str(caught.value) == (
        f"{path}: [telemetry] otlp_endpoint must be the http:// or https:// URL of an OTLP/HTTP collector, "
        "such as http://localhost:4318, not 'collector:4318'"
    )
    assert nothing_installed()


def test_an_endpoint_that_names_a_signal_path_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"AGENTRT_OTLP_ENDPOINT is the collector's base URL \(http://c:4318\)"):
        telemetry_config({}, None, {"AGENTRT_OTLP_ENDPOINT": "http://c:4318/v1/traces"})


def test_an_endpoint_with_a_bad_port_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="has an invalid port"):
        TelemetryConfig(enabled=True, otlp_endpoint="http://c:99999")


def test_enabled_must_be_a_toml_boolean(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[telemetry]\nenabled = "yes"\n')
    with pytest.raises(ConfigurationError, match=r"\[telemetry\] enabled must be true or false, not 'yes'"):
        AgentrtConfig.load(path, env={})


def test_an_unknown_agentrt_telemetry_value_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"AGENTRT_TELEMETRY must be 1 or 0 .*not 'maybe'"):
        telemetry_config({}, None, {"AGENTRT_TELEMETRY": "maybe"})


def test_an_unknown_telemetry_key_is_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[telemetry]\nendpoint = "http://c:4318"\n')
    with pytest.raises(ConfigurationError, match="unknown setting.*telemetry.endpoint"):
        AgentrtConfig.load(path, env={})


def test_an_empty_service_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="OTEL_SERVICE_NAME must be a non-empty string"):
        telemetry_config({}, None, {"OTEL_SERVICE_NAME": "  "})


# ---------------------------------------------------------------- providers


def test_setup_with_telemetry_off_installs_nothing() -> None:
    handle = setup_telemetry(TelemetryConfig())
    assert handle.enabled is False
    assert handle.flush() is True
    handle.shutdown()
    assert nothing_installed()


def test_setup_installs_the_process_providers_with_the_service_name() -> None:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    handle = setup_telemetry(TelemetryConfig(enabled=True, service_name="agents-a"), span_exporter=exporter, metric_reader=reader)
    trace.get_tracer("t").start_span("probe").end()
    assert trace.get_tracer_provider() is handle.tracer_provider
    assert metrics.get_meter_provider() is handle.meter_provider
    [span] = exporter.get_finished_spans()
    assert span.name == "probe" and span.resource.attributes["service.name"] == "agents-a"
    handle.shutdown()


def test_a_second_setup_in_one_process_is_refused_and_keeps_the_first() -> None:
    first = setup_telemetry(TelemetryConfig(enabled=True), span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader())
    with pytest.raises(ConfigurationError, match="already has an OpenTelemetry tracer or meter provider"):
        setup_telemetry(TelemetryConfig(enabled=True), span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader())
    assert trace.get_tracer_provider() is first.tracer_provider
    first.shutdown()


def test_spans_and_metrics_reach_an_otlp_http_collector_at_the_endpoint() -> None:
    collector = LoopbackServer().start()
    ok = Reply(status=200, headers={"Content-Type": "application/x-protobuf"}, chunks=[], content_length=0)
    collector.reply(ok, ok)
    try:
        handle = setup_telemetry(TelemetryConfig(enabled=True, otlp_endpoint=collector.url + "/otel/", service_name="svc"))
        trace.get_tracer("t").start_span("probe").end()
        count_events([TurnEnded(turn_id="t1", status="completed", rounds=1, usage=Usage())])
        assert handle.flush(timeout_seconds=10)
        handle.shutdown()
    finally:
        collector.stop()
    by_path = {r.path: r for r in collector.requests}
    assert sorted(by_path) == ["/otel/v1/metrics", "/otel/v1/traces"]
    traces = ExportTraceServiceRequest.FromString(by_path["/otel/v1/traces"].body)
    assert [s.name for rs in traces.resource_spans for ss in rs.scope_spans for s in ss.spans] == ["probe"]
    sent = ExportMetricsServiceRequest.FromString(by_path["/otel/v1/metrics"].body)
    names = {m.name for rm in sent.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert "agentrt.turns" in names
    service = {a.key: a.value.string_value for a in traces.resource_spans[0].resource.attributes}["service.name"]
    assert service == "svc"


# ---------------------------------------------------------------- the plugin


def test_a_plugin_with_telemetry_off_adds_no_interceptor_and_installs_nothing() -> None:
    plugin = AgentrtPlugin(AgentrtConfig())
    assert not any(isinstance(i, (TracingInterceptor, EventMeasures)) for i in plugin.interceptors or [])
    assert nothing_installed()


def test_a_plugin_with_telemetry_on_adds_one_tracing_interceptor_and_the_event_measures() -> None:
    setup_telemetry(TelemetryConfig(enabled=True), span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader())
    plugin = AgentrtPlugin(AgentrtConfig(telemetry=TelemetryConfig(enabled=True)))
    kinds = [type(i) for i in plugin.interceptors or []]
    assert kinds.count(TracingInterceptor) == 1 and kinds.count(EventMeasures) == 1


def test_a_plugin_given_its_own_tracing_interceptor_does_not_add_another() -> None:
    setup_telemetry(TelemetryConfig(enabled=True), span_exporter=InMemorySpanExporter(), metric_reader=InMemoryMetricReader())
    own = TracingInterceptor()
    plugin = AgentrtPlugin(AgentrtConfig(telemetry=TelemetryConfig(enabled=True)), interceptors=[own])
    assert [i for i in plugin.interceptors or [] if isinstance(i, TracingInterceptor)] == [own]


def test_a_plugin_with_telemetry_on_installs_providers_in_a_process_that_has_none() -> None:
    collector = LoopbackServer().start()
    collector.reply(*[Reply(status=200, headers={"Content-Type": "application/x-protobuf"}, content_length=0)] * 4)
    try:
        AgentrtPlugin(AgentrtConfig(telemetry=TelemetryConfig(enabled=True, otlp_endpoint=collector.url)))
        provider = trace.get_tracer_provider()
        trace.get_tracer("t").start_span("probe").end()
        assert flush_telemetry(timeout_seconds=10) is True
        provider.shutdown()  # type: ignore[attr-defined]
        metrics.get_meter_provider().shutdown()  # type: ignore[attr-defined]
    finally:
        collector.stop()
    assert "/v1/traces" in [r.path for r in collector.requests]


def test_flushing_a_process_without_providers_does_nothing() -> None:
    assert flush_telemetry() is True
    assert nothing_installed()


def test_a_plugin_with_telemetry_on_uses_the_providers_the_process_already_has() -> None:
    exporter = InMemorySpanExporter()
    handle = setup_telemetry(TelemetryConfig(enabled=True), span_exporter=exporter, metric_reader=InMemoryMetricReader())
    AgentrtPlugin(AgentrtConfig(telemetry=TelemetryConfig(enabled=True, otlp_endpoint="http://127.0.0.1:9")))
    assert trace.get_tracer_provider() is handle.tracer_provider


# ---------------------------------------------------------------- counted from events


def test_turns_and_tool_calls_are_counted_by_status_and_outcome() -> None:
    reader = InMemoryMetricReader()
    setup_telemetry(TelemetryConfig(enabled=True), span_exporter=InMemorySpanExporter(), metric_reader=reader)
    count_events([
        ToolInvocationCompleted(turn_id="t1", call_id="c1", tool="fs.read", preview="", size_bytes=1, position=2),
        ToolInvocationFailed(turn_id="t1", call_id="c2", tool="fs.write", reason="denied", error="denied by alice"),
        ToolInvocationFailed(turn_id="t1", call_id="c3", tool="shell.run", reason="tool_error", error="exit 1"),
        TurnEnded(turn_id="t1", status="completed", rounds=2, usage=Usage()),
        TurnEnded(turn_id="t2", status="failed", rounds=1, usage=Usage()),
    ])
    assert measured(reader, "agentrt.turns") == {
        (("agentrt.turn.status", "completed"),): 1, (("agentrt.turn.status", "failed"),): 1,
    }
    assert measured(reader, "agentrt.tool_calls") == {
        (("agentrt.tool.outcome", "ok"), ("gen_ai.tool.name", "fs.read")): 1,
        (("agentrt.tool.outcome", "denied"), ("error.type", "denied"), ("gen_ai.tool.name", "fs.write")): 1,
        (("agentrt.tool.outcome", "error"), ("error.type", "tool_error"), ("gen_ai.tool.name", "shell.run")): 1,
    }


def test_tool_names_a_model_made_up_count_as_one_series() -> None:
    reader = InMemoryMetricReader()
    setup_telemetry(TelemetryConfig(enabled=True), span_exporter=InMemorySpanExporter(), metric_reader=reader)
    count_events(
        ToolInvocationFailed(turn_id="t1", call_id=f"c{i}", tool=f"made.up.{i}" * 50, reason="unknown_tool", error="no such tool")
        for i in range(200)
    )
    assert measured(reader, "agentrt.tool_calls") == {
        (("agentrt.tool.outcome", "error"), ("error.type", "unknown_tool"), ("gen_ai.tool.name", "(unknown)")): 200,
    }


def test_counting_without_providers_records_nothing_and_raises_nothing() -> None:
    count_events([TurnEnded(turn_id="t1", status="completed", rounds=1, usage=Usage())])
    assert nothing_installed()
