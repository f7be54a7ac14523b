"""The repository's layout as pyproject.toml declares it: which root folder installs as which
``agentrt.*`` package. The layering, exported-members and wheel tests all start from here."""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, str]:
    """``{"agentrt.schemas": "schemas", ...}``: each installed top-level package and its root folder."""
    return dict(_package_dirs())


@cache
def _package_dirs() -> tuple[tuple[str, str], ...]:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return tuple(pyproject["tool"]["setuptools"]["package-dir"].items())


def agentrt_modules() -> list[str]:
    """Every importable module of agentrt (packages and modules), imported on the way; sorted."""
    names: set[str] = set()
    for top in package_dirs():
        package = importlib.import_module(top)
        names.add(top)
        names.update(info.name for info in pkgutil.walk_packages(package.__path__, f"{top}."))
    return sorted(names)


def agentrt_packages() -> list[str]:
    """Every package (a folder with ``__init__.py``) of agentrt, sorted."""
    return [name for name in agentrt_modules() if hasattr(importlib.import_module(name), "__path__")]
