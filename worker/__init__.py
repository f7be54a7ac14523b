"""The process side of agentrt: configuration, the AgentrtPlugin, the worker and its start checks,
big-payload storage and the embedded Temporal dev server."""

from agentrt.activities import WorkerRole
from agentrt.worker._config import DEFAULT_ADDRESS, AgentrtConfig, PayloadConfig, config_file
from agentrt.worker._devserver import SEARCH_ATTRIBUTES, DevServer, free_port, port_is_open, temporal_binary
from agentrt.worker._payloads import (
    DIRECTORY_DRIVER_NAME,
    STORE_DRIVER_NAME,
    DirectoryPayloadDriver,
    PayloadNotFound,
    PayloadStorage,
    PayloadStorageError,
    StorePayloadDriver,
    build_data_converter,
    driver_fingerprint,
    driver_location,
    payload_storage,
)
from agentrt.worker._plugin import (
    PASSTHROUGH_MODULES,
    PAYLOADS_IDENTITY_KEY,
    WORKFLOWS,
    AgentrtPlugin,
    payload_fingerprints_of,
    plugin_of,
    workflow_runner,
)
from agentrt.worker._resume import ResumeInterceptor
from agentrt.worker._startup import MissingSearchAttributes, connect_when_ready, ensure_search_attributes
from agentrt.worker._worker import (
    HEARTBEAT_THROTTLE,
    STICKY_SCHEDULE_TO_START,
    AgentrtWorker,
    build_worker,
    check_role,
    running_worker,
)

__all__ = [
    "AgentrtConfig",
    "AgentrtPlugin",
    "AgentrtWorker",
    "DEFAULT_ADDRESS",
    "DIRECTORY_DRIVER_NAME",
    "DevServer",
    "DirectoryPayloadDriver",
    "HEARTBEAT_THROTTLE",
    "MissingSearchAttributes",
    "PASSTHROUGH_MODULES",
    "PAYLOADS_IDENTITY_KEY",
    "PayloadConfig",
    "PayloadNotFound",
    "PayloadStorage",
    "PayloadStorageError",
    "ResumeInterceptor",
    "SEARCH_ATTRIBUTES",
    "STICKY_SCHEDULE_TO_START",
    "STORE_DRIVER_NAME",
    "StorePayloadDriver",
    "WORKFLOWS",
    "WorkerRole",
    "build_data_converter",
    "build_worker",
    "check_role",
    "config_file",
    "connect_when_ready",
    "driver_fingerprint",
    "driver_location",
    "ensure_search_attributes",
    "free_port",
    "payload_fingerprints_of",
    "payload_storage",
    "plugin_of",
    "port_is_open",
    "running_worker",
    "temporal_binary",
    "workflow_runner",
]
