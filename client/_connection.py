"""The one connection factory: client and worker share the data converter and interceptors.

The data converter also carries the external storage for big payloads. A worker encodes
and decodes with the converter of the client it is built on, so that converter decides
where big payloads go; a client that reads what a worker wrote needs the same drivers.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.converter import DataConverter

from agentrt.worker import AgentrtConfig, build_data_converter


async def connect(address: str, namespace: str = "default", *, data_converter: DataConverter | None = None) -> Client:
    """Connect to the Temporal frontend at ``address`` (``host:port``).

    ``data_converter`` is normally ``build_data_converter(config, store)`` for the process's
    configuration and open store. Without it, the converter is built from
    ``AgentrtConfig.load()`` (``agentrt.toml`` or ``$AGENTRT_CONFIG`` plus environment):
    the configuration an ``agentrt worker`` started in the same directory and environment
    reads, so both store and find big payloads in the same place; its store is opened only
    when a payload needs it.

    Raises ``RuntimeError`` from the SDK when nothing answers at ``address``, and
    ``schemas.ConfigurationError`` when the default configuration cannot be read.
    """
    if data_converter is None:
        data_converter = build_data_converter(AgentrtConfig.load())
    return await Client.connect(address, namespace=namespace, data_converter=data_converter)
