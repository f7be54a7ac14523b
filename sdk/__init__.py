"""agentrt: a durable agent runtime on Temporal.

What an agent's author writes comes from here: ``tool`` (a function as a tool), ``ToolContext``
(what a running tool may use), ``ToolError`` (a failure the model sees) and ``Agent`` (a named
agent). ``AgentrtPlugin`` and ``AgentClient`` run and start them. Each name is imported when first
asked for (``EXPORTS``), so ``import agentrt.client`` loads no tool, activity or workflow module.
See docs/agents.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrt.activities.tools import Agent, ToolContext, ToolOutput, tool
    from agentrt.client import AgentClient
    from agentrt.schemas import ToolError
    from agentrt.worker import AgentrtPlugin

__all__ = ["Agent", "AgentClient", "AgentrtPlugin", "EXPORTS", "ToolContext", "ToolError", "ToolOutput", "tool"]

# Each public name and the module that defines it.
EXPORTS = {
    "Agent": "agentrt.activities.tools",
    "AgentClient": "agentrt.client",
    "AgentrtPlugin": "agentrt.worker",
    "ToolContext": "agentrt.activities.tools",
    "ToolError": "agentrt.schemas",
    "ToolOutput": "agentrt.activities.tools",
    "tool": "agentrt.activities.tools",
}


def __getattr__(name: str) -> Any:
    """A name of ``EXPORTS``, imported from its module on first use."""
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
