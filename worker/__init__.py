"""The process side of agentrt: configuration, the worker and the embedded Temporal dev server."""

from worker._config import AgentrtConfig
from worker._devserver import SEARCH_ATTRIBUTES, DevServer, port_is_open, temporal_binary
from worker._worker import WORKFLOWS, build_worker, running_worker, workflow_runner

__all__ = [
    "AgentrtConfig",
    "DevServer",
    "SEARCH_ATTRIBUTES",
    "WORKFLOWS",
    "build_worker",
    "port_is_open",
    "running_worker",
    "temporal_binary",
    "workflow_runner",
]
