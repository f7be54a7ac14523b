"""The gateway package stays readable and uses only the public face of the worker package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gateway"
MODULES = sorted(PACKAGE.glob("*.py"))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_no_gateway_module_is_longer_than_500_lines(module: Path) -> None:
    assert len(module.read_text().splitlines()) <= 500


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_no_gateway_module_imports_a_private_worker_module(module: Path) -> None:
    imported = [
        node.module
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    ]
    assert [name for name in imported if name.startswith("agentrt.worker._")] == []
