"""A worker's user agents: found in modules, added to its registry, named in agentrt.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.schemas import ConfigurationError
from agentrt.worker import AgentrtConfig, AgentrtPlugin, agents_in, worker_registry


def test_a_module_s_agents_and_tools_are_registered_beside_the_built_ins() -> None:
    agents, tools = agents_in(["tests.e2e.agent_tools"])
    registry = worker_registry(modules=["tests.e2e.agent_tools"], deps=lambda: "db")

    assert [a.name for a in agents] == ["support", "order-desk"]
    assert {t.name for t in tools} == {"lookup_order", "refund", "whoami", "flaky_charge"}
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
