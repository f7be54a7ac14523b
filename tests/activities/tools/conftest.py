"""Fixtures for the built-in tool tests: a real temporary workspace and a context on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.activities.tools import ToolContext, default_registry


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, with a secret file in it."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret\n")
    return out


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)


@pytest.fixture
def registry():
    return default_registry()
