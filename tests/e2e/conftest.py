"""Fixtures of the end-to-end tests: a loopback HTTP server that speaks a provider's wire format."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.activities.providers._loopback import LoopbackServer

# The environment variable a loopback provider profile reads its (fake) key from.
KEY_ENV = "AGENTRT_TEST_RECORDED_KEY"


@pytest.fixture
def provider_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """A loopback HTTP server that replays the replies a test gives it and keeps its requests."""
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
    server = LoopbackServer().start()
    yield server
    server.stop()
