"""OpenTelemetry for agentrt processes: the ``[telemetry]`` section, tracer and meter providers,
the SDK's tracing interceptor, and the GenAI spans of model and tool calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from agentrt.schemas import ConfigurationError

TELEMETRY_KEYS = {"enabled", "otlp_endpoint", "service_name"}


@dataclass
class TelemetryConfig:
    """The ``[telemetry]`` section. Off by default."""

    enabled: bool = False
    otlp_endpoint: str | None = None
    service_name: str = "agentrt"


def telemetry_config(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> TelemetryConfig:
    """``[telemetry]`` with environment overrides; raises ``ConfigurationError`` for an unknown key or bad value."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{file}: telemetry must be a table ([telemetry]), not {raw!r}")
    unknown = sorted(set(raw) - TELEMETRY_KEYS)
    if unknown:
        raise ConfigurationError(f"{file}: unknown setting(s) {', '.join('telemetry.' + k for k in unknown)}")
    return TelemetryConfig(**dict(raw))
