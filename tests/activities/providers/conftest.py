"""Fixtures for provider wire tests: a loopback HTTP server (``closed_port_url`` is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.activities.providers._loopback import LoopbackServer


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    srv = LoopbackServer().start()
    yield srv
    srv.stop()
