"""Fixtures for the MCP manager tests: managers on a temporary home, closed after each test, a
real store, and the shared real MCP servers of ``tests/mcp_servers.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrt.activities.mcp import McpManager
from agentrt.schemas import McpServerConfig
from agentrt.store import Store
from tests.mcp_servers import everything_http, probe_http  # noqa: F401 - fixtures

MakeManager = Callable[..., McpManager]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store of this test's own."""
    with Store.open(f"sqlite:///{tmp_path / 'db'}") as store:
        yield store


@pytest.fixture
async def managers(tmp_path: Path) -> AsyncIterator[MakeManager]:
    """``make(*configs, store=None, env={}, **options)``: a manager of ``configs`` on
    ``tmp_path/home`` whose ``${VAR}`` references read ``env`` (not the test's environment);
    every manager made is closed after the test."""
    made: list[McpManager] = []

    def make(*configs: McpServerConfig, store: Store | None = None, env: dict[str, str] | None = None, **options: Any) -> McpManager:
        manager = McpManager(
            {c.name: c for c in configs}, store=store, worker="test-worker", home=tmp_path / "home",
            env={} if env is None else env, **options,
        )
        made.append(manager)
        return manager

    yield make
    for manager in made:
        await manager.close()
