"""Fixtures for provider wire tests: a loopback HTTP server and a closed port."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.activities.providers._loopback import LoopbackServer


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    srv = LoopbackServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
