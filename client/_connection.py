"""The one connection factory: every agentrt client connects with the AgentrtPlugin.

The plugin carries the data converter, including the external storage for big payloads.
A worker built on a client inherits the client's plugins, so that converter decides where
big payloads go; a client that reads what a worker wrote needs the same storage.
"""

from __future__ import annotations

from temporalio.client import Client

from agentrt.worker import AgentrtConfig, AgentrtPlugin


async def connect(address: str, namespace: str = "default", *, plugin: AgentrtPlugin | None = None) -> Client:
    """Connect to the Temporal frontend at ``address`` (``host:port``) with ``plugin``.

    ``plugin`` is normally ``AgentrtPlugin(config, store)`` for the process's configuration
    and open store. Without it, the plugin is built from ``AgentrtConfig.load()``
    (``$AGENTRT_CONFIG``, ``./agentrt.toml`` or ``$AGENTRT_HOME/agentrt.toml``, plus
    environment): the configuration an ``agentrt worker`` on the same machine reads, so both
    store and find big payloads in the same place; its store is opened only when a payload
    needs it.

    Raises ``RuntimeError`` from the SDK when nothing answers at ``address``, and
    ``schemas.ConfigurationError`` when the default configuration cannot be read.
    """
    if plugin is None:
        plugin = AgentrtPlugin(AgentrtConfig.load())
    return await Client.connect(address, namespace=namespace, plugins=[plugin])
