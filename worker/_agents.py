"""The user's agents and tools on a worker: found in modules (``agentrt worker --agents
mypkg.agents``, ``[worker] agents``) or given (``AgentrtPlugin(agents=..., tools=..., deps=...)``),
added to the worker's tool registry beside the built-in tools."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from agentrt.activities.tools import Agent, Tool, ToolRegistry, ToolRuntime, default_registry
from agentrt.schemas import ConfigurationError

__all__ = ["agents_in", "worker_registry"]


def agents_in(modules: Sequence[str]) -> tuple[list[Agent], list[Tool]]:
    """Every ``Agent`` and ``@tool`` (``Tool`` object) at the top level of each module in
    ``modules`` (dotted names, imported), in definition order. Raises ``ConfigurationError``
    naming a module that does not import, or one that holds neither."""
    agents: list[Agent] = []
    tools: list[Tool] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - any import failure of the user's module is a configuration error
            raise ConfigurationError(f"cannot import agents module {name!r}: {type(err).__name__}: {err}") from err
        found = [value for value in vars(module).values() if isinstance(value, (Agent, Tool))]
        if not found:
            raise ConfigurationError(f"module {name!r} defines no Agent and no @tool")
        agents += [v for v in found if isinstance(v, Agent) and v not in agents]
        tools += [v for v in found if isinstance(v, Tool) and v not in tools]
    return agents, tools


def worker_registry(
    registry: ToolRegistry | None = None,
    *,
    agents: Sequence[Agent] = (),
    tools: Sequence[Tool] = (),
    modules: Sequence[str] = (),
    deps: Callable[[], Any] | None = None,
) -> ToolRegistry:
    """``registry`` (default ``default_registry()``, the built-in tools) with ``agents`` and their
    tools, ``tools``, and the agents and tools of ``modules`` (``agents_in``) added; ``deps``,
    when given, becomes its runtime's dependency factory (``ToolContext.deps``). Raises
    ``ConfigurationError`` for two tools or two agents of one name."""
    registry = registry or default_registry()
    found_agents, found_tools = agents_in(modules)
    for tool in [*tools, *found_tools]:
        registry.register(tool)
    for agent in [*agents, *found_agents]:
        registry.register_agent(agent.spec(), agent.function_tools)
    if deps is not None:
        registry.runtime = ToolRuntime(deps)
    return registry
