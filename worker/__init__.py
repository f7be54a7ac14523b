"""The process side of agentrt: configuration, the plugins (``AgentrtClientPlugin`` for clients,
``AgentrtPlugin`` and ``AgentrtWorkerPlugin`` for workers and replayers), the worker and its start
checks, big-payload storage, the codec and the store's encryption at rest, telemetry and the embedded Temporal dev server.

Each name is imported from its module when first asked for (``EXPORTS`` says which), so a
client that takes ``AgentrtConfig`` and ``AgentrtClientPlugin`` from here loads neither the
workflows nor the activities that ``AgentrtPlugin`` and ``build_worker`` bring.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrt.activities import WorkerRole
    from agentrt.worker._agents import agents_in, deps_in, worker_registry
    from agentrt.worker._at_rest import (
        HOME_KEYS_FILE,
        AesGcmStoreCipher,
        encrypt_store,
        ensure_home_keys,
        home_keys_file,
        open_store,
    )
    from agentrt.worker._client_plugin import (
        PAYLOADS_IDENTITY_KEY,
        AgentrtClientPlugin,
        payload_fingerprints_of,
        plugin_of,
    )
    from agentrt.worker._codec import (
        AesGcmCodec,
        CodecConfig,
        PayloadCodecMismatch,
        PayloadDecryptionError,
        generate_codec_key,
        new_codec_key_id,
    )
    from agentrt.worker._config import DEFAULT_ADDRESS, AgentrtConfig, config_file
    from agentrt.worker._devserver import SEARCH_ATTRIBUTES, DevServer, free_port, port_is_open, temporal_binary
    from agentrt.worker._gateway_config import GATEWAY_SCOPES, GatewayConfig, GatewayToken, token_sha256
    from agentrt.worker._payload_config import PayloadConfig
    from agentrt.worker._payload_errors import PayloadNotFound, PayloadStorageError, PayloadStorageUnavailable
    from agentrt.worker._s3_payloads import S3_DRIVER_NAME, S3PayloadDriver
    from agentrt.worker._payloads import (
        DIRECTORY_DRIVER_NAME,
        STORE_DRIVER_NAME,
        DirectoryPayloadDriver,
        PayloadStorage,
        StorePayloadDriver,
        build_data_converter,
        driver_fingerprint,
        driver_location,
        payload_storage,
    )
    from agentrt.worker._plugin import (
        PASSTHROUGH_MODULES,
        WORKFLOWS,
        AgentrtPlugin,
        AgentrtWorkerPlugin,
        workflow_runner,
    )
    from agentrt.worker._query_guard import LegacyQueryGuard
    from agentrt.worker._sdk_metrics import sdk_metrics_runtime
    from agentrt.worker._replay import (
        DEFAULT_REPLAY_QUERY,
        HistorySource,
        ReplayOutcome,
        histories_in_files,
        histories_in_namespace,
        quiet_runtime,
        replay_histories,
    )
    from agentrt.worker._contract import ActivityContractInterceptor
    from agentrt.worker._resume import ResumeInterceptor
    from agentrt.worker._signal_guard import SignalArityGuard
    from agentrt.worker._startup import MissingSearchAttributes, connect_when_ready, ensure_search_attributes
    from agentrt.worker._stuck_watch import STUCK_CHECK_SECONDS, StuckWatch
    from agentrt.worker._telemetry import TelemetryConfig, TelemetryHandle, flush_telemetry, setup_telemetry
    from agentrt.worker._worker import (
        HEARTBEAT_THROTTLE,
        STICKY_SCHEDULE_TO_START,
        AgentrtWorker,
        build_worker,
        check_deployment_version,
        check_role,
        running_worker,
    )

__all__ = [
    "ActivityContractInterceptor",
    "AesGcmCodec",
    "AesGcmStoreCipher",
    "AgentrtClientPlugin",
    "AgentrtConfig",
    "AgentrtPlugin",
    "AgentrtWorker",
    "AgentrtWorkerPlugin",
    "CodecConfig",
    "DEFAULT_ADDRESS",
    "DEFAULT_REPLAY_QUERY",
    "DIRECTORY_DRIVER_NAME",
    "DevServer",
    "DirectoryPayloadDriver",
    "EXPORTS",
    "GATEWAY_SCOPES",
    "GatewayConfig",
    "GatewayToken",
    "HEARTBEAT_THROTTLE",
    "HOME_KEYS_FILE",
    "HistorySource",
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
    "PayloadStorageUnavailable",
    "ReplayOutcome",
    "ResumeInterceptor",
    "S3PayloadDriver",
    "S3_DRIVER_NAME",
    "SEARCH_ATTRIBUTES",
    "STICKY_SCHEDULE_TO_START",
    "STORE_DRIVER_NAME",
    "STUCK_CHECK_SECONDS",
    "SignalArityGuard",
    "StorePayloadDriver",
    "StuckWatch",
    "TelemetryConfig",
    "TelemetryHandle",
    "WORKFLOWS",
    "WorkerRole",
    "agents_in",
    "build_data_converter",
    "build_worker",
    "check_deployment_version",
    "check_role",
    "config_file",
    "connect_when_ready",
    "deps_in",
    "driver_fingerprint",
    "driver_location",
    "encrypt_store",
    "ensure_home_keys",
    "ensure_search_attributes",
    "flush_telemetry",
    "free_port",
    "generate_codec_key",
    "histories_in_files",
    "histories_in_namespace",
    "home_keys_file",
    "new_codec_key_id",
    "open_store",
    "payload_fingerprints_of",
    "payload_storage",
    "plugin_of",
    "port_is_open",
    "quiet_runtime",
    "replay_histories",
    "running_worker",
    "sdk_metrics_runtime",
    "setup_telemetry",
    "temporal_binary",
    "token_sha256",
    "worker_registry",
    "workflow_runner",
]

# Each public name and the module that defines it (``agentrt.activities`` for ``WorkerRole``).
EXPORTS = {
    "AesGcmStoreCipher": "agentrt.worker._at_rest",
    "HOME_KEYS_FILE": "agentrt.worker._at_rest",
    "encrypt_store": "agentrt.worker._at_rest",
    "ensure_home_keys": "agentrt.worker._at_rest",
    "home_keys_file": "agentrt.worker._at_rest",
    "open_store": "agentrt.worker._at_rest",
    "AesGcmCodec": "agentrt.worker._codec",
    "AgentrtClientPlugin": "agentrt.worker._client_plugin",
    "AgentrtConfig": "agentrt.worker._config",
    "AgentrtPlugin": "agentrt.worker._plugin",
    "AgentrtWorker": "agentrt.worker._worker",
    "AgentrtWorkerPlugin": "agentrt.worker._plugin",
    "CodecConfig": "agentrt.worker._codec",
    "DEFAULT_ADDRESS": "agentrt.worker._config",
    "DIRECTORY_DRIVER_NAME": "agentrt.worker._payloads",
    "DevServer": "agentrt.worker._devserver",
    "DirectoryPayloadDriver": "agentrt.worker._payloads",
    "GATEWAY_SCOPES": "agentrt.worker._gateway_config",
    "GatewayConfig": "agentrt.worker._gateway_config",
    "GatewayToken": "agentrt.worker._gateway_config",
    "HEARTBEAT_THROTTLE": "agentrt.worker._worker",
    "LegacyQueryGuard": "agentrt.worker._query_guard",
    "DEFAULT_REPLAY_QUERY": "agentrt.worker._replay",
    "HistorySource": "agentrt.worker._replay",
    "ReplayOutcome": "agentrt.worker._replay",
    "histories_in_files": "agentrt.worker._replay",
    "histories_in_namespace": "agentrt.worker._replay",
    "replay_histories": "agentrt.worker._replay",
    "quiet_runtime": "agentrt.worker._replay",
    "sdk_metrics_runtime": "agentrt.worker._sdk_metrics",
    "MissingSearchAttributes": "agentrt.worker._startup",
    "PASSTHROUGH_MODULES": "agentrt.worker._plugin",
    "PAYLOADS_IDENTITY_KEY": "agentrt.worker._client_plugin",
    "PayloadCodecMismatch": "agentrt.worker._codec",
    "PayloadConfig": "agentrt.worker._payload_config",
    "PayloadDecryptionError": "agentrt.worker._codec",
    "PayloadNotFound": "agentrt.worker._payload_errors",
    "PayloadStorage": "agentrt.worker._payloads",
    "PayloadStorageError": "agentrt.worker._payload_errors",
    "PayloadStorageUnavailable": "agentrt.worker._payload_errors",
    "ResumeInterceptor": "agentrt.worker._resume",
    "SignalArityGuard": "agentrt.worker._signal_guard",
    "ActivityContractInterceptor": "agentrt.worker._contract",
    "S3PayloadDriver": "agentrt.worker._s3_payloads",
    "S3_DRIVER_NAME": "agentrt.worker._s3_payloads",
    "SEARCH_ATTRIBUTES": "agentrt.worker._devserver",
    "STICKY_SCHEDULE_TO_START": "agentrt.worker._worker",
    "STORE_DRIVER_NAME": "agentrt.worker._payloads",
    "STUCK_CHECK_SECONDS": "agentrt.worker._stuck_watch",
    "StorePayloadDriver": "agentrt.worker._payloads",
    "StuckWatch": "agentrt.worker._stuck_watch",
    "TelemetryConfig": "agentrt.worker._telemetry",
    "TelemetryHandle": "agentrt.worker._telemetry",
    "WORKFLOWS": "agentrt.worker._plugin",
    "WorkerRole": "agentrt.activities",
    "agents_in": "agentrt.worker._agents",
    "deps_in": "agentrt.worker._agents",
    "build_data_converter": "agentrt.worker._payloads",
    "build_worker": "agentrt.worker._worker",
    "check_deployment_version": "agentrt.worker._worker",
    "check_role": "agentrt.worker._worker",
    "config_file": "agentrt.worker._config",
    "connect_when_ready": "agentrt.worker._startup",
    "driver_fingerprint": "agentrt.worker._payloads",
    "driver_location": "agentrt.worker._payloads",
    "ensure_search_attributes": "agentrt.worker._startup",
    "flush_telemetry": "agentrt.worker._telemetry",
    "free_port": "agentrt.worker._devserver",
    "generate_codec_key": "agentrt.worker._codec",
    "new_codec_key_id": "agentrt.worker._codec",
    "payload_fingerprints_of": "agentrt.worker._client_plugin",
    "payload_storage": "agentrt.worker._payloads",
    "plugin_of": "agentrt.worker._client_plugin",
    "port_is_open": "agentrt.worker._devserver",
    "running_worker": "agentrt.worker._worker",
    "setup_telemetry": "agentrt.worker._telemetry",
    "temporal_binary": "agentrt.worker._devserver",
    "token_sha256": "agentrt.worker._gateway_config",
    "worker_registry": "agentrt.worker._agents",
    "workflow_runner": "agentrt.worker._plugin",
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
