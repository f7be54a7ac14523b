"""The process side of agentrt: configuration, the AgentrtPlugin, the worker and its start checks,
big-payload storage and the embedded Temporal dev server."""

from agentrt.activities import WorkerRole
from agentrt.worker._codec import (
    AesGcmCodec,
    CodecConfig,
    PayloadCodecMismatch,
    PayloadDecryptionError,
    generate_codec_key,
    new_codec_key_id,
)
from agentrt.worker._config import DEFAULT_ADDRESS, AgentrtConfig, PayloadConfig, config_file
from agentrt.worker._gateway_config import GATEWAY_SCOPES, GatewayConfig, GatewayToken, token_sha256
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
from agentrt.worker._query_guard import LegacyQueryGuard
from agentrt.worker._resume import ResumeInterceptor
from agentrt.worker._startup import MissingSearchAttributes, connect_when_ready, ensure_search_attributes
from agentrt.worker._telemetry import TelemetryConfig, TelemetryHandle, flush_telemetry, setup_telemetry
from agentrt.worker._stuck_watch import STUCK_CHECK_SECONDS, StuckWatch
from agentrt.worker._worker import (
    HEARTBEAT_THROTTLE,
    STICKY_SCHEDULE_TO_START,
    AgentrtWorker,
    build_worker,
    check_role,
    running_worker,
)

__all__ = [
    "AesGcmCodec",
    "AgentrtConfig",
    "AgentrtPlugin",
    "AgentrtWorker",
    "CodecConfig",
    "DEFAULT_ADDRESS",
    "DIRECTORY_DRIVER_NAME",
    "DevServer",
    "DirectoryPayloadDriver",
    "GATEWAY_SCOPES",
    "GatewayConfig",
    "GatewayToken",
    "HEARTBEAT_THROTTLE",
    "LegacyQueryGuard",
    "MissingSearchAttributes",
    "PASSTHROUGH_MODULES",
    "PAYLOADS_IDENTITY_KEY",
    "PayloadCodecMismatch",
    "PayloadConfig",
    "PayloadDecryptionError",
    "PayloadNotFound",
    "PayloadStorage",
    "PayloadStorageError",
    "ResumeInterceptor",
    "SEARCH_ATTRIBUTES",
    "STICKY_SCHEDULE_TO_START",
    "STORE_DRIVER_NAME",
    "STUCK_CHECK_SECONDS",
    "StorePayloadDriver",
    "StuckWatch",
    "TelemetryConfig",
    "TelemetryHandle",
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
    "flush_telemetry",
    "free_port",
    "generate_codec_key",
    "new_codec_key_id",
    "payload_fingerprints_of",
    "payload_storage",
    "plugin_of",
    "port_is_open",
    "running_worker",
    "setup_telemetry",
    "temporal_binary",
    "token_sha256",
    "workflow_runner",
]
