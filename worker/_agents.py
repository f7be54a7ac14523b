"""The user's agents and tools on a worker: found in modules (``agentrt worker --agents
mypkg.agents``, ``[worker] agents``) or given (``AgentrtPlugin(agents=..., tools=..., deps=...)``),
added to the worker's tool registry beside the built-in tools."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import PurePath
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
    where: dict[tuple[str, str], tuple[object, str]] = {}  # (kind, name) -> (the object, its module)
    for name in modules:
        not_a_name = ConfigurationError(
            f"agents module {name!r} is not a module name: give a dotted name as `python -m` takes it "
            f"(mypkg.agents, or {_module_hint(name)!r} run from the file's directory), not a file path"
        )
        if not _MODULE.fullmatch(name):
            raise not_a_name
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if name.endswith(".py"):
                raise not_a_name from err
            hint = ""
            if err.name is not None and f"{name}.".startswith(f"{err.name}."):
                hint = (
                    f" (not on sys.path; the agentrt commands add the current directory, {os.getcwd()}: run them "
                    "from the directory that holds it, or put that directory on PYTHONPATH)"
                )
            raise ConfigurationError(f"cannot import agents module {name!r}: {type(err).__name__}: {err}{hint}") from err
        except Exception as err:  # noqa: BLE001 - any import failure of the user's module is a configuration error
            raise ConfigurationError(f"cannot import agents module {name!r}: {type(err).__name__}: {err}") from err
        except SystemExit as err:  # argparse at the module's top level, reading the worker's own arguments
            raise ConfigurationError(
                f"agents module {name!r} exited while it was imported (sys.exit({err.code!r})); "
                "an agents module defines Agents and @tools and does no work at import"
            ) from None
        found = [value for value in vars(module).values() if isinstance(value, (Agent, Tool))]
        if not found:
            raise ConfigurationError(f"module {name!r} defines no Agent and no @tool")
        for value in found:
            kind = "agent" if isinstance(value, Agent) else "tool"
            seen = where.setdefault((kind, value.name), (value, name))
            if seen[0] is not value and not (kind == "agent" and value.spec() == seen[0].spec()):  # type: ignore[attr-defined]
                raise ConfigurationError(f"two {kind}s are called {value.name!r}: one in {seen[1]!r}, another in {name!r}")
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


# A dotted module name, as ``importlib.import_module`` takes an absolute one.
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _module_hint(path: str) -> str:
    """The module name a file path would have from its own directory (``./x/agents.py``: ``agents``)."""
    stem = PurePath(path).name.removesuffix(".py")
    return stem if _MODULE.fullmatch(stem) else "mymodule"


def worker_registry(
    registry: ToolRegistry | None = None,
    *,
    agents: Sequence[Agent] = (),
    tools: Sequence[Tool] = (),
    modules: Sequence[str] = (),
    deps: Callable[[], Any] | None = None,
) -> ToolRegistry:
    """``registry`` (default ``default_registry()``, the built-in tools) with ``agents`` and their
    tools, ``tools``, and the agents and tools of ``modules`` (``agents_in``) added. An agent's
    tools (a module's ``@tool`` an agent there uses included) are offered to that agent's sessions
    only; ``tools`` and a module's ``@tool`` no agent uses, to every session. ``deps``,
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
    agent_tools = [t for a in [*agents, *found_agents] for t in a.function_tools]
    # A module's @tool an agent uses is that agent's: offered to its sessions only (ToolRegistry).
    shared = [*tools, *(t for t in found_tools if not any(t is a for a in agent_tools))]
    for tool in [*shared, *agent_tools]:
        if tool.name in registry.names() and registry.get(tool.name) is not tool:
            raise ConfigurationError(
                f"tool {tool.name!r} ({_origin(tool)}) has the name of another tool of the worker "
                f"({_origin(registry.get(tool.name))}); name it otherwise (@tool(name=...))"
            )
        if any(tool is t for t in shared):
            registry.register(tool)
    for agent in [*agents, *found_agents]:
        registry.register_agent(agent.spec(), agent.function_tools)
    if deps is not None:
        registry.runtime = ToolRuntime(deps)
    return registry


def _origin(tool: Tool) -> str:
    """Where a tool comes from, for a message: its function (``module.name``), else a built-in."""
    function = getattr(tool, "function", None)
    if function is None:
        return "a built-in tool"
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', '?')}"
