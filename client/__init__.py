"""The Python API of agentrt: ``AgentClient`` (sessions, autonomous tasks, task graphs, memories)
for services, over one Temporal connection made with ``connect``.

Importing it loads the schemas, the store and the client's configuration and data converter, and
nothing of the gateway (FastAPI), MCP, the model providers, the tools, the activities or the
workflow classes: it addresses workflows by their type names. The command line is
``agentrt.cli``; the HTTP gateway, its streams, webhooks and the codec server are
``agentrt.gateway``.

Names that lived here before those packages existed (``create_app``, ``StreamHub``,
``WebhookDispatcher``, ``verify_webhook``, ``AgentrtPlugin``, ...) still import from here: each
loads its own package when first asked for (``MOVED`` says where each one lives now).
"""

from typing import Any

from agentrt.client._addressed import visibility_literal
from agentrt.client._client import AgentClient, default_principal
from agentrt.client._connection import Connection, connect
from agentrt.client._decisions import Decisions
from agentrt.client._filters import SessionListing
from agentrt.client._graphs import GRAPH_STATUSES, GraphListing, Graphs, load_graph_file
from agentrt.client._mcp_servers import McpServerView, change_mcp_server, mcp_servers_view, revoke_mcp_server
from agentrt.client._mcp_trust import TRUST_LEVELS, decide_mcp_trust
from agentrt.client._memories import Memories
from agentrt.client._health import MAX_EXAMINED, failing_workflow_task, find_stuck_workflows
from agentrt.client._patience import Patience
from agentrt.client._store_wait import StoreWait
from agentrt.client._queries import query_workflow
from agentrt.client._sessions import Sessions, StartedSession
from agentrt.client._start_failures import start_failure
from agentrt.client._tasks import TASK_STATUSES, TaskListing, Tasks
from agentrt.client._trajectories import Trajectories, load_trajectory, select_turn, stored_trajectory, trajectory_jsonl
from agentrt.client._trajectory_diff import (
    DiffSummary,
    StepDiff,
    TrajectoryDiff,
    TurnDiff,
    diff_lines,
    diff_trajectories,
)

__all__ = [
    "AgentClient",
    "Connection",
    "Decisions",
    "DiffSummary",
    "GRAPH_STATUSES",
    "GraphListing",
    "Graphs",
    "MAX_EXAMINED",
    "MOVED",
    "McpServerView",
    "Memories",
    "Patience",
    "SessionListing",
    "Sessions",
    "StartedSession",
    "StepDiff",
    "StoreWait",
    "TASK_STATUSES",
    "TRUST_LEVELS",
    "TaskListing",
    "Tasks",
    "Trajectories",
    "TrajectoryDiff",
    "TurnDiff",
    "change_mcp_server",
    "connect",
    "decide_mcp_trust",
    "default_principal",
    "diff_lines",
    "diff_trajectories",
    "failing_workflow_task",
    "find_stuck_workflows",
    "load_graph_file",
    "load_trajectory",
    "mcp_servers_view",
    "query_workflow",
    "revoke_mcp_server",
    "select_turn",
    "start_failure",
    "stored_trajectory",
    "trajectory_jsonl",
    "visibility_literal",
]

# Names importable from here for callers written before agentrt.gateway existed, and the
# package each one lives in now: loaded only when asked for, so `import agentrt.client` stays light.
MOVED = {
    "AgentrtPlugin": "agentrt.worker",
    "StreamHub": "agentrt.gateway",
    "StreamItem": "agentrt.gateway",
    "StreamSubscription": "agentrt.gateway",
    "WebhookDispatcher": "agentrt.gateway",
    "build_data_converter": "agentrt.worker",
    "create_app": "agentrt.gateway",
    "stream_response": "agentrt.gateway",
    "verify_webhook": "agentrt.gateway",
}


def __getattr__(name: str) -> Any:
    """A name of ``MOVED``, from the package it lives in now (imported on first use)."""
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
