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


def test_an_agent_s_tools_are_offered_to_its_sessions_only_and_a_module_s_other_tools_to_every_session() -> None:
    # A session that names no tools (a plain session, a gateway session, a graph node) must not get
    # the support agent's refund and its secrets; an explicit tool list still reaches them.
    from tests.e2e import agent_tools

    registry = worker_registry(modules=["tests.e2e.agent_tools"], tools=[agent_tools.whoami])

    offered = {spec.name for spec in registry.specs(None)[0]}

    assert {"lookup_order", "refund", "flaky_charge", "slow_payout"}.isdisjoint(offered)
    assert {"whoami", "fs.read", "shell.run"} <= offered  # given as a tool of the worker: every session's
    assert [spec.name for spec in registry.specs(["refund", "lookup_order"])[0]] == ["refund", "lookup_order"]
    assert "refund" in registry.names()


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


def write_module(directory: Path, name: str, body: str) -> None:
    (directory / f"{name}.py").write_text("from agentrt import Agent, tool\n\n" + body)


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


def test_two_modules_with_a_tool_of_one_name_are_refused_naming_both(modules: Path) -> None:
    write_module(modules, "desk_one", "@tool\ndef lookup(x: str) -> str:\n    return 'one'\n\na = Agent(name='one', tools=[lookup])\n")
    write_module(modules, "desk_two", "@tool\ndef lookup(x: str) -> str:\n    return 'two'\n\na = Agent(name='two', tools=[lookup])\n")

    with pytest.raises(ConfigurationError, match="two tools are called 'lookup': one in 'desk_one', another in 'desk_two'"):
        agents_in(["desk_one", "desk_two"])


def test_two_modules_with_different_agents_of_one_name_are_refused_naming_both(modules: Path) -> None:
    write_module(modules, "desk_a", "a = Agent(name='desk', instructions='A')\n")
    write_module(modules, "desk_b", "b = Agent(name='desk', instructions='B')\n")

    with pytest.raises(ConfigurationError, match="two agents are called 'desk': one in 'desk_a', another in 'desk_b'"):
        agents_in(["desk_a", "desk_b"])


def test_a_module_that_reexports_another_s_tools_and_agents_is_no_conflict(modules: Path) -> None:
    write_module(modules, "desk_base", "@tool\ndef lookup(x: str) -> str:\n    return 'one'\n\na = Agent(name='base', tools=[lookup])\n")
    write_module(modules, "desk_more", "from desk_base import a, lookup\n")

    agents, tools = agents_in(["desk_base", "desk_more"])

    assert [x.name for x in agents] == ["base"] and [t.name for t in tools] == ["lookup"]


@pytest.mark.parametrize("name", ["fs.read", "shell.run"])
def test_a_user_tool_with_a_built_in_s_name_is_refused_saying_so(modules: Path, name: str) -> None:
    module = "sneaky_" + name.replace(".", "_")  # a module name of its own: imported modules are kept
    write_module(modules, module, f"@tool(name={name!r})\ndef mine(path: str) -> str:\n    return 'mine'\n\na = Agent(name='sneaky', tools=[mine])\n")

    with pytest.raises(ConfigurationError, match=rf"tool '{name}' \({module}.mine\) has the name of another tool of the worker \(a built-in tool\)"):
        worker_registry(modules=[module])


def test_an_agent_given_in_python_with_a_tool_of_a_built_in_s_name_is_refused_saying_so() -> None:
    from agentrt import Agent, tool

    @tool(name="fs.write")
    def mine(path: str, content: str) -> str:
        return "mine"

    with pytest.raises(ConfigurationError, match="has the name of another tool of the worker"):
        worker_registry(agents=[Agent(name="writer", tools=[mine])])
