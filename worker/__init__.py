"""The process side of agentrt: configuration, the worker, big-payload storage and the embedded Temporal dev server."""

from agentrt.worker._config import DEFAULT_ADDRESS, AgentrtConfig, PayloadConfig
from agentrt.worker._devserver import SEARCH_ATTRIBUTES, DevServer, free_port, port_is_open, temporal_binary
from agentrt.worker._payloads import (
    DIRECTORY_DRIVER_NAME,
    STORE_DRIVER_NAME,
    DirectoryPayloadDriver,
    PayloadNotFound,
    PayloadStorageError,
    StorePayloadDriver,
    build_data_converter,
)
from agentrt.worker._worker import WORKFLOWS, build_worker, running_worker, workflow_runner

__all__ = [
    "AgentrtConfig",
    "DEFAULT_ADDRESS",
    "DIRECTORY_DRIVER_NAME",
    "DevServer",
    "DirectoryPayloadDriver",
    "PayloadConfig",
    "PayloadNotFound",
    "PayloadStorageError",
    "SEARCH_ATTRIBUTES",
    "STORE_DRIVER_NAME",
    "StorePayloadDriver",
    "WORKFLOWS",
    "build_data_converter",
    "build_worker",
    "free_port",
    "port_is_open",
    "running_worker",
    "temporal_binary",
    "workflow_runner",
]
