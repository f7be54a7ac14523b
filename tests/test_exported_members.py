"""Every package's ``__all__`` is its public API, kept honest (after httpx's test of the same
name): each listed name exists, the list is sorted, and each public name the ``__init__``
takes from the package's own modules or defines itself is listed."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest

from tests._packages import agentrt_packages

PACKAGES = agentrt_packages()


def init_source(package: str) -> ast.Module:
    return ast.parse(Path(inspect.getfile(importlib.import_module(package))).read_text())


def imported_names(node: ast.ImportFrom, package: str) -> set[str]:
    """The names ``node`` binds; for ``from M import *``, the names ``M.__all__`` lists (a module a
    package star-imports must declare ``__all__``)."""
    if [alias.name for alias in node.names] != ["*"]:
        return {alias.asname or alias.name for alias in node.names}
    module = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    return set(importlib.import_module(module).__all__)


def own_public_names(package: str) -> set[str]:
    """Public names the package's ``__init__`` imports from its own modules (``package._x``,
    ``package.x``; a star import takes that module's ``__all__``) or defines (functions,
    classes, assignments)."""
    names: set[str] = set()
    for node in init_source(package).body:
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith(package + ".")):
            names.update(imported_names(node, package))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name) and t.id != "__all__")
    return {name for name in names if not name.startswith("_")}


def test_every_package_of_agentrt_is_checked() -> None:
    assert PACKAGES == [
        "agentrt",
        "agentrt.activities",
        "agentrt.activities.mcp",
        "agentrt.activities.providers",
        "agentrt.activities.tools",
        "agentrt.cli",
        "agentrt.client",
        "agentrt.gateway",
        "agentrt.schemas",
        "agentrt.store",
        "agentrt.worker",
        "agentrt.workflows",
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_in_all_exists(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted(package: str) -> None:
    exported = importlib.import_module(package).__all__
    assert exported == sorted(exported)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_lists_each_name_once(package: str) -> None:
    exported = importlib.import_module(package).__all__
    assert len(exported) == len(set(exported))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_taken_from_the_package_s_own_modules_is_in_all(package: str) -> None:
    exported = set(importlib.import_module(package).__all__)
    assert sorted(own_public_names(package) - exported) == []


def test_a_name_imported_from_another_package_is_not_required_in_all() -> None:
    # agentrt.activities.providers uses ConfigurationError from agentrt.schemas without re-exporting it.
    assert "ConfigurationError" not in own_public_names("agentrt.activities.providers")
    assert "provider_for" in own_public_names("agentrt.activities.providers")


def test_a_star_import_takes_the_module_s_all() -> None:
    # agentrt.schemas takes each private module's public names with ``from agentrt.schemas._x import *``.
    tools_events = importlib.import_module("agentrt.schemas._events_tools")
    assert set(tools_events.__all__) <= own_public_names("agentrt.schemas")
    assert "ToolInvocationStarted" in own_public_names("agentrt.schemas")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_the_package_star_imports_has_a_sorted_all(package: str) -> None:
    for node in init_source(package).body:
        if isinstance(node, ast.ImportFrom) and [alias.name for alias in node.names] == ["*"]:
            module = importlib.import_module(importlib.util.resolve_name("." * node.level + (node.module or ""), package))
            assert module.__all__ == sorted(module.__all__), module.__name__


@pytest.mark.parametrize("name", sorted(importlib.import_module("agentrt.client").MOVED))
def test_a_name_that_left_the_client_still_imports_from_it_as_the_same_object(name: str) -> None:
    client = importlib.import_module("agentrt.client")
    assert name not in client.__all__
    assert getattr(client, name) is getattr(importlib.import_module(client.MOVED[name]), name)


def test_the_client_has_no_other_name_than_its_own_and_the_moved_ones() -> None:
    with pytest.raises(AttributeError, match="no attribute 'create_ap'"):
        getattr(importlib.import_module("agentrt.client"), "create_ap")


def type_checking_imports(package: str) -> dict[str, str]:
    """``{name: module}`` for each name an ``if TYPE_CHECKING:`` block of the package's ``__init__`` imports."""
    names: dict[str, str] = {}
    for node in init_source(package).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    names.update({alias.asname or alias.name: imp.module for alias in imp.names})
    return names


def test_the_worker_package_s_lazy_names_are_its_all_and_what_the_type_checker_sees() -> None:
    worker = importlib.import_module("agentrt.worker")
    assert sorted(set(worker.__all__) - {"EXPORTS"}) == sorted(worker.EXPORTS)
    assert type_checking_imports("agentrt.worker") == worker.EXPORTS
