"""A worker's user agents: found in modules, added to its registry, named in agentrt.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.schemas import ConfigurationError
from agentrt.worker import AgentrtConfig, AgentrtPlugin, agents_in, deps_in, worker_registry


def test_a_module_s_agents_and_tools_are_registered_beside_the_built_ins() -> None:
    agents, tools = agents_in(["tests.e2e.agent_tools"])
    registry = worker_registry(modules=["tests.e2e.agent_tools"], deps=lambda: "db")

    assert [a.name for a in agents] == ["support", "order-desk"]
    assert {t.name for t in tools} == {"lookup_order", "refund", "whoami", "flaky_charge", "slow_payout"}
    assert registry.agent_names() == ["support", "order-desk"] and "fs.read" in registry.names() and "refund" in registry.names()
    assert registry.runtime.deps() == "db"


@pytest.mark.parametrize(
    ("module", "problem"),
    [
        ("tests.e2e.no_such_module", "cannot import agents module 'tests.e2e.no_such_module': ModuleNotFoundError"),
        ("tests.e2e._support", "module 'tests.e2e._support' defines no Agent and no @tool"),
    ],
)
def test_a_module_that_does_not_import_or_defines_nothing_is_a_configuration_error(module: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        agents_in([module])


def test_agentrt_toml_names_agent_modules_under_worker(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text('[worker]\nagents = ["tests.e2e.agent_tools"]\n')

    config = AgentrtConfig.load(file, env={})

    assert config.agent_modules == ["tests.e2e.agent_tools"]
    plugin = AgentrtPlugin(config)
    assert plugin.worker_plugin.registry is not None and plugin.worker_plugin.registry.agent_names() == ["support", "order-desk"]


@pytest.mark.parametrize("body", ['[worker]\nagents = "tests"\n', '[worker]\nmodules = ["x"]\n'])
def test_a_bad_worker_table_is_a_configuration_error(tmp_path: Path, body: str) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text(body)
    with pytest.raises(ConfigurationError, match=r"\[worker\]"):
        AgentrtConfig.load(file, env={})


AGENT_MODULE = """
from agentrt import tool

@tool(risk="read_only")
def ping() -> str:
    '''Answer pong.'''
    return "pong"
"""


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path for agents modules a test writes."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_s_top_level_deps_becomes_the_worker_s_ctx_deps_and_an_imported_one_does_not(modules: Path) -> None:
    (modules / "shop_with_deps.py").write_text(AGENT_MODULE + "\nasync def deps():\n    return {'db': 'pool'}\n")
    (modules / "shop_importing_deps.py").write_text(
        AGENT_MODULE.replace("ping", "echo") + "\nfrom shop_with_deps import deps as deps\n"
    )

    assert deps_in(["shop_importing_deps"]) is None  # not its own: imported from another module
    registry = worker_registry(modules=["shop_with_deps", "shop_importing_deps"])
    try:
        assert registry.runtime.deps() == {"db": "pool"}  # an async factory, made on the tool loop
    finally:
        registry.runtime.close()


def test_two_deps_for_one_worker_are_a_configuration_error_naming_them(modules: Path) -> None:
    for name in ("shop_a", "shop_b"):
        (modules / f"{name}.py").write_text(AGENT_MODULE.replace("ping", f"ping_{name}") + "\ndef deps():\n    return None\n")

    with pytest.raises(ConfigurationError, match=r"modules shop_a, shop_b each define deps\(\)"):
        worker_registry(modules=["shop_a", "shop_b"])
    with pytest.raises(ConfigurationError, match=r"deps is given and module 'shop_a' defines deps\(\) too"):
        worker_registry(modules=["shop_a"], deps=lambda: "db")
