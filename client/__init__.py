"""The public client side of agentrt: ``AgentClient`` for services and the ``agentrt`` CLI."""

from agentrt.client._client import AgentClient, SessionListing, StartedSession, default_principal
from agentrt.client._connection import connect
from agentrt.client._gateway import create_app
from agentrt.client._graphs import GraphListing, load_graph_file
from agentrt.client._health import find_stuck_workflows
from agentrt.client._queries import query_workflow
from agentrt.client._stream import StreamHub, StreamItem, StreamSubscription, stream_response
from agentrt.client._tasks import TaskListing
from agentrt.client._trajectories import load_trajectory, trajectory_jsonl
from agentrt.client._trajectory_diff import (
    DiffSummary,
    StepDiff,
    TrajectoryDiff,
    TurnDiff,
    diff_lines,
    diff_trajectories,
)
from agentrt.client._webhook_signing import verify_webhook
from agentrt.client._webhooks import WebhookDispatcher
from agentrt.worker import AgentrtPlugin, build_data_converter

__all__ = [
    "AgentClient",
    "AgentrtPlugin",
    "DiffSummary",
    "GraphListing",
    "SessionListing",
    "StartedSession",
    "StepDiff",
    "StreamHub",
    "StreamItem",
    "StreamSubscription",
    "TaskListing",
    "TrajectoryDiff",
    "TurnDiff",
    "WebhookDispatcher",
    "build_data_converter",
    "connect",
    "create_app",
    "default_principal",
    "diff_lines",
    "diff_trajectories",
    "find_stuck_workflows",
    "load_graph_file",
    "load_trajectory",
    "query_workflow",
    "stream_response",
    "trajectory_jsonl",
    "verify_webhook",
]
