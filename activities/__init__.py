"""Every side effect of a session runs here, as a Temporal activity: model calls, tools, store writes."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Literal

from agentrt.activities._advisor import AdvisorActivities
from agentrt.activities._attempts import WORKER_PROCESS, previous_attempt_elsewhere
from agentrt.activities._autonomy import TaskActivities
from agentrt.activities._fused_rounds import RoundFusion as _RoundFusion
from agentrt.activities._graph import GraphActivities
from agentrt.activities._mcp import McpActivities
from agentrt.activities._memory import MemoryActivities
from agentrt.activities._model import ModelActivities, ProfileSource
from agentrt.activities._store import StoreActivities
from agentrt.activities._tools import ToolActivities
from agentrt.activities.tools import SecretVault as _SecretVault

if TYPE_CHECKING:
    from agentrt.activities.mcp import McpManager
    from agentrt.activities.tools import ToolRegistry
    from agentrt.store import Store

__all__ = [
    "AdvisorActivities",
    "GraphActivities",
    "McpActivities",
    "MemoryActivities",
    "ModelActivities",
    "ProfileSource",
    "StoreActivities",
    "TaskActivities",
    "ToolActivities",
    "WORKER_PROCESS",
    "WorkerRole",
    "build_activities",
    "configured_keys",
    "previous_attempt_elsewhere",
]


# all: everything; models: all but tool calls; tools: tool calls only; workflows: all but model
# and tool calls; providers: model calls only (docs/worker.md, "Three pools").
WorkerRole = Literal["all", "models", "tools", "workflows", "providers"]


def build_activities(
    config: ProfileSource, store: "Store", registry: "ToolRegistry", role: WorkerRole = "all", *, mcp: "McpManager | None" = None
) -> list[Callable[..., Any]]:
    """The activity callables a worker registers, bound to its model profiles (the worker's
    configuration), store and tools. ``role``: ``all`` (the default), ``models`` (everything
    but running tool calls and commands: the model calls, advisor reviews, the store, tool
    listing, effect reconciliation, memory decisions, autonomous tasks' store writes,
    acceptance reviews and cron times, and task graphs' plans and node reviews: ``graph.plan``,
    ``graph.review``), ``tools`` (what runs processes only: ``tool.execute`` and autonomous
    tasks' ``task.check_command``, ``task.evaluate_trigger`` and ``task.workspace_commit``, for a worker on a
    ``tool_task_queue``), ``providers`` (what calls a model provider only: ``provider.complete``,
    ``context.compact``, ``advisor.review``, ``task.review``, ``graph.plan``, ``graph.review``, for
    a worker on a ``model_task_queue``), ``workflows`` (what ``models`` runs but the calls
    ``providers`` runs: the store, tool listing, a session's preparation, reconciliation, memory
    decisions, tasks' and graphs' records and cron times). ``mcp``: the worker's ``McpManager``;
    with it, ``mcp.list_tools`` and ``mcp.call_tool`` run where tool calls run (MCP servers live
    beside the tools). The secrets
    tools declare are read from the configuration's ``secrets`` (``SecretsConfig``; default: the
    worker's environment)."""
    models = ModelActivities(config, store, registry)
    egress_allow = tuple(getattr(config, "egress_allow", ()))
    cgroup = getattr(config, "sandbox_cgroup", None)
    tools = ToolActivities(
        registry, store, secrets=lambda: configured_keys(config), skill_paths=getattr(config, "skill_paths", ()),
        vault=_SecretVault(getattr(config, "secrets", None)), egress_allow=egress_allow, cgroup=cgroup,
    )
    if role == "all":  # the worker runs tool calls too: a model call may run read-only rounds itself
        models.fusion = _RoundFusion(models, tools)
    writes = StoreActivities(store)
    advisor = AdvisorActivities(models, store)
    memory = MemoryActivities(store)
    tasks = TaskActivities(store, models, secrets=lambda: configured_keys(config), egress_allow=egress_allow, cgroup=cgroup)
    graphs = GraphActivities(store, models, registry)
    # Task commands run processes in the OS sandbox: they go where tool calls go.
    tool_side: list[Callable[..., Any]] = [tools.execute, tasks.check_command, tasks.evaluate_trigger, tasks.workspace_commit]
    if mcp is not None:
        servers = McpActivities(mcp, store, secrets=lambda: configured_keys(config))
        tool_side += [servers.list_tools, servers.call_tool]
    if role == "tools":
        return tool_side
    # What sends a request to a model provider: the only activities that need provider keys.
    model_side: list[Callable[..., Any]] = [
        models.complete, models.compact, advisor.review, tasks.review, graphs.plan, graphs.review,
    ]
    if role == "providers":
        return model_side
    workflow_side: list[Callable[..., Any]] = [
        models.describe, models.prepare, tools.list_tools, tools.reconcile, writes.append, memory.decide,
        tasks.record, tasks.next_wake, graphs.record,
    ]
    if role == "workflows":
        return workflow_side
    if role == "models":
        return [*workflow_side, *model_side]
    return [*workflow_side, *model_side, *tool_side]


def configured_keys(config: ProfileSource) -> list[str]:
    """The API keys the worker's profiles read from its environment (``api_key_env``), set ones only."""
    names = {profile.api_key_env for profile in config.profiles.values() if profile.api_key_env}
    return [value for value in (os.environ.get(name) for name in sorted(names)) if value]
