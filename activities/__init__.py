"""Every side effect of a session runs here, as a Temporal activity: model calls, tools, store writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from agentrt.activities._model import ModelActivities
from agentrt.activities._store import StoreActivities
from agentrt.activities._tools import ToolActivities

if TYPE_CHECKING:
    from agentrt.activities.tools import ToolRegistry
    from agentrt.store import Store
    from agentrt.worker._config import AgentrtConfig

__all__ = ["ModelActivities", "StoreActivities", "ToolActivities", "build_activities"]


def build_activities(config: "AgentrtConfig", store: "Store", registry: "ToolRegistry") -> list[Callable[..., Any]]:
    """The activity callables a worker registers, bound to its configuration, store and tools."""
    models = ModelActivities(config, store, registry)
    tools = ToolActivities(registry, store)
    writes = StoreActivities(store)
    return [models.complete, models.compact, models.describe, tools.list_tools, tools.execute, tools.reconcile, writes.append]
