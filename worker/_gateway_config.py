"""The ``[gateway]`` section: what the HTTP gateway (``agentrt serve``) listens on, its bearer
tokens (token hash -> principal, with scopes) and its webhooks.

```toml
[gateway]
host = "127.0.0.1"
port = 8080

[[gateway.tokens]]
sha256 = "9f86d0…"            # hex SHA-256 of the token; the token itself is never stored
principal = "alice"
scopes = ["sessions", "runs"]  # GATEWAY_SCOPES; "admin" implies all

[[gateway.webhooks]]
url = "https://hooks.example.com/agentrt"
secret_env = "AGENTRT_WEBHOOK_SECRET"   # or secret = "..."
events = ["turn.ended", "approval.requested", "run.status"]
```
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from agentrt.schemas import ConfigurationError

GATEWAY_KEYS = {"host", "port", "tokens", "webhooks"}
TOKEN_KEYS = {"sha256", "principal", "scopes"}
WEBHOOK_KEYS = {"url", "secret", "secret_env", "events"}
# sessions: create, send, read and steer one's own sessions (approvals included); tasks: autonomous
# tasks; runs: task graphs (the runs API); network: start them with network for their commands
# (through the egress proxy); admin: all of them, and sandbox = "danger_full_access".
GATEWAY_SCOPES = ("sessions", "tasks", "runs", "network", "admin")
WEBHOOK_EVENTS = ("turn.ended", "approval.requested", "run.status")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class GatewayToken:
    """One bearer token: requests carrying it act as ``principal`` within ``scopes``."""

    sha256: str
    principal: str
    scopes: tuple[str, ...] = ("sessions",)

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes


@dataclass(frozen=True)
class WebhookTarget:
    """Where the gateway posts signed notifications (HMAC-SHA256 with ``secret``) of ``events``.

    ``secret_env`` names the environment variable the secret came from; when it was not set
    where the configuration was read, ``secret`` is empty: only the gateway needs it, so only
    the gateway refuses to start (``WebhookDispatcher``), not every process sharing the file."""

    url: str
    secret: str
    events: tuple[str, ...] = WEBHOOK_EVENTS
    secret_env: str | None = None


@dataclass
class GatewayConfig:
    """The ``[gateway]`` section: ``host`` and ``port`` (TCP) ``agentrt serve`` binds by default,
    ``tokens`` it accepts, ``webhooks`` it notifies. ``AGENTRT_GATEWAY_TOKEN`` (a token in clear)
    adds one admin token for principal ``AGENTRT_GATEWAY_PRINCIPAL`` (default ``operator``)."""

    host: str = "127.0.0.1"
    port: int = 8080
    tokens: list[GatewayToken] = field(default_factory=list)
    webhooks: list[WebhookTarget] = field(default_factory=list)

    def token_for(self, presented: str) -> GatewayToken | None:
        """The configured token whose hash is SHA-256(``presented``), or None."""
        digest = token_sha256(presented)
        return next((t for t in self.tokens if _equal(t.sha256, digest)), None)


def token_sha256(token: str) -> str:
    """Hex SHA-256 of a bearer token, as ``[[gateway.tokens]] sha256`` holds it."""
    return hashlib.sha256(token.encode()).hexdigest()


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a, b)


def _token(raw: object, where: str) -> GatewayToken:
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{where} must be a table, not {raw!r}")
    unknown = sorted(set(raw) - TOKEN_KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(TOKEN_KEYS))}")
    digest = raw.get("sha256")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest.lower()):
        raise ConfigurationError(f"{where}: sha256 must be 64 hex digits (the token's SHA-256), not {digest!r}")
    principal = raw.get("principal")
    if not isinstance(principal, str) or not principal.strip():
        raise ConfigurationError(f"{where}: principal must be a non-empty string, not {principal!r}")
    scopes = raw.get("scopes", ["sessions"])
    if not isinstance(scopes, list) or not scopes or any(s not in GATEWAY_SCOPES for s in scopes):
        raise ConfigurationError(f"{where}: scopes must be a non-empty list of {', '.join(GATEWAY_SCOPES)}, not {scopes!r}")
    return GatewayToken(sha256=digest.lower(), principal=principal, scopes=tuple(scopes))


def _webhook(raw: object, where: str, env: Mapping[str, str]) -> WebhookTarget:
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{where} must be a table, not {raw!r}")
    unknown = sorted(set(raw) - WEBHOOK_KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(WEBHOOK_KEYS))}")
    url = raw.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{where}: url must be an http(s) URL, not {url!r}")
    if ("secret" in raw) == ("secret_env" in raw):
        raise ConfigurationError(f"{where}: give exactly one of secret, secret_env")
    secret_env = None
    if "secret_env" in raw:
        secret_env = raw["secret_env"]
        if not isinstance(secret_env, str) or not secret_env:
            raise ConfigurationError(f"{where}: secret_env must name an environment variable, not {secret_env!r}")
        secret = env.get(secret_env, "")
    else:
        secret = raw["secret"]
        if not isinstance(secret, str) or not secret:
            raise ConfigurationError(f"{where}: secret must be a non-empty string")
    events = raw.get("events", list(WEBHOOK_EVENTS))
    if not isinstance(events, list) or not events or any(e not in WEBHOOK_EVENTS for e in events):
        raise ConfigurationError(f"{where}: events must be a non-empty list of {', '.join(WEBHOOK_EVENTS)}, not {events!r}")
    return WebhookTarget(url=url, secret=secret, events=tuple(events), secret_env=secret_env)


def gateway_config(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str] | None = None) -> GatewayConfig:
    """``[gateway]`` with environment overrides (``AGENTRT_GATEWAY_TOKEN``, ``AGENTRT_GATEWAY_PRINCIPAL``);
    raises ``ConfigurationError`` for an unknown key or a bad value, naming it."""
    env = os.environ if env is None else env
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{file}: gateway must be a table ([gateway]), not {raw!r}")
    unknown = sorted(set(raw) - GATEWAY_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{file}: unknown setting(s) {', '.join('gateway.' + k for k in unknown)}; known: {', '.join(sorted(GATEWAY_KEYS))}"
        )
    config = GatewayConfig()
    if "host" in raw:
        if not isinstance(raw["host"], str) or not raw["host"]:
            raise ConfigurationError(f"{file}: [gateway] host must be a non-empty string, not {raw['host']!r}")
        config.host = raw["host"]
    if "port" in raw:
        port = raw["port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigurationError(f"{file}: [gateway] port must be an integer in 1..65535, not {port!r}")
        config.port = port
    tokens = raw.get("tokens", [])
    if not isinstance(tokens, list):
        raise ConfigurationError(f"{file}: gateway.tokens must be an array of tables ([[gateway.tokens]]), not {tokens!r}")
    config.tokens = [_token(t, f"{file}: [[gateway.tokens]] #{i + 1}") for i, t in enumerate(tokens)]
    webhooks = raw.get("webhooks", [])
    if not isinstance(webhooks, list):
        raise ConfigurationError(f"{file}: gateway.webhooks must be an array of tables ([[gateway.webhooks]]), not {webhooks!r}")
    config.webhooks = [_webhook(w, f"{file}: [[gateway.webhooks]] #{i + 1}", env) for i, w in enumerate(webhooks)]
    if env.get("AGENTRT_GATEWAY_TOKEN"):
        principal = env.get("AGENTRT_GATEWAY_PRINCIPAL") or "operator"
        config.tokens.append(GatewayToken(sha256=token_sha256(env["AGENTRT_GATEWAY_TOKEN"]), principal=principal, scopes=("admin",)))
    return config
