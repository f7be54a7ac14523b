"""AgentrtClientPlugin: what a Temporal client needs to speak agentrt, and nothing a worker runs.

Given to ``Client.connect(plugins=[...])`` it sets the data converter (pydantic JSON, the payload
codec, and external storage for big payloads), the interceptors (Temporal's tracing with
``[telemetry]`` on) and no ``workflow_failure_exception_types``. It imports no workflow, activity
or tool module, so a service that only starts sessions and sends messages loads none of them
(``agentrt.client.connect`` uses it). Workers and the ``Replayer`` use ``AgentrtPlugin``
(worker/_plugin.py), which is this plugin plus the workflows, activities, sandbox and worker
interceptors; ``AgentrtWorkerPlugin`` is those worker parts alone, for a worker built on a client
connected with this plugin. (pydantic-ai splits its Temporal plugin the same way:
``PydanticAIPlugin`` for clients, ``AgentPlugin`` for workers.)
"""

from __future__ import annotations

from collections.abc import Sequence

import temporalio.client
import temporalio.worker
from temporalio.converter import StorageDriver
from temporalio.plugin import SimplePlugin

from agentrt.store import Store
from agentrt.worker._at_rest import encrypt_store
from agentrt.worker._config import AgentrtConfig
from agentrt.worker._payloads import PayloadStorage, payload_storage
from agentrt.worker._telemetry import ensure_telemetry, telemetry_interceptors

__all__ = ["PAYLOADS_IDENTITY_KEY", "PLUGIN_NAME", "AgentrtClientPlugin", "payload_fingerprints_of", "plugin_of"]

PLUGIN_NAME = "agentrt"
# A worker's identity ends with ``agentrt-payloads=<fingerprint>,...``: the payload storage it reads.
PAYLOADS_IDENTITY_KEY = "agentrt-payloads"


class AgentrtClientPlugin(SimplePlugin):
    """The data converter and client interceptors of agentrt, for clients.

    - ``config`` (default ``AgentrtConfig()``) decides where big payloads go (``[payloads]``,
      ``[store] url``) and the payload codec (``[codec]``); ``store`` is the open store the store
      driver uses (without it the driver opens ``config.database_url`` on first use), given the
      codec keys' cipher when it has none (``encrypt_store``: content sealed at rest); ``driver``
      replaces the configured payload writer (e.g. the SDK's S3 driver).
    - ``interceptors``: client and worker interceptors (none by default).
    - ``config.telemetry`` on (``[telemetry] enabled``, ``AGENTRT_TELEMETRY=1``): installs the
      process's tracer and meter providers unless it has some (``setup_telemetry``), and adds
      Temporal's ``TracingInterceptor`` (unless ``interceptors`` has one) and ``EventMeasures``.

    ``workflow_failure_exception_types`` is empty on purpose (see ``AgentrtPlugin``).
    """

    def __init__(
        self,
        config: AgentrtConfig | None = None,
        store: Store | None = None,
        *,
        driver: StorageDriver | None = None,
        interceptors: Sequence[temporalio.client.Interceptor | temporalio.worker.Interceptor] = (),
    ) -> None:
        self.config = config or AgentrtConfig()
        self.store = store
        if store is not None:
            encrypt_store(store, self.config.codec)
        self.payload_storage: PayloadStorage = payload_storage(self.config, store, driver=driver)
        ensure_telemetry(self.config.telemetry)
        traced = telemetry_interceptors(interceptors) if self.config.telemetry.enabled else []
        super().__init__(
            PLUGIN_NAME,
            data_converter=self.payload_storage.data_converter(),
            interceptors=[*interceptors, *traced],
            workflow_failure_exception_types=[],
        )


def payload_fingerprints_of(identity: str) -> list[str] | None:
    """The payload fingerprints a worker identity advertises, or None when it advertises none."""
    marker = PAYLOADS_IDENTITY_KEY + "="
    for part in identity.split():
        if part.startswith(marker):
            return [f for f in part[len(marker):].split(",") if f]
    return None


def plugin_of(client: temporalio.client.Client) -> AgentrtClientPlugin | None:
    """The agentrt plugin a client was connected with (``AgentrtClientPlugin`` or ``AgentrtPlugin``), if any."""
    for plugin in client.config().get("plugins", []):
        if isinstance(plugin, AgentrtClientPlugin):
            return plugin
    return None
