"""Every side effect of a session runs here, as a Temporal activity: model calls, tools, store writes."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from agentrt.activities._attempts import WORKER_PROCESS, previous_attempt_elsewhere
from agentrt.activities._model import ModelActivities, ProfileSource
from agentrt.activities._store import StoreActivities
from agentrt.activities._tools import ToolActivities

if TYPE_CHECKING:
    from agentrt.activities.tools import ToolRegistry
    from agentrt.store import Store

__all__ = [
    "ModelActivities",
    "ProfileSource",
    "StoreActivities",
    "ToolActivities",
    "WORKER_PROCESS",
    "build_activities",
    "configured_keys",
    "previous_attempt_elsewhere",
]


def build_activities(config: ProfileSource, store: "Store", registry: "ToolRegistry") -> list[Callable[..., Any]]:
    """The activity callables a worker registers, bound to its model profiles (the worker's
    configuration), store and tools."""
    models = ModelActivities(config, store, registry)
    tools = ToolActivities(registry, store, secrets=lambda: configured_keys(config))
    writes = StoreActivities(store)
    return [
        models.complete, models.compact, models.describe, models.prepare, tools.list_tools, tools.execute, tools.reconcile,
        writes.append,
    ]


def configured_keys(config: ProfileSource) -> list[str]:
    """The API keys the worker's profiles read from its environment (``api_key_env``), set ones only."""
    names = {profile.api_key_env for profile in config.profiles.values() if profile.api_key_env}
    return [value for value in (os.environ.get(name) for name in sorted(names)) if value]
