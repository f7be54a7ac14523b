"""Model provider adapters behind one Protocol, so activities call any model the same way.

``provider_for(profile)`` builds the adapter a ``ModelProfile`` names: ``OpenAIProvider``
(Chat Completions and compatible servers), ``OpenAIResponsesProvider`` (OpenAI's Responses
API), ``AnthropicProvider`` (Messages) or ``ScriptedProvider`` (offline). Adapters raise
``ProviderHTTPError`` / ``ProviderTransportError`` / ``ProviderProtocolError``;
``application_error_from`` turns those into the Temporal ``ApplicationError`` an activity
raises. Nothing outside this package imports httpx.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

from agentrt.activities.providers._base import OnDelta, Provider, ToolNames, tool_call_from_text, uses_output_tool
from agentrt.activities.providers._clients import ProviderClients
from agentrt.activities.providers._errors import application_error_from, bounded_message, redact, retry_after_seconds
from agentrt.activities.providers.anthropic import AnthropicProvider
from agentrt.activities.providers.openai import OpenAIProvider
from agentrt.activities.providers.openai_responses import OpenAIResponsesProvider
from agentrt.activities.providers.scripted import ScriptedProvider
from agentrt.schemas import ConfigurationError, ModelProfile

__all__ = [
    "AnthropicProvider",
    "OnDelta",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ProviderClients",
    "ScriptedProvider",
    "ToolNames",
    "application_error_from",
    "bounded_message",
    "provider_for",
    "redact",
    "retry_after_seconds",
    "tool_call_from_text",
    "uses_output_tool",
]


def provider_for(
    profile: ModelProfile, *, env: Mapping[str, str] | None = None, client: httpx.AsyncClient | None = None
) -> Provider:
    """The adapter for ``profile``, with its API key read from ``env`` (default ``os.environ``),
    sending on ``client`` (a ``ProviderClients`` pool's; None: a new client per call).

    The key is ``env[profile.api_key_env]``. Raises ``ConfigurationError`` when:
    ``api_key_env`` is named but unset or empty in ``env``; ``api_key_env`` is None for the
    vendor's own endpoint (no ``base_url``: api.openai.com and api.anthropic.com always
    need a key; a ``base_url`` such as a local vLLM/Ollama/llama.cpp server may go
    without); the key has characters no HTTP header carries (``check_api_key``: a trailing
    newline, a space, non-ASCII); ``model`` is empty for ``openai``/``openai-responses``/``anthropic``;
    ``script`` is missing for ``scripted``. The key lives only in the returned adapter, never in workflow history.
    The messages name the worker's configuration or environment: a client reads them in a failed turn.
    """
    configured = f"model profile {profile.name!r} of the worker's configuration"
    if profile.provider == "scripted":
        if not profile.script:
            raise ConfigurationError(f"{configured} uses the scripted provider but sets no script")
        return ScriptedProvider(profile)
    if not profile.model:
        raise ConfigurationError(f"{configured} names no model")
    environ = os.environ if env is None else env
    api_key: str | None = None
    if profile.api_key_env is not None:
        api_key = environ.get(profile.api_key_env) or None
        if api_key is None:
            raise ConfigurationError(
                f"model profile {profile.name!r} reads its API key from ${profile.api_key_env}, "
                "which is not set in the worker's environment"
            )
    elif profile.base_url is None:
        raise ConfigurationError(f"{configured} calls the {profile.provider} API but sets no api_key_env")
    if profile.provider == "openai":
        return OpenAIProvider(profile, api_key, client=client)
    if profile.provider == "openai-responses":
        return OpenAIResponsesProvider(profile, api_key, client=client)
    if profile.provider == "anthropic":
        return AnthropicProvider(profile, api_key, client=client)
    raise ConfigurationError(f"{configured} names an unknown provider {profile.provider!r}")
