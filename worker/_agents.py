"""The user's agents and tools on a worker: found in modules (``agentrt worker --agents
mypkg.agents``, ``[worker] agents``) or given (``AgentrtPlugin(agents=..., tools=..., deps=...)``),
added to the worker's tool registry beside the built-in tools."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from agentrt.activities.tools import Agent, Tool, ToolRegistry, ToolRuntime, default_registry
from agentrt.schemas import ConfigurationError

__all__ = ["agents_in", "deps_in", "worker_registry"]

# The name of a module's dependency factory for ``--agents`` (``ToolContext.deps``).
DEPS_NAME = "deps"


def agents_in(modules: Sequence[str]) -> tuple[list[Agent], list[Tool]]:
    """Every ``Agent`` and ``@tool`` (``Tool`` object) at the top level of each module in
    ``modules`` (dotted names, imported), in definition order. Raises ``ConfigurationError``
    naming a module that does not import, or one that holds neither."""
    agents: list[Agent] = []
    tools: list[Tool] = []
    for name in modules:
        if name.endswith(".py") or "/" in name or "\\" in name:
            dotted = name.removesuffix(".py").strip("./\\").replace("/", ".").replace("\\", ".")
            raise ConfigurationError(
                f"agents module {name!r} is a file path; give the module's dotted name, as `python -m` takes it "
                f"({dotted!r}), from the directory that holds it or with that directory on PYTHONPATH"
            )
        try:
            module = importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 - any import failure of the user's module is a configuration error
            hint = ""
            if isinstance(err, ModuleNotFoundError) and err.name is not None and f"{name}.".startswith(f"{err.name}."):
                hint = (
                    f" (not on sys.path; the agentrt commands add the current directory, {os.getcwd()}: run them "
                    "from the directory that holds it, or put that directory on PYTHONPATH)"
                )
            raise ConfigurationError(f"cannot import agents module {name!r}: {type(err).__name__}: {err}{hint}") from err
        found = [value for value in vars(module).values() if isinstance(value, (Agent, Tool))]
        if not found:
            raise ConfigurationError(f"module {name!r} defines no Agent and no @tool")
        agents += [v for v in found if isinstance(v, Agent) and v not in agents]
        tools += [v for v in found if isinstance(v, Tool) and v not in tools]
    return agents, tools


def deps_in(modules: Sequence[str]) -> Callable[[], Any] | None:
    """The dependency factory one of ``modules`` defines: a top-level callable named ``deps``
    (defined in that module, not imported into it), or None. Raises ``ConfigurationError`` when
    two modules define one (a worker has one ``ctx.deps``)."""
    found: dict[str, Callable[[], Any]] = {}
    for name in modules:
        module = importlib.import_module(name)  # agents_in has imported it, or says why it cannot
        factory = getattr(module, DEPS_NAME, None)
        if callable(factory) and getattr(factory, "__module__", None) == module.__name__:
            found[name] = factory
    if len(found) > 1:
        raise ConfigurationError(f"modules {', '.join(found)} each define {DEPS_NAME}(); a worker has one: keep one")
    return next(iter(found.values()), None)


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
    when given, else the ``deps()`` a module defines (``deps_in``), becomes its runtime's
    dependency factory (``ToolContext.deps``). Raises ``ConfigurationError`` for two tools or two
    agents of one name, or for ``deps`` given while a module defines one too."""
    registry = registry or default_registry()
    found_agents, found_tools = agents_in(modules)
    module_deps = deps_in(modules)
    if deps is not None and module_deps is not None:
        raise ConfigurationError(
            f"deps is given and module {module_deps.__module__!r} defines {DEPS_NAME}() too; a worker has one: keep one"
        )
    deps = deps if deps is not None else module_deps
    for tool in [*tools, *found_tools]:
        registry.register(tool)
    for agent in [*agents, *found_agents]:
        registry.register_agent(agent.spec(), agent.function_tools)
    if deps is not None:
        registry.runtime = ToolRuntime(deps)
    return registry
