"""The Temporal SDK's own worker metrics (workflow and activity task latencies, slots, polls,
requests: sdk-core's ``temporal_*`` metrics) in the process's OpenTelemetry meter provider, beside
agentrt's, through the SDK's ``temporalio.contrib.opentelemetry.MetricsExporter``: core records
into a ``MetricBuffer`` of a runtime of the process's own, and the exporter drains it every second."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from opentelemetry import metrics
from temporalio.contrib.opentelemetry import MetricsExporter
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig as RuntimeTelemetryConfig

from agentrt.worker._telemetry import TelemetryConfig

__all__ = ["METRIC_BUFFER_SIZE", "sdk_metrics_runtime"]

# Metric updates core may hold between two drains (one a second); beyond it core drops them.
METRIC_BUFFER_SIZE = 10_000


@asynccontextmanager
async def sdk_metrics_runtime(config: TelemetryConfig) -> AsyncIterator[Runtime | None]:
    """A Temporal runtime whose metrics go to the process's meter provider while the block runs
    (connect the worker's client with it: ``Client.connect(..., runtime=...)``), or None with
    telemetry off (the SDK's default runtime, no metrics). Install the meter provider first
    (``AgentrtPlugin`` does, with telemetry on)."""
    if not config.enabled:
        yield None
        return
    buffer = MetricBuffer(METRIC_BUFFER_SIZE)
    runtime = Runtime(telemetry=RuntimeTelemetryConfig(metrics=buffer))
    async with MetricsExporter(buffer, metrics.get_meter_provider()):
        yield runtime
