"""One pooled HTTP client per model profile, kept for the worker's life.

A new ``httpx.AsyncClient`` per call costs its set-up and a new connection (TCP, and TLS to a
hosted provider) before the request leaves: about 17 ms measured on a loopback provider here,
more over the internet. A worker's model calls of one profile share one client, so a call
reuses a kept-alive connection (httpx keeps idle ones 5 s by default).
"""

from __future__ import annotations

import asyncio
import weakref

import httpx

from agentrt.activities.providers._base import new_client
from agentrt.schemas import ModelProfile


class ProviderClients:
    """``client(profile)``: the HTTP client of ``profile`` on the running event loop (clients
    belong to the loop that made them), made on first use. None for the scripted provider,
    which sends no request. Profiles are the worker's configured ones, so the set is bounded."""

    def __init__(self) -> None:
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str | None, float], httpx.AsyncClient]] = (
            weakref.WeakKeyDictionary()
        )

    def client(self, profile: ModelProfile) -> httpx.AsyncClient | None:
        if profile.provider == "scripted":
            return None
        clients = self._clients.setdefault(asyncio.get_running_loop(), {})
        key = (profile.name, profile.base_url, profile.timeout_seconds)
        client = clients.get(key)
        if client is None or client.is_closed:
            client = clients[key] = new_client(profile.timeout_seconds)
        return client
